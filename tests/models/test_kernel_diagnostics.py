"""``--diagnostics`` from each layer's fused kernel call (the kernel path) against the reference: every
diagnostic column equal, 1e-12 relative in float64 and ``n L eps32`` in float32, to the same column from
the whole attention maps: the materialising path (``on_attention``) for the tiny families, Hugging Face's
eager ``output_attentions`` and an exact float64 map of the same queries and keys for models built in
memory that no family entry dissects (OLMo-2, Granite, Cohere, StarCoder2, OPT, GPT-OSS with learned
sink logits)."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.attention import masked_softmax
from rankcollapse.models import AnalyzeConfig, analyze, load_model
from rankcollapse.models.diagnose import diagnostic_row, diagnostic_values

N = 12
EPS32 = torch.finfo(torch.float32).eps
FAMILIES = ["bert", "roberta", "distilbert", "albert", "mpnet", "t5", "gpt2", "gpt_neox", "llama", "mistral",
            "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text", "vit"]
BLOCKS = {"gemma2": "soft-capping", "t5": "relative-position bias", "mpnet": "relative-position bias"}
ATTENTION = ("attention_entropy", "normalized_attention_entropy", "first_token_attention", "sink_rate")

#: Query and key weights times this in the models built here: far from uniform attention, heads that differ.
SHARPEN = 4.0


def _tolerance(dtype: str, n: int, layers: int) -> float:
    """float64: 1e-12. float32: each layer rounds its n-term sums (the kernel's lse and ``A K``, the
    reference's softmax and entropy) in another order, ``n eps32`` relative per layer: ``n L eps32``."""
    return 1e-12 if dtype == "float64" else n * layers * EPS32


def _diagnostic(key: str) -> bool:
    return key in ATTENTION or key.startswith(("attention_entropy_h", "first_token_attention_h")) or key in (
        "sink_heads", "first_token_norm", "top_activation", "massive_ratio")


def _compare(want_rows, got_rows, rtol: float) -> int:
    """Every diagnostic column of every row; returns how many values were compared."""
    assert len(want_rows) == len(got_rows)
    seen = 0
    for a, b in zip(want_rows, got_rows, strict=True):
        for key, want in a.items():
            if not _diagnostic(key):
                continue
            have = b[key]
            seen += 1
            if isinstance(want, str):
                assert have == want, (key, have, want)
            elif math.isnan(want):
                assert math.isnan(have), key
            else:
                where = (a.get("layer"), key, have, want)
                assert math.isclose(have, want, rel_tol=rtol, abs_tol=rtol * 1e-3), where
    return seen


def _sharpened(arch: str, dtype: str):
    model = load_model(f"tiny:{arch}", dtype, seed=0)
    with torch.no_grad():
        for name, p in model.hf_model.named_parameters():
            if any(k in name for k in ("q_proj.weight", "k_proj.weight", ".query.weight", ".key.weight",
                                       "q_lin.weight", "k_lin.weight", ".q.weight", ".k.weight")):
                p.mul_(SHARPEN)
    from rankcollapse.models.loading import dissect

    return dissect(model.hf_model, name=model.name, tokenizer=model.tokenizer,
                   hf_casts=bool(model.info.get("hf_casts", True)) and dtype == "float32")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("arch", FAMILIES)
def test_the_kernel_path_gives_the_whole_maps_diagnostics_on_every_tiny_family(arch, dtype, ids):
    """The default path against the materialising reference, each on the backend a run takes (the kernel on
    the model's own modules where ``auto`` picks them); 3 families keep the blocks path (config.json says
    why)."""
    model = _sharpened(arch, dtype)
    cfg = dict(model=f"tiny:{arch}", dtype=dtype, samples=3, metrics=("mu",), diagnostics=True,
               sink_threshold=0.2)
    kw = {"ids": ids} if arch != "vit" else {}
    if arch != "vit":
        cfg["tokens"] = N
    ref = analyze(AnalyzeConfig(**cfg), model=model, on_attention=lambda t, a: None, **kw)
    got = analyze(AnalyzeConfig(**cfg), model=model, **kw)
    path = got.model_info["diagnostics_path"]
    if arch in BLOCKS:
        assert path.startswith("blocks: ") and BLOCKS[arch] in path
    else:
        assert path.startswith("kernel: ")
    n = got.ids.shape[1] if got.ids is not None else 17
    assert _compare(ref.rows, got.rows, _tolerance(dtype, n, len(ref.rows) - 1)) > 20


@pytest.mark.parametrize("arch", ["llama", "mistral", "gpt2", "bert", "gemma3_text"])
def test_the_kernel_path_on_the_parts_backend_equals_the_maps_to_float32_rounding(arch, ids):
    """float32 on the dissected parts (a mask override or a surgery mode takes them): the same function."""
    model = _sharpened(arch, "float32")
    for cfg in (dict(backend="parts"), dict(mode="attn+ln"), dict(mask="window:w=3")):
        base = dict(model=f"tiny:{arch}", samples=3, tokens=N, metrics=("mu",), diagnostics=True, **cfg)
        ref = analyze(AnalyzeConfig(**base), model=model, ids=ids, on_attention=lambda t, a: None)
        got = analyze(AnalyzeConfig(**base), model=model, ids=ids)
        assert got.model_info["backend"] == "parts"
        assert got.model_info["diagnostics_path"].startswith("kernel")
        _compare(ref.rows, got.rows, _tolerance("float32", N, 4))


def _built(kind: str, dtype: torch.dtype) -> torch.nn.Module:
    """A small model of a family no entry dissects, built from its config, queries and keys sharpened."""
    import transformers as hf

    common = dict(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, bos_token_id=1,
                  eos_token_id=2)
    configs = {
        "olmo2": ("Olmo2Model", "Olmo2Config", common),
        "granite": ("GraniteModel", "GraniteConfig", common),
        "cohere": ("CohereModel", "CohereConfig", common),
        "starcoder2": ("Starcoder2Model", "Starcoder2Config", {**common, "sliding_window": 5}),
        "opt": ("OPTModel", "OPTConfig", dict(vocab_size=100, hidden_size=64, num_hidden_layers=3,
                                              num_attention_heads=4, ffn_dim=128, word_embed_proj_dim=64)),
        "gpt_oss": ("GptOssModel", "GptOssConfig", {**common, "intermediate_size": 64, "head_dim": 16,
                                                     "num_local_experts": 2, "num_experts_per_tok": 1,
                                                     "sliding_window": 5,
                                                     "layer_types": ["sliding_attention", "full_attention",
                                                                     "sliding_attention"]}),
    }
    model_name, config_name, kw = configs[kind]
    torch.manual_seed(0)
    model = getattr(hf, model_name)(getattr(hf, config_name)(**kw)).to(dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(SHARPEN)
        for name, p in model.named_parameters():
            if name.endswith("sinks"):
                p.copy_(torch.linspace(-1.0, 2.0, p.numel()))  # learned sink logits that matter
    return model


def _exact_maps(model: torch.nn.Module, ids: torch.Tensor) -> tuple[list[torch.Tensor], tuple]:
    """Each layer's exact map from the queries and keys its attention function receives (float64 masked
    softmax of ``scaling q k^T`` under the mask it is handed, with the sink logit as one more key), the
    model's own eager output returned, and the hidden states."""
    import sys

    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    maps: list[torch.Tensor] = []

    def exact(module, q, k, v, mask, **kwargs):
        eager = sys.modules[type(module).__module__].eager_attention_forward
        out = eager(module, q, k, v, mask, **kwargs)
        kk = k.repeat_interleave(q.shape[1] // k.shape[1], 1).double()
        logits = kwargs["scaling"] * q.double() @ kk.transpose(-1, -2)
        allowed = mask > torch.finfo(mask.dtype).min / 2
        logits = logits.masked_fill(~allowed, -math.inf)
        sinks = getattr(module, "sinks", None)
        if sinks is not None:
            aux = sinks.double().reshape(1, -1, 1, 1).expand(*logits.shape[:-1], 1)
            maps.append(torch.softmax(torch.cat([logits, aux], -1), -1))
        else:
            maps.append(masked_softmax(logits, allowed))
        return out

    AttentionInterface.register("test_exact_map", exact)
    AttentionMaskInterface.register("test_exact_map", ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    before = model.config._attn_implementation
    model.config._attn_implementation = "test_exact_map"
    try:
        with torch.inference_mode():
            states = model(input_ids=ids, output_hidden_states=True).hidden_states
    finally:
        model.config._attn_implementation = before
    return maps, states


def _by_hand(maps, states, masks, threshold: float) -> list[dict]:
    rows = [diagnostic_row(diagnostic_values(states[0], None, None, threshold), threshold, maps[0].shape[1])]
    for t in range(1, len(states)):
        a = maps[t - 1]
        m = masks[t - 1]
        if a.shape[-1] != a.shape[-2]:  # the sink column: weights over keys and sink, entropy of all
            per = diagnostic_values(states[t], a[..., :-1], m, threshold)
            ent = -torch.special.xlogy(a, a).sum(-1)  # [b, h, i]
            per["attention_entropy"] = ent.mean(-1)
            keys = m.sum(-1).double()
            choice = keys > 1
            ratio = torch.where(choice, ent / torch.log(keys.clamp(min=2)), 0.0)
            per["normalized_attention_entropy"] = ratio.sum(-1) / choice.sum(-1)
            rows.append(diagnostic_row(per, threshold))
        else:
            rows.append(diagnostic_row(diagnostic_values(states[t], a, m, threshold), threshold))
    return rows


def _layer_masks(kind: str, n: int) -> list[torch.Tensor]:
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    window = causal & ~torch.ones(n, n, dtype=torch.bool).tril(-5)
    if kind == "starcoder2":
        return [window] * 3
    if kind == "gpt_oss":
        return [window, causal, window]
    return [causal] * 3


@pytest.mark.parametrize(("kind", "dtype"), [("olmo2", "float64"), ("granite", "float64"),
                                           ("cohere", "float64"), ("starcoder2", "float64"),
                                           ("opt", "float64"), ("gpt_oss", "float32")])
def test_an_undissected_model_in_memory_has_the_exact_maps_diagnostics(kind, dtype):
    """float64 (GPT-OSS: float32, its experts have no float64 kernel) against the exact float64 map of the
    queries and keys each layer's attention function receives; GPT-OSS's learned sink logits take their
    share of each row (its entropy is that of the softmax over keys and sink)."""
    model = _built(kind, getattr(torch, dtype))
    own = model.config._attn_implementation
    ids = torch.randint(3, 100, (3, N), generator=torch.Generator().manual_seed(2))
    ids[:, 0] = 1
    maps, states = _exact_maps(model, ids)
    want = _by_hand(maps, states, _layer_masks(kind, N), 0.2)
    got = analyze(AnalyzeConfig(model=kind, samples=3, tokens=N, metrics=("mu",), diagnostics=True,
                                sink_threshold=0.2), model=model, ids=ids)
    assert got.model_info["diagnostics_path"].startswith("kernel: ") and not got.model_info["dissected"]
    assert _compare(want, got.rows, _tolerance(dtype, N, 3)) > 30
    assert model.config._attn_implementation == own


@pytest.mark.parametrize("kind", ["olmo2", "granite"])
def test_an_undissected_model_in_float32_has_hugging_faces_eager_diagnostics(kind):
    """Against Hugging Face's own eager ``output_attentions`` (the run itself takes SDPA, wrapped)."""
    model = _built(kind, torch.float32)
    ids = torch.randint(3, 100, (3, N), generator=torch.Generator().manual_seed(2))
    ids[:, 0] = 1
    model.config._attn_implementation = "eager"
    with torch.inference_mode():
        out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
    want = _by_hand(out.attentions, out.hidden_states, _layer_masks(kind, N), 0.2)
    model.config._attn_implementation = "sdpa"
    got = analyze(AnalyzeConfig(model=kind, samples=3, tokens=N, metrics=("mu",), diagnostics=True,
                                sink_threshold=0.2), model=model, ids=ids)
    assert _compare(want, got.rows, _tolerance("float32", N, 3)) > 30


def test_padded_texts_of_an_undissected_model_give_each_text_alone():
    model = _built("olmo2", torch.float64)
    ids = torch.randint(3, 100, (3, N), generator=torch.Generator().manual_seed(5))
    ids[:, 0] = 1
    mask = torch.ones(3, N, dtype=torch.long)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    cfg = AnalyzeConfig(model="olmo2", samples=3, tokens=N, metrics=("mu",), diagnostics=True)
    batch = analyze(cfg, model=model, ids=ids, attention_mask=mask)
    alone = [analyze(AnalyzeConfig(model="olmo2", samples=1, tokens=int(m.sum()), metrics=("mu",),
                                   diagnostics=True), model=model, ids=i[None, : int(m.sum())])
             for i, m in zip(ids, mask, strict=True)]
    for t in range(1, len(batch.rows)):
        for key in ("attention_entropy", "normalized_attention_entropy", "first_token_attention"):
            want = sum(r.rows[t][key] for r in alone) / 3
            assert math.isclose(batch.rows[t][key], want, rel_tol=1e-12), (t, key)


def test_the_kernel_path_forms_no_map_and_no_block(tiny_models, ids, monkeypatch):
    """No softmax of a kernel-path run sees more than one row's worth of a map: the parts' masked softmax
    is never called, and the statistics come from the kernel's lse."""
    from rankcollapse.models import parts as parts_module

    def refuse(*args, **kwargs):
        raise AssertionError("a map was formed")

    monkeypatch.setattr(parts_module, "masked_softmax", refuse)
    for arch, dtype in (("llama", "f32"), ("llama", "f64"), ("gpt2", "f32")):
        got = analyze(AnalyzeConfig(model=f"tiny:{arch}", dtype="float64" if dtype == "f64" else "float32",
                                    samples=3, tokens=N, metrics=("mu",), diagnostics=True),
                      model=tiny_models(arch, dtype), ids=ids)
        assert got.model_info["diagnostics_path"].startswith("kernel: ")
