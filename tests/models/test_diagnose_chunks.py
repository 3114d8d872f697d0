"""Diagnostics from attention formed in blocks of query rows against the reference that materialises
each layer's whole [b, h, n, n] map (the path ``on_attention`` takes)."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, iter_hidden_states, load_model
from rankcollapse.models import parts as parts_module
from rankcollapse.models.parts import CHUNK_BYTES, CHUNK_BYTES_PER_WEIGHT, chunk_rows

N = 12  # tokens of the `ids` fixture; blocks of 5 rows: 5 + 5 + 2, a chunk that does not divide n
EPS32 = torch.finfo(torch.float32).eps


def _cfg(**kw):
    base = dict(samples=3, tokens=N, metrics=("mu", "mu_rel"), diagnostics=True, sink_threshold=0.2)
    return AnalyzeConfig(**{**base, **kw})


def _reference(cfg: AnalyzeConfig, model, **kw):
    """The materialising path: every layer's whole map is formed (and handed to on_attention)."""
    seen: list[int] = []
    result = analyze(cfg, model=model, on_attention=lambda t, a: seen.append(a.shape[-2]), **kw)
    assert seen and all(s == result.ids.shape[1] for s in seen)
    return result


def _tolerance(dtype: str, n: int, layers: int) -> float:
    """float64: 1e-12 relative. float32: each of the L layers rounds its n-term sums (softmax, entropy,
    the output ``A V``) in another order, a relative ``n eps`` per layer: ``n L eps32``."""
    return 1e-12 if dtype == "float64" else n * layers * EPS32



def _compare(ref, got, rtol: float) -> None:
    assert len(ref.rows) == len(got.rows)
    for a, b in zip(ref.rows, got.rows, strict=True):
        assert a.keys() == b.keys()
        for key, want in a.items():
            have = b[key]
            if isinstance(want, float):
                if math.isnan(want):
                    assert math.isnan(have), (a["layer"], key)
                else:
                    assert math.isclose(have, want, rel_tol=rtol, abs_tol=rtol * 1e-3), (
                        a["layer"],
                        key,
                        have,
                        want,
                    )
            else:
                assert have == want, (a["layer"], key)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mask", [None, "window:w=3"])
@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama", "gemma2", "t5"])
def test_blocks_of_query_rows_give_the_reference_diagnostics(arch, mask, dtype, ids):
    """BERT (complete), GPT-2 (causal), Llama (GQA, rotary), Gemma 2 (sliding windows, soft-capping),
    T5 (a position bias), under their own masks and a user window: every column of every row."""
    model = load_model(f"tiny:{arch}", dtype, seed=0)
    cfg = dict(model=f"tiny:{arch}", dtype=dtype, mask=mask)
    ref = _reference(_cfg(**cfg), model, ids=ids)
    got = analyze(_cfg(**cfg, diagnostics_chunk=5), model=model, ids=ids)
    assert "attention_entropy_h1" in got.rows[1] and not math.isnan(
        got.rows[1]["normalized_attention_entropy"]
    )
    _compare(ref, got, _tolerance(dtype, N, len(ref.rows) - 1))


@pytest.mark.parametrize("chunk", [1, 5, 11, 64])
def test_any_chunk_gives_the_reference_including_the_sinks_ablation(chunk, tiny_models, ids):
    """One row per block, blocks that leave one row over, one block larger than n; the ablation damps
    every query but 0, whichever block it falls in."""
    model = tiny_models("gemma2", "f64")
    cfg = dict(model="tiny:gemma2", dtype="float64", ablation="sinks", sink_damping=0.5)
    _compare(
        _reference(_cfg(**cfg), model, ids=ids),
        analyze(_cfg(**cfg, diagnostics_chunk=chunk), model=model, ids=ids),
        1e-12,
    )


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_padded_texts_in_blocks_give_the_reference(arch):
    """A right-padded batch of texts of different lengths (batch > 1): each sample keeps its real
    queries; the allowed keys of the normalised entropy are those of its real tokens."""
    model = load_model(f"tiny:{arch}", "float64", seed=0)
    texts = ["the cat sat on the mat and looked at the dog for a while", "a short one", "it was the best"]
    for mask in (None, "window:w=3"):
        cfg = dict(model=f"tiny:{arch}", dtype="float64", tokens=32, mask=mask)
        ref = _reference(_cfg(**cfg), model, texts=texts)
        assert ref.ids.shape[1] > 5 and int((ref.ids == 0).sum()) > 0  # padded, more than one block
        _compare(ref, analyze(_cfg(**cfg, diagnostics_chunk=5), model=model, texts=texts), 1e-12)


def test_rows_in_blocks_are_bitwise_the_same_in_batches(tiny_models, ids):
    """The block depends on the heads and n, not on the batch: batches of 1 and 2 give one batch's rows."""
    model = tiny_models("llama", "f64")
    one = analyze(_cfg(model="tiny:llama", dtype="float64", diagnostics_chunk=5), model=model, ids=ids)
    for size in (1, 2):
        got = analyze(
            _cfg(model="tiny:llama", dtype="float64", diagnostics_chunk=5, batch_size=size),
            model=model,
            ids=ids,
        )
        for a, b in zip(one.rows, got.rows, strict=True):
            assert [k for k in a if a[k] != b[k] and not (a[k] != a[k] and b[k] != b[k])] == [], size


def test_no_block_larger_than_the_chunk_is_formed(tiny_models, ids, monkeypatch):
    """Every softmax a chunked run takes has at most ``chunk`` query rows (never the n x n map), and
    the record holds per-query reductions [b, h, n] only."""
    seen: list[tuple[int, ...]] = []
    softmax = parts_module.masked_softmax

    def spy(logits, mask):
        seen.append(tuple(logits.shape))
        return softmax(logits, mask)

    monkeypatch.setattr(parts_module, "masked_softmax", spy)
    model = tiny_models("gpt2", "f64")
    analyze(_cfg(model="tiny:gpt2", dtype="float64", diagnostics_chunk=5), model=model, ids=ids)
    assert seen and max(s[-2] for s in seen) == 5 and {s[-1] for s in seen} == {N}
    record: dict = {}
    for t, _, _ in iter_hidden_states(model, ids, record=record, chunk=5):
        if t:
            assert set(record) == {"rows"} and record["rows"].entropy.shape == (3, 4, N)


def test_the_default_chunk_fits_its_budget():
    """chunk_rows: the largest block of one sample, heads x rows x n weights at CHUNK_BYTES_PER_WEIGHT
    bytes, within CHUNK_BYTES; SmolLM2-135M (9 heads) at 8,192 tokens: 28 rows."""
    for heads, n in ((9, 8192), (12, 2048), (9, 2048), (3, 100_000)):
        rows = chunk_rows(heads, n)
        assert (
            CHUNK_BYTES_PER_WEIGHT * heads * rows * n
            <= CHUNK_BYTES
            < CHUNK_BYTES_PER_WEIGHT * heads * (rows + 1) * n
        )
    assert chunk_rows(9, 8192) == 28
    assert chunk_rows(4, 12) == 12 and chunk_rows(64, 10**7) == 1  # at most n, at least one row


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"diagnostics_chunk": 0}, "--diagnostics-chunk 0 is invalid"),
        ({"diagnostics_chunk": True}, "--diagnostics-chunk True is invalid"),
        ({"diagnostics_chunk": "5"}, "--diagnostics-chunk '5' is invalid"),
        ({"diagnostics_chunk": 5, "diagnostics": False}, "applies only with --diagnostics"),
    ],
)
def test_a_bad_chunk_is_one_line(kw, needle):
    with pytest.raises(RankCollapseError, match=needle):
        _cfg(model="tiny:gpt2", **kw)
