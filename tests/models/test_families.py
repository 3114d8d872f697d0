"""The declarative family entries, per-layer masks (sliding windows, local/global layers) against
Hugging Face's own forward, the mask check, and the full-mode-only fallback."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.schedule import parse_schedule
from rankcollapse.models import iter_hidden_states, load_model
from rankcollapse.models.checkpoints import TINY_CONFIGS
from rankcollapse.models.diagnose import check_masks
from rankcollapse.models.families import FAMILIES
from rankcollapse.models.loading import dissect
from rankcollapse.models.registry import SUPPORTED
from rankcollapse.models.spec import FamilySpec
from rankcollapse.models.stream import fused_attention

WINDOWED = {  # the tiny configs' own schedules (window of 4 keys: causal-window:w=3)
    "mistral": ["causal-window:w=3"] * 4,
    "qwen2": ["causal", "causal", "causal-window:w=3", "causal-window:w=3"],
    "gemma2": ["causal-window:w=3", "causal"] * 2,
    "gemma3_text": ["causal-window:w=3", "causal"] * 2,
}


def test_every_family_entry_has_a_tiny_config_and_the_documented_list_is_the_entries():
    """Three lists kept by hand must agree: the family entries, the tiny configs (one per entry, each of
    its own model_type) and the families docs/models.md tells users they can load as ``tiny:<name>``."""
    import re
    from pathlib import Path

    assert set(FAMILIES) == set(TINY_CONFIGS), set(FAMILIES) ^ set(TINY_CONFIGS)
    assert all(TINY_CONFIGS[name]["model_type"] == name for name in FAMILIES)
    assert all(isinstance(f, FamilySpec) for f in FAMILIES.values())
    doc = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    line = next(row for row in doc.splitlines() if row.startswith("| `tiny:<model_type>`"))
    documented = re.findall(r"`([a-z0-9_]+)`", line.split("|")[1].split(":", 1)[1])
    assert documented and set(documented) == set(SUPPORTED), set(documented) ^ set(SUPPORTED)


def test_a_bad_entry_is_refused_when_written():
    with pytest.raises(ValueError, match="placement"):
        replace(FAMILIES["llama"], placement="sideways")
    with pytest.raises(ValueError, match="sandwich"):
        replace(FAMILIES["llama"], placement="sandwich")


@pytest.mark.parametrize("arch,own", list(WINDOWED.items()))
def test_each_layer_uses_the_mask_its_config_defines(tiny_models, arch, own):
    model = tiny_models(arch, "f64")
    assert [model.own_layer_mask(t).spec for t in range(4)] == own


@pytest.mark.parametrize("arch", list(WINDOWED))
def test_windows_matter_and_a_single_causal_mask_does_not_reproduce_hf(tiny_models, ids, arch):
    """n = 12 > window 4: HF's rows differ from an all-causal run, so the oracle of test_parts checks
    the per-layer windows (in both backends)."""
    model = tiny_models(arch, "f64", hf_casts=True)
    with torch.inference_mode():
        ref = model.hf_model(input_ids=ids, output_hidden_states=True).hidden_states
    causal = [x.clone() for _, _, x in iter_hidden_states(model, ids, mask="causal")]
    assert float((causal[3] - ref[3]).abs().max()) > 1e-3  # after model layer 2, windowed in each


@pytest.mark.parametrize("arch", ["mistral", "qwen2", "gemma2", "gemma3_text", "llama", "gpt2", "bert", "t5"])
def test_hf_attention_support_equals_the_configs_masks(tiny_models, ids, arch):
    checks = check_masks(tiny_models(arch, "f32"), ids)
    assert len(checks) == 4 and all(c.matches for c in checks), [c.describe() for c in checks]


def test_the_mask_check_catches_a_model_whose_masks_differ_from_what_we_expect(tiny_models, ids):
    model = load_model("tiny:mistral", "f32")
    model.own_schedule = parse_schedule("causal", 4)  # pretend the config said causal
    checks = check_masks(model, ids)
    assert not any(c.matches for c in checks)
    assert all(c.zero_inside > 0 and c.outside == 0 for c in checks)  # HF's window leaves pairs at 0


def test_a_user_mask_applies_to_every_layer_and_a_schedule_must_fit(tiny_models, ids):
    model = tiny_models("qwen2", "f64")
    rows = [x.clone() for _, _, x in iter_hidden_states(model, ids, mode="attn", mask="causal-window:w=3")]
    same = [x.clone() for _, _, x in iter_hidden_states(model, ids, mode="attn",
                                                        mask="causal-window:w=3*4")]
    assert all(torch.equal(a, b) for a, b in zip(rows, same, strict=True))
    with pytest.raises(RankCollapseError, match="period 3, which does not divide"):
        list(iter_hidden_states(model, ids, mask="causal;causal;complete"))


def test_user_schedule_equal_to_the_own_one_keeps_the_fast_path(tiny_models, ids):
    from rankcollapse.models.stream import is_own_mask

    model = tiny_models("gemma2", "f32")
    assert is_own_mask(model, "causal-window:w=3;causal", 12)
    assert not is_own_mask(model, "causal", 12)
    assert is_own_mask(model, None, 12)


def test_gemma_scales_embeddings_caps_logits_and_uses_query_pre_attn_scalar(tiny_models, ids):
    model = tiny_models("gemma2", "f64")
    p = model.layers[0]
    assert p.d_qk == 24.0 and p.logit_softcap == 5.0 and p.norm_placement == "sandwich"
    raw = model.hf_model.embed_tokens.weight[ids]
    torch.testing.assert_close(model.embed(ids), raw * 64 ** 0.5, rtol=1e-12, atol=0)
    g3 = tiny_models("gemma3_text", "f64")
    assert g3.layers[0].q_norm is not None and [q.rotary_type for q in g3.layers] == [
        "sliding_attention", "full_attention"] * 2


def test_partial_rotary_leaves_the_other_features_alone(tiny_models, ids):
    model = tiny_models("gpt_neox", "f64")
    x = model.embed(ids)
    cos, sin = model.positions(x).rotary
    assert cos.shape[-1] == 4  # a quarter of head_dim 16
    from rankcollapse.core.positions import apply_rotary

    q = torch.randn(3, 4, 12, 16, dtype=torch.float64)
    out = apply_rotary(q, cos.unsqueeze(1), sin.unsqueeze(1))
    assert torch.equal(out[..., 4:], q[..., 4:]) and not torch.allclose(out[..., :4], q[..., :4])


def test_parallel_residual_off_is_pre_ln(ids):
    from transformers import GPTNeoXConfig, GPTNeoXModel

    cfg = GPTNeoXConfig(**{k: v for k, v in TINY_CONFIGS["gpt_neox"].items() if k != "model_type"},
                        vocab_size=30522)
    cfg.use_parallel_residual = False
    torch.manual_seed(0)
    hf = GPTNeoXModel(cfg).eval()
    model = dissect(hf)
    assert model.layers[0].norm_placement == "pre"
    with torch.inference_mode():
        ref = hf(input_ids=ids, output_hidden_states=True).hidden_states
    rows = [x.clone() for _, _, x in iter_hidden_states(model, ids, backend="parts")]
    torch.testing.assert_close(model.final_norm(rows[-1]), ref[-1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rows[2], ref[2], rtol=1e-5, atol=1e-5)


def test_an_undissected_model_runs_full_mode_through_hf_and_refuses_the_rest(ids, capsys):
    from transformers import OPTConfig, OPTModel

    torch.manual_seed(0)
    hf = OPTModel(OPTConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                            num_attention_heads=4, word_embed_proj_dim=32, max_position_embeddings=64,
                            pad_token_id=0, attn_implementation="eager")).eval()
    model = dissect(hf, name="opt")
    assert not model.dissected and "not dissected" in model.info["note"]
    with torch.inference_mode(), fused_attention(model):  # HF's own default forward (sdpa)
        ref = hf(input_ids=ids, output_hidden_states=True).hidden_states
    rows = [x.clone() for _, _, x in iter_hidden_states(model, ids)]
    assert len(rows) == 3 and all(torch.equal(a, b) for a, b in zip(rows, ref, strict=True))
    for kw in ({"mode": "attn"}, {"mask": parse_mask("complete")}, {"layers": 5}, {"backend": "parts"}):
        with pytest.raises(RankCollapseError, match="not dissected"):
            list(iter_hidden_states(model, ids, **kw))
    with pytest.raises(RankCollapseError, match="diagnostics from the kernel"):
        list(iter_hidden_states(model, ids, record={}))
    record: dict = {}
    for t, _, x in iter_hidden_states(model, ids, record=record, kernel_stats=True):  # through its interface
        assert torch.equal(x, ref[t])
        if t:
            assert record.pop("rows").entropy.shape == (3, 4, ids.shape[1])


def test_a_config_the_entry_does_not_implement_falls_back_to_full_only(capsys):
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_embd=32, n_head=4, n_layer=2, n_positions=64, vocab_size=30522,
                     scale_attn_by_inverse_layer_idx=True)
    model = dissect(GPT2Model(cfg).eval())
    assert not model.dissected and "scale_attn_by_inverse_layer_idx" in model.info["note"]


def test_deeper_runs_cycle_each_model_layers_own_mask(tiny_models):
    from rankcollapse.models.stream import layer_masks

    model = tiny_models("qwen2", "f32")
    assert [m.spec for m in layer_masks(model, None, 8)] == WINDOWED["qwen2"] * 2


def test_gated_t5_runs_in_full_mode_only_with_the_reason(ids):
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2, vocab_size=30522,
                   feed_forward_proj="gated-gelu")
    hf = T5EncoderModel(cfg).eval()
    model = dissect(hf)
    assert not model.dissected and "is_gated_act" in model.info["note"] and "flan-t5" in model.info["note"]
    rows = [x.clone() for _, _, x in iter_hidden_states(model, ids)]
    with torch.inference_mode(), fused_attention(model):  # HF's own default forward (sdpa)
        ref = hf(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(rows) == 3 and torch.equal(rows[-1], ref[-1])
