"""A model's own mask schedule from its config: the legacy rules agree with transformers' layer_types."""

from __future__ import annotations

import json

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.hf_schedule import schedule_from_hf_config

transformers = pytest.importorskip("transformers")


def _configs() -> list:
    return [
        transformers.Gemma3TextConfig(num_hidden_layers=14, sliding_window=16),
        transformers.Gemma2Config(num_hidden_layers=5, sliding_window=8),
        transformers.Qwen2Config(num_hidden_layers=6, use_sliding_window=True, max_window_layers=3,
                                 sliding_window=8),
        transformers.Qwen2Config(num_hidden_layers=3),
        transformers.MistralConfig(num_hidden_layers=3, sliding_window=5),
        transformers.LlamaConfig(num_hidden_layers=2),
    ]


@pytest.mark.parametrize("index", range(6))
def test_schedule_with_and_without_layer_types_matches_transformers(index: int) -> None:
    config = _configs()[index].to_dict()
    sw = config.get("sliding_window")
    types = config.get("layer_types") or (["sliding_attention" if sw else "full_attention"]
                                          * config["num_hidden_layers"])
    expected = [f"causal-window:w={sw - 1}" if t == "sliding_attention" else "causal" for t in types]
    assert [m.spec for m in schedule_from_hf_config(config).masks] == expected
    legacy = {k: v for k, v in config.items() if k != "layer_types"}  # older configs: the family's rule
    assert [m.spec for m in schedule_from_hf_config(legacy).masks] == expected


def test_encoders_are_complete_in_every_layer_and_unknown_families_are_refused() -> None:
    bert = transformers.BertConfig(num_hidden_layers=3).to_dict()
    assert [m.spec for m in schedule_from_hf_config(bert).masks] == ["complete"] * 3
    with pytest.raises(RankCollapseError, match="has no known mask schedule"):
        schedule_from_hf_config({"model_type": "mamba", "num_hidden_layers": 2})
    with pytest.raises(RankCollapseError, match="layer_types has 1 entries"):
        schedule_from_hf_config({"model_type": "gemma2", "num_hidden_layers": 2, "sliding_window": 4,
                                 "layer_types": ["full_attention"]})


def test_cli_reads_a_config_file_and_refuses_a_depth_that_does_not_fit(tmp_path, capsys) -> None:
    path = tmp_path / "config.json"
    config = transformers.Gemma3TextConfig(num_hidden_layers=12, sliding_window=512)
    path.write_text(json.dumps(config.to_dict()))
    assert main(["mask", "--hf-config", str(tmp_path), "--tokens", "4096", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["layers"] == 12 and facts["layers_to_center"] == 6 and facts["windows"] == [[0, 6], [6, 12]]
    assert main(["mask", "--hf-config", str(path), "--tokens", "64", "--layers", "5"]) == 2
    err = capsys.readouterr().err
    assert "does not fit the model, which has 12 layers" in err and len(err.strip().splitlines()) == 1
    assert main(["mask", "causal", "--hf-config", str(path), "--tokens", "8"]) == 2
    assert main(["mask", "--hf-config", str(tmp_path / "nope"), "--tokens", "8"]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize(("layers", "period"), [
    (["a", "b", "a", "b"], ["a", "b"]),
    (["a"] * 5, ["a"]),
    (["a", "a", "b"], ["a", "a", "b"]),
    (["a", "b", "a"], ["a", "b"]),  # repeats to the depth, though 2 does not divide 3
])
def test_reduced_keeps_every_layer_with_the_shortest_period(layers, period) -> None:
    from rankcollapse.masks.schedule import schedule_from_masks

    spec = {"a": "causal", "b": "causal-window:w=3"}
    sched = schedule_from_masks([spec[x] for x in layers])
    small = sched.reduced()
    assert [m.spec for m in small.period] == [spec[x] for x in period]
    assert [m.spec for m in small.masks] == [m.spec for m in sched.masks] and small.depth == sched.depth


def test_mask_model_reads_a_models_schedule_without_its_weights(capsys) -> None:
    assert main(["mask", "--model", "tiny:gemma3_text", "--tokens", "64", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["layers"] == 4 and facts["period"] == 2  # sliding, full, sliding, full
    assert main(["mask", "--model", "random:gpt2,layers=3", "--tokens", "16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == 3
    assert main(["mask", "--model", "tiny:gemma3_text", "--tokens", "64", "--layers", "6"]) == 2
    assert "does not fit the model, which has 4 layers" in capsys.readouterr().err
    assert main(["mask", "causal", "--model", "tiny:llama", "--tokens", "8"]) == 2
    assert "give one of SPEC, --hf-config, --model" in capsys.readouterr().err
    assert main(["mask", "--model", "no-such-model", "--tokens", "8"]) == 2
    assert "unknown model" in capsys.readouterr().err
