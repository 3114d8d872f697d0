"""The key-bias columns of ``--diagnostics`` (Gu et al., ICLR 2025: ``cos(q_i, k_0)`` against the other
keys, ``||k_0||`` against the others, ``||q_i||``) on every path against the reference functions of
``metrics.diagnostics`` applied to the queries and keys each layer's attention function receives: captured
through a registered attention function called by the model's own attention modules (after the rotary
embedding, GQA keys per key head), or, where a run takes the dissected parts, the parts' own.

Paths: the kernel path on the backend a run takes (the hf backend through the registered wrapper of
``models.stats_interface``), the kernel path on the dissected parts (``backend="parts"``), blocks of query
rows (``diagnostics_chunk``), and the map path's values from the queries and keys the stream records beside
each map (``record["qk"]``, what ``analyze`` would pass). Models: tiny BERT (complete mask, absolute
positions), tiny GPT-2 (causal), tiny Llama (causal, RoPE, 4 query heads on 2 key heads). Tolerances:
float64 1e-12 relative (1e-13 absolute for a cosine near 0); float32 ``n L eps32`` (each path sums n unit
vectors per layer in another order, and the parts' q and k round apart from Hugging Face's over L layers),
absolute too."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.metrics import diagnostics as dg
from rankcollapse.models import AnalyzeConfig, analyze, iter_hidden_states, load_model
from rankcollapse.models.diagnose import PER_HEAD_QUERY_KEY, diagnostic_row, diagnostic_values, mean_defined

N = 12
EPS32 = torch.finfo(torch.float32).eps
ARCHS = ["bert", "gpt2", "llama"]


def _columns(heads: int) -> list[str]:
    return [*dg.QUERY_KEY_NAMES, *(f"{k}_h{h}" for k in PER_HEAD_QUERY_KEY for h in range(heads))]


def _tolerance(dtype: str, layers: int) -> float:
    return 1e-12 if dtype == "float64" else N * layers * EPS32


Layer = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]


def _captured(model, ids: torch.Tensor, monkeypatch) -> list[Layer]:
    """Per layer, ``(q, k, allowed)`` as each of the model's own attention modules hands them to its attention
    function (``allowed``: the bool mask it means, None for none), its eager output returned: the hf backend's
    layers (the run's rotary angles, as every path takes them), eager throughout (no fused SDPA)."""
    import sys

    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    from rankcollapse.models import stream

    seen: list[Layer] = []

    def capture(module, q, k, v, mask, **kwargs):
        allowed = None
        if mask is not None:
            allowed = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
        seen.append((q.clone(), k.clone(), allowed))
        return sys.modules[type(module).__module__].eager_attention_forward(module, q, k, v, mask, **kwargs)

    AttentionInterface.register("test_capture_qk", capture)
    AttentionMaskInterface.register("test_capture_qk", ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    monkeypatch.setattr(stream, "fusable", lambda *_: False)
    hf = model.hf_model
    configs = {id(c): c for c in [hf.config, *(getattr(m, "config", None) for m in hf.modules())]
               if c is not None and hasattr(c, "_attn_implementation")}
    before = {key: c._attn_implementation for key, c in configs.items()}
    try:
        for c in configs.values():
            c._attn_implementation = "test_capture_qk"
        for _ in iter_hidden_states(model, ids, backend="hf"):
            pass
    finally:
        for key, c in configs.items():
            c._attn_implementation = before[key]
    monkeypatch.undo()
    return seen


def _rows(layers) -> list[dict[str, float]]:
    """Rows 1..L of the key-bias columns from each layer's ``(q, k, allowed)``, by the reference functions."""
    rows = []
    for q, k, allowed in layers:
        per = dg.query_key_values(q, k, allowed)
        row = {name: mean_defined(v) for name, v in per.items()}
        for name in PER_HEAD_QUERY_KEY:
            row.update({f"{name}_h{h}": mean_defined(per[name][:, h]) for h in range(q.shape[1])})
        rows.append(row)
    return rows


def _reference(model, ids: torch.Tensor, monkeypatch) -> list[dict[str, float]]:
    """The reference rows from the queries and keys Hugging Face's own attention modules hand over."""
    return _rows(_captured(model, ids, monkeypatch))


def _parts_reference(model, ids: torch.Tensor) -> list[dict[str, float]]:
    """The reference rows from the queries and keys of the dissected parts (the parts backend's: the stream
    records them beside each whole map, ``record["qk"]``), under each layer's own mask."""
    record: dict = {}
    layers = []
    for t, _, _ in iter_hidden_states(model, ids, record=record):
        if t:
            record.pop("attn")
            q, k = record.pop("qk")
            layers.append((q, k, model.own_layer_mask(t - 1).dense(ids.shape[1])))
    return _rows(layers)


def _close(got: dict, want: dict, tol: float, where: str) -> None:
    for key, w in want.items():
        g = got[key]
        assert math.isfinite(w), (where, key)
        assert math.isclose(g, w, rel_tol=tol, abs_tol=tol * 1e-1), (where, key, g, w)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("arch", ARCHS)
def test_every_diagnostics_path_gives_the_reference_key_bias_columns(arch, dtype, ids, monkeypatch):
    """The reference: the queries and keys of the backend the run takes, Hugging Face's own modules' (hf)
    or the dissected parts' (tiny Llama in float64: Hugging Face's eager softmax rounds to float32, only
    the parts compute it in float64); the parts' are Hugging Face's to the rounding of its rotary angles."""
    model = load_model(f"tiny:{arch}", dtype, seed=0)
    heads = model.layers[0].n_heads
    base = dict(model=f"tiny:{arch}", dtype=dtype, samples=3, tokens=N, metrics=("mu",), diagnostics=True)
    runs = {
        "kernel, the run's backend": analyze(AnalyzeConfig(**base), model=model, ids=ids),
        "kernel, parts": analyze(AnalyzeConfig(**base, backend="parts"), model=model, ids=ids),
        "blocks of 5 rows": analyze(AnalyzeConfig(**base, diagnostics_chunk=5), model=model, ids=ids),
    }
    own = runs["kernel, the run's backend"].model_info
    assert own["diagnostics_path"].startswith("kernel")
    assert runs["kernel, parts"].model_info["backend"] == "parts"
    assert runs["blocks of 5 rows"].model_info["diagnostics_path"].startswith("blocks")
    hf = _reference(model, ids, monkeypatch)
    parts = _parts_reference(model, ids)
    layers = len(hf)
    tol = _tolerance(dtype, layers)
    for t in range(layers):  # the two references: the same queries and keys to float32 rounding at most
        _close(parts[t], hf[t], N * layers * EPS32, f"{arch} {dtype} parts against hf t={t + 1}")
    want = {"hf": hf, "parts": parts}
    for path, result in runs.items():
        assert len(result.rows) == layers + 1
        assert all(math.isnan(result.rows[0][c]) for c in _columns(heads))  # row 0: the embeddings
        ref = want[result.model_info["backend"]]
        for t in range(1, layers + 1):
            _close(result.rows[t], ref[t - 1], tol, f"{arch} {dtype} {path} t={t}")
    # the map path: the queries and keys recorded beside each whole map, through the reference functions
    record: dict = {}
    for t, _, x in iter_hidden_states(model, ids, record=record):
        if t:
            per = diagnostic_values(x, record.pop("attn"), model.own_layer_mask(t - 1), 0.3,
                                    qk=record.pop("qk"))
            _close(diagnostic_row(per, 0.3), parts[t - 1], tol, f"{arch} {dtype} map t={t}")


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_padded_texts_give_each_texts_own_key_bias_values(arch, monkeypatch):
    """A right-padded batch (texts of 15, 4 and 5 tokens, start token included): each sample's values are
    those of its real queries and keys alone; the kernel and blocks paths equal the reference of each text
    run alone."""
    model = load_model(f"tiny:{arch}", "float64", seed=0)
    texts = ["the cat sat on the mat and looked at the dog for a while", "a short one", "it was the best"]
    base = dict(model=f"tiny:{arch}", dtype="float64", tokens=32, metrics=("mu",), diagnostics=True)
    kernel = analyze(AnalyzeConfig(**base), model=model, texts=texts)
    blocks = analyze(AnalyzeConfig(**base, diagnostics_chunk=5), model=model, texts=texts)
    lengths = (kernel.ids != 0).sum(1).tolist()  # the tiny models read text with BERT's tokenizer: pad 0
    assert lengths == [15, 4, 5]
    alone = [_reference(model, kernel.ids[s:s + 1, :m], monkeypatch) for s, m in enumerate(lengths)]
    for t in range(1, len(kernel.rows)):
        for name in dg.QUERY_KEY_NAMES:
            want = sum(a[t - 1][name] for a in alone) / 3  # every value finite: the mean over the samples
            for result in (kernel, blocks):
                assert math.isclose(result.rows[t][name], want, rel_tol=1e-12, abs_tol=1e-13), (t, name)


def test_a_non_finite_sample_is_nan_and_left_out_of_the_row():
    """As ``massive_ratio`` of a non-finite x: a sample whose q or k holds inf is NaN in all five, and the
    row's mean is the other samples'."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(3, 4, 7, 5, dtype=torch.float64, generator=g)
    k = torch.randn(3, 2, 7, 5, dtype=torch.float64, generator=g)
    k[1, 0, 3, 2] = math.inf
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    per = dg.query_key_values(q, k, causal)
    rows = dg.query_key_rows(q, k, allowed=causal).values()
    for name in dg.QUERY_KEY_NAMES:
        assert bool(per[name][1].isnan().all()) and bool(rows[name][1].isnan().all()), name
        assert bool(torch.isfinite(per[name][[0, 2]]).all()), name
        torch.testing.assert_close(rows[name], per[name], rtol=1e-12, atol=1e-14, equal_nan=True)
    x = torch.randn(3, 7, 8, dtype=torch.float64, generator=g)
    logits = torch.randn(3, 4, 7, 7, dtype=torch.float64, generator=g)
    attn = torch.softmax(logits.masked_fill(~causal, -math.inf), -1)
    row = diagnostic_row(diagnostic_values(x, attn, causal, 0.3, qk=(q, k)), 0.3)
    assert row["key_cos"] == pytest.approx(float(per["key_cos"][[0, 2]].mean()), rel=1e-12)


def test_without_queries_and_keys_the_columns_are_there_and_nan():
    """The map path given no queries and keys (``analyze`` before it passes ``record["qk"]``), and the
    monitor: every key-bias column present, NaN; the attention columns as before."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=g)
    attn = torch.softmax(torch.randn(2, 3, 5, 5, dtype=torch.float64, generator=g), -1)
    row = diagnostic_row(diagnostic_values(x, attn, None, 0.3), 0.3)
    assert all(math.isnan(row[c]) for c in _columns(3)) and math.isfinite(row["first_token_attention"])
