"""Model names say what they are: the paper's checkpoint, a random init of its exact config, a stand-in."""

from __future__ import annotations

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import CHECKPOINT_CONFIGS, PAPER_CHECKPOINTS, paper_model, resolve_model
from rankcollapse.models.registry import hf_cached

PAPER_CACHED = any(hf_cached(h) for h in PAPER_CHECKPOINTS.values())


@pytest.mark.parametrize("short", list(PAPER_CHECKPOINTS))
def test_random_checkpoint_names_carry_that_checkpoints_config(short):
    src = resolve_model(f"random:{short}")
    assert src.kind == "random" and not src.pretrained and src.checkpoint == short
    assert src.config == CHECKPOINT_CONFIGS[short] and "random init" in src.label


def test_checkpoint_configs_are_base_sized():
    bert, gpt2 = CHECKPOINT_CONFIGS["bert-base-uncased"], CHECKPOINT_CONFIGS["gpt2"]
    t5, albert = CHECKPOINT_CONFIGS["t5-base"], CHECKPOINT_CONFIGS["albert-base-v2"]
    assert (bert["hidden_size"], bert["num_hidden_layers"], bert["num_attention_heads"]) == (768, 12, 12)
    assert (gpt2["n_embd"], gpt2["n_layer"], gpt2["n_head"], gpt2["vocab_size"]) == (768, 12, 12, 50257)
    t5_sizes = (t5["d_model"], t5["d_kv"], t5["d_ff"], t5["num_layers"], t5["num_heads"])
    assert t5_sizes == (768, 64, 3072, 12, 12)
    assert (albert["hidden_size"], albert["embedding_size"], albert["intermediate_size"]) == (768, 128, 3072)


def test_hf_config_of_random_bert_base_equals_the_published_one():
    from rankcollapse.models.loading import _hf_config

    cfg = _hf_config(resolve_model("random:bert-base-uncased"))
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.layer_norm_eps, cfg.initializer_range) == (
        768, 3072, 1e-12, 0.02)
    t5 = _hf_config(resolve_model("random:t5-base"))
    assert (t5.d_model, t5.num_heads, t5.layer_norm_epsilon, t5.is_gated_act) == (768, 12, 1e-6, False)


@pytest.mark.skipif(PAPER_CACHED, reason="a paper checkpoint is in the local Hugging Face cache")
@pytest.mark.parametrize("hub", list(PAPER_CHECKPOINTS.values()))
def test_paper_checkpoint_not_cached_is_one_line_naming_stand_ins(hub):
    with pytest.raises(RankCollapseError) as info:
        resolve_model(hub)
    msg = str(info.value)
    assert "\n" not in msg and "not in the local Hugging Face cache" in msg and "random:" in msg


@pytest.mark.skipif(PAPER_CACHED, reason="a paper checkpoint is in the local Hugging Face cache")
def test_paper_model_falls_back_to_a_labelled_stand_in():
    src = paper_model("google-t5/t5-base")
    assert src.name == "random:t5-base" and src.stand_in_for == "t5-base"
    assert "stand-in for t5-base" in src.label
    gpt = paper_model("gpt2")
    assert gpt.name == "smollm2" and gpt.pretrained and gpt.stand_in_for == "gpt2"
    assert paper_model("bert-base-uncased", stand_in="random").name == "random:bert-base-uncased"
    assert paper_model("bert-base-uncased", stand_in="minilm").label.startswith("all-MiniLM")


def test_tiny_bundled_and_retired_names(capsys):
    assert resolve_model("tiny:t5").kind == "tiny"
    assert resolve_model("minilm").kind == "bundled" and resolve_model("mpnet").family == "mpnet"
    # random:<family> of the tiny models was retired in 0.2.0: tiny:<family> (random:<checkpoint> is a
    # checkpoint's config); the old name is refused in one line that names the tiny models' spelling
    for old in ("bert", "albert", "llama"):
        with pytest.raises(RankCollapseError, match=f"random model '{old}' is not supported") as info:
            resolve_model(f"random:{old}")
        assert "(or tiny:<family>)" in str(info.value) and "\n" not in str(info.value)
        assert resolve_model(f"tiny:{old}").name == f"tiny:{old}"
    assert not capsys.readouterr().err
    for bad, needle in [("random:t5", "random model 't5'"), ("tiny:nope", "tiny model 'nope'"),
                        ("no-such-model", "unknown model 'no-such-model'")]:
        with pytest.raises(RankCollapseError, match=needle):
            resolve_model(bad)


def test_random_models_use_hf_init_and_are_seeded():
    import torch

    from rankcollapse.models import load_model

    a, b = load_model("tiny:bert", seed=3), load_model("tiny:bert", seed=3)
    c = load_model("tiny:bert", seed=4)
    assert torch.equal(a.layers[0].w_q, b.layers[0].w_q) and not torch.equal(a.layers[0].w_q, c.layers[0].w_q)
    assert abs(float(a.layers[0].w_q.std()) - 0.02) < 0.003  # Hugging Face's normal(0, 0.02)
    state = torch.random.get_rng_state()
    load_model("tiny:gpt2", seed=1)
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is left as it was


@pytest.mark.skipif(PAPER_CACHED, reason="a paper checkpoint is in the local Hugging Face cache")
def test_paper_prefix_names_resolve_to_labelled_stand_ins():
    src = resolve_model("paper:albert/albert-base-v2")
    assert src.name == "random:albert-base-v2" and src.stand_in_for == "albert-base-v2"
    mini = resolve_model("paper:bert-base-uncased,minilm")
    assert mini.name == "minilm" and mini.stand_in_for == "bert-base-uncased"
    assert mini.label == "all-MiniLM-L6-v2 (pretrained), stand-in for bert-base-uncased"
    with pytest.raises(RankCollapseError, match="not one of the paper's checkpoints"):
        resolve_model("paper:roberta-base")


def _fake_hf_cache(root, repo: str, model, tokenizer) -> None:
    """The Hugging Face cache layout of one repository: refs/main -> snapshots/<commit>/files."""
    commit = "0" * 40
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snap = folder / "snapshots" / commit
    model.save_pretrained(snap)
    tokenizer.save_pretrained(snap)


def test_a_cached_paper_checkpoint_is_used_offline_by_its_hub_name(tmp_path, monkeypatch):
    """A checkpoint in the local cache loads as the paper's (kind 'paper'), without any download."""
    import huggingface_hub.constants
    import torch

    from rankcollapse.models import load_model
    from rankcollapse.models.loading import bert_tokenizer

    tiny = load_model("tiny:bert", "f64")
    _fake_hf_cache(tmp_path, "albert/albert-base-v2", load_model("tiny:albert").hf_model, bert_tokenizer())
    _fake_hf_cache(tmp_path, "bert-base-uncased", tiny.hf_model, bert_tokenizer())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = resolve_model("bert-base-uncased")
    assert src.kind == "paper" and src.pretrained and src.label == "bert-base-uncased (pretrained)"
    assert paper_model("bert-base-uncased").kind == "paper"  # cached: no stand-in
    model = load_model("bert-base-uncased", "f64")
    assert model.source.kind == "paper" and torch.equal(model.layers[1].w_q, tiny.layers[1].w_q)
    assert resolve_model("albert/albert-base-v2").checkpoint == "albert-base-v2"
    with pytest.raises(RankCollapseError, match="google-t5/t5-base"):
        resolve_model("google-t5/t5-base")  # not in this cache


def test_a_bundled_model_is_named_as_it_is_and_its_stored_label_stays_as_stored():
    """SmolLM2's weights are SmolLM2-135M-Instruct, Q4_1-quantised and dequantised: its label says so
    wherever a user reads it (``rankcollapse models``, titles, analyze's model_label); the rows the
    reproduction stores keep the label they were stored under (a resumed folder stays one model), and
    the run identity never contains a label."""
    from rankcollapse.models.registry import BUNDLED_INFO, resolve_model

    smol = resolve_model("smollm2")
    assert smol.label == "SmolLM2-135M-Instruct Q4_1 (pretrained)"
    assert smol.stored_label == "SmolLM2-135M (pretrained)"
    stand_in = smol.as_stand_in("gpt2")
    assert stand_in.label == "SmolLM2-135M-Instruct Q4_1 (pretrained), stand-in for gpt2"
    assert stand_in.stored_label == "SmolLM2-135M (pretrained), stand-in for gpt2"
    assert resolve_model("minilm").stored_label == resolve_model("minilm").label
    for name, info in BUNDLED_INFO.items():
        assert "GGUF" not in info["weights"] or any(q in info["label"] for q in ("Q4", "Q8")), name
