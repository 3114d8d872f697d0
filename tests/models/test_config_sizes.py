"""A model's config checked before the model is built (``models.sizes``): the parameter count is a lower
bound within 10 % of what transformers builds for every family we dissect (the built model is the
oracle), and a config whose sizes are not whole numbers >= 1 or whose parameters do not fit in memory is
one line naming the key and value (or the estimate), before a single module is built."""

from __future__ import annotations

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.checkpoints import TINY_CONFIGS
from rankcollapse.models.loading import load_model
from rankcollapse.models.sizes import check_config, parameter_count


@pytest.mark.parametrize("name", [f"tiny:{k}" for k in TINY_CONFIGS] + ["random:gpt2"])
def test_the_parameter_count_is_a_close_lower_bound_of_the_built_model(name):
    model = load_model(name).hf_model
    built = sum(p.numel() for p in model.parameters())
    estimate = parameter_count(model.config)
    assert 0.9 * built <= estimate <= built, (estimate, built)


def test_a_config_too_large_for_memory_or_with_a_bad_size_is_refused_before_building():
    from transformers import AutoConfig

    huge = AutoConfig.for_model("bert", num_hidden_layers=10**6, hidden_size=1024, num_attention_heads=16)
    with pytest.raises(RankCollapseError, match=r"1000000 layers.*needs about \d+(\.\d)? TB of memory"):
        check_config(huge, "model 'huge'", "float32", available=64 * 10**9)
    assert check_config(AutoConfig.for_model("bert", num_hidden_layers=2), "x", available=64 * 10**9) > 0
    for key, value, words in (("num_attention_heads", 0, "num_attention_heads must be a whole number >= 1"),
                              ("vocab_size", 0, "vocab_size must be a whole number >= 1, got 0"),
                              ("num_hidden_layers", -3, "num_hidden_layers must be a whole number >= 1"),
                              ("num_attention_heads", 5, "hidden_size 768 is not a multiple of")):
        config = AutoConfig.for_model("bert")
        setattr(config, key, value)
        with pytest.raises(RankCollapseError, match=words):
            check_config(config, "model folder 'x'", available=64 * 10**9)


def test_analyze_names_the_size_not_pythons_words(tmp_path, capsys):
    """A folder whose config.json says 0 heads was 'cannot read the weights: integer modulo by zero';
    10^6 layers built for minutes. Both are one line naming the key or the estimate, exit 2."""
    import json

    from rankcollapse.cli.main import main

    folder = tmp_path / "bert"
    model = load_model("tiny:bert")
    model.hf_model.save_pretrained(folder)
    model.tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    for edit, words in (({"num_attention_heads": 0}, ["num_attention_heads", "got 0"]),
                        ({"num_hidden_layers": 10**6, "hidden_size": 1024, "num_attention_heads": 16},
                         ["1000000 layers", "needs about"])):
        (folder / "config.json").write_text(json.dumps({**config, **edit}))
        code = main(["analyze", "--model", str(folder), "--samples", "2", "--tokens", "8", "--out",
                     str(tmp_path / "out")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and all(w in err for w in words), err
        assert "modulo" not in err
