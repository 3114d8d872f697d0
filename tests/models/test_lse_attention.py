"""One attention call through the kernel that keeps its row log-normaliser (``models.lse_attention``)
against the plain reference: the whole map of ``core.attention.masked_softmax`` on the same q, k, v."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F  # noqa: N812

from rankcollapse.core.attention import masked_softmax
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.diagnostics import attention_rows, query_key_values
from rankcollapse.models.lse_attention import (
    allowed_key_sums,
    attention_lse,
    attention_with_stats,
    kernel_mask,
    linear_statistics,
    rows_in_blocks,
)

B, H, G, N, E = 2, 4, 2, 19, 8
SCALE = 0.6
EPS32 = torch.finfo(torch.float32).eps


def _qkv(dtype: torch.dtype, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = 2.5 * torch.randn(B, H, N, E, generator=gen, dtype=torch.float64)
    k = torch.randn(B, G, N, E, generator=gen, dtype=torch.float64)
    v = torch.randn(B, G, N, E, generator=gen, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _masks() -> dict[str, tuple[torch.Tensor | None, bool, torch.Tensor]]:
    """(mask as a model hands it, causal flag, the bool [b, 1, i, j] it means)."""
    i, j = torch.arange(N)[:, None], torch.arange(N)[None]
    causal = (j <= i).expand(B, 1, N, N)
    window = ((j <= i) & (j > i - 4))[None, None]
    padded = torch.ones(B, 1, N, N, dtype=torch.bool)
    padded[1, :, :, 13:] = False  # sample 1: 13 real keys (an encoder's padding)
    padded[1, :, 13:, 13:] |= torch.eye(N - 13, dtype=torch.bool)
    return {"none-causal": (None, True, causal), "none-complete": (None, False, torch.ones(B, 1, N, N,
                                                                                           dtype=torch.bool)),
            "bool-window": (window, False, window.expand(B, 1, N, N)),
            "additive-padded": (torch.zeros(B, 1, N, N).masked_fill(~padded, torch.finfo(torch.float32).min),
                                False, padded)}


def _reference(q, k, v, allowed):
    kk, vv = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    a = masked_softmax(SCALE * (q @ kk.transpose(-1, -2)), allowed)
    return a, a @ vv


@pytest.mark.parametrize("name", ["none-causal", "none-complete", "bool-window", "additive-padded"])
def test_statistics_of_one_call_equal_the_whole_map_in_float64(name):
    given, causal, allowed = _masks()[name]
    q, k, v = _qkv(torch.float64)
    mask = kernel_mask(None if given is None else given.to(torch.float64) if given.is_floating_point()
                       else given, causal, N, N, torch.float64)
    out, rows = attention_with_stats(q, k, v, mask, SCALE)
    a, ref_out = _reference(q, k, v, allowed)
    ref = attention_rows(a, allowed)
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(rows.entropy, ref.entropy, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(rows.first, ref.first, rtol=1e-12, atol=1e-15)
    assert torch.equal(rows.keys, ref.keys)


@pytest.mark.parametrize("name", ["none-causal", "bool-window", "additive-padded"])
def test_the_output_is_bit_for_bit_that_of_torch_sdpa_in_float32(name):
    """The first e columns of the call on [V, K] are the kernel's output on V: the model's own forward."""
    given, causal, allowed = _masks()[name]
    q, k, v = _qkv(torch.float32, seed=1)
    out, rows = attention_with_stats(q, k, v, kernel_mask(given, causal, N, N, torch.float32), SCALE)
    kk, vv = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    sdpa = F.scaled_dot_product_attention(q, kk, vv, attn_mask=given, is_causal=causal, scale=SCALE)
    assert torch.equal(out, sdpa)
    a, _ = _reference(q.double(), k.double(), v.double(), allowed)
    ref = attention_rows(a, allowed)
    size = float(SCALE * q.double().abs().amax() * k.double().abs().amax() * E)
    assert float((rows.entropy - ref.entropy).abs().max()) < N * EPS32 * size
    assert float((rows.first - ref.first).abs().max()) < N * EPS32


def test_learned_sink_logits_rescale_the_output_and_enter_the_rows():
    q, k, v = _qkv(torch.float64, seed=2)
    s_aux = torch.tensor([0.3, 1.5, -0.5, 2.0], dtype=torch.float64)
    causal = kernel_mask(None, True, N, N, torch.float64)
    out, rows = attention_with_stats(q, k, v, causal, SCALE, s_aux=s_aux)
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    logits = (SCALE * q @ kk.transpose(-1, -2)).masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(),
                                                           -math.inf)
    full = torch.softmax(torch.cat([logits, s_aux.reshape(1, H, 1, 1).expand(B, H, N, 1)], -1), -1)
    torch.testing.assert_close(out, full[..., :-1] @ vv, rtol=1e-12, atol=1e-13)
    ref = attention_rows(full, None)
    torch.testing.assert_close(rows.entropy, ref.entropy, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(rows.first, ref.first, rtol=1e-12, atol=1e-15)


def test_rows_in_blocks_take_a_soft_cap_a_bias_and_sinks():
    q, k, _ = _qkv(torch.float64, seed=3)
    given, causal, allowed = _masks()["bool-window"]
    mask = kernel_mask(given, causal, N, N, torch.float64)
    bias = torch.randn(1, H, N, N, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    s_aux = torch.tensor([0.3, 1.5, -0.5, 2.0], dtype=torch.float64)
    rows = rows_in_blocks(q, k, mask, SCALE, bias=bias, softcap=2.0, s_aux=s_aux)
    kk = k.repeat_interleave(2, 1)
    logits = torch.tanh((SCALE * q @ kk.transpose(-1, -2) + bias) / 2.0) * 2.0
    logits = logits.masked_fill(~allowed, -math.inf)
    full = torch.softmax(torch.cat([logits, s_aux.reshape(1, H, 1, 1).expand(B, H, N, 1)], -1), -1)
    ref = attention_rows(full, None)
    torch.testing.assert_close(rows.entropy, ref.entropy, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(rows.first, ref.first, rtol=1e-12, atol=1e-15)
    with pytest.raises(RankCollapseError, match="position bias has no lse form"):
        biased = kernel_mask(torch.zeros(1, 1, N, N, dtype=torch.float64) + bias[:, :1], False, N, N,
                             torch.float64)
        attention_with_stats(q, k, k, biased, SCALE)


def test_the_blocks_kernel_is_the_cpu_kernel():
    """The fallback kernel (any device, any dtype) gives the CPU flash kernel's out and lse."""
    q, k, v = _qkv(torch.float64, seed=5)
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    for given, causal, _ in _masks().values():
        mask = kernel_mask(None if given is None else given.double() if given.is_floating_point() else given,
                           causal, N, N, torch.float64)
        a = attention_lse(q, kk, vv, mask, SCALE, kernel="cpu-flash")
        b = attention_lse(q, kk, vv, mask, SCALE, kernel="blocks")
        torch.testing.assert_close(a[0], b[0], rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(a[1], b[1], rtol=1e-12, atol=1e-13)


def test_masks_the_kernel_cannot_take_are_one_line_errors():
    with pytest.raises(RankCollapseError, match="one mask for every head"):
        kernel_mask(torch.ones(1, 2, N, N, dtype=torch.bool), False, N, N, torch.float32)
    with pytest.raises(RankCollapseError, match="give the mask"):
        kernel_mask(None, True, 1, N, torch.float32)
    with pytest.raises(RankCollapseError, match="unknown kernel"):
        q, k, v = _qkv(torch.float32)
        attention_lse(q, k, v, kernel_mask(None, True, N, N, torch.float32), SCALE, kernel="magic")


def test_any_linear_statistic_of_the_rows_from_one_call():
    """Mean attended position and the attention on a set of keys (a narrower or wider value than e)."""
    q, k, _ = _qkv(torch.float64, seed=6)
    given, causal, allowed = _masks()["bool-window"]
    j = torch.arange(N, dtype=torch.float64)
    chosen = (j % 3 == 0).double()
    values = torch.stack([j, chosen, j * j, torch.ones(N, dtype=torch.float64)] + [chosen] * 8, -1)  # 12 > e
    got = linear_statistics(q, k, values, kernel_mask(given, causal, N, N, torch.float64), SCALE)
    a, _ = _reference(q, k, k, allowed)
    torch.testing.assert_close(got, a @ values, rtol=1e-12, atol=1e-12)
    assert torch.allclose(got[..., 3], torch.ones((), dtype=torch.float64))  # rows sum to 1


# ---- the key-bias rows (Gu et al. 2025's cos(q_i, k_0), ||k_0||) of the same call -------------------------
def _close_key_rows(rows, q, k, allowed, rtol: float) -> None:
    """Every key-bias diagnostic of ``rows.qk`` equal to the reference functions on q, k under ``allowed``."""
    want = query_key_values(q.double(), k.double(), allowed)
    for name, value in rows.qk.values().items():
        torch.testing.assert_close(value, want[name], rtol=rtol, atol=rtol, equal_nan=True, msg=name)


@pytest.mark.parametrize("kernel", ["cpu-flash", "blocks"])
@pytest.mark.parametrize("name", ["none-causal", "none-complete", "bool-window", "additive-padded"])
def test_the_key_rows_of_one_call_equal_the_reference_in_float64(name, kernel):
    """GQA (4 query heads on 2 key heads): the prefix sum (causal), the total (complete), the call with zero
    queries (a window, padding) give the reference's means over the allowed pairs to 1e-12."""
    given, causal, allowed = _masks()[name]
    q, k, v = _qkv(torch.float64, seed=7)
    mask = kernel_mask(None if given is None else given.to(torch.float64) if given.is_floating_point()
                       else given, causal, N, N, torch.float64)
    _, rows = attention_with_stats(q, k, v, mask, SCALE, kernel=kernel)
    _close_key_rows(rows, q, k, allowed, 1e-12)
    counts = allowed_key_sums(k, mask, N, kernel)[..., -1]
    assert torch.equal(counts, counts.round())  # the pair counts are whole numbers


@pytest.mark.parametrize("name", ["none-causal", "bool-window", "additive-padded"])
def test_the_key_rows_of_a_float32_call_are_the_references_to_float32_rounding(name):
    """The zero-query call sums n unit vectors in float32: n eps32 relative to the sum's terms."""
    given, causal, allowed = _masks()[name]
    q, k, v = _qkv(torch.float32, seed=8)
    _, rows = attention_with_stats(q, k, v, kernel_mask(given, causal, N, N, torch.float32), SCALE)
    _close_key_rows(rows, q, k, allowed, N * EPS32)


def test_the_key_rows_in_blocks_take_the_allowed_keys_under_a_bias():
    """A position bias inside the mask (weights not uniform): the sums over the allowed keys themselves."""
    q, k, _ = _qkv(torch.float64, seed=9)
    given, _, allowed = _masks()["bool-window"]
    bias = torch.randn(1, 1, N, N, dtype=torch.float64, generator=torch.Generator().manual_seed(10))
    biased = kernel_mask(torch.where(given, bias, torch.finfo(torch.float64).min), False, N, N, torch.float64)
    assert biased.biased
    _close_key_rows(rows_in_blocks(q, k, biased, SCALE), q, k, allowed, 1e-12)
    with pytest.raises(RankCollapseError, match="no uniform weights"):
        allowed_key_sums(k, biased, N)


def test_a_key_or_query_without_a_direction_leaves_its_pairs_out():
    """A zero key j and a zero query i: their cosines are undefined (0/0), never 0, and left out of the means;
    a zero first key leaves first_key_cos NaN, with its norm 0."""
    q, k, v = _qkv(torch.float64, seed=11)
    k[0, 0, 5] = 0.0
    q[0, 1, 7] = 0.0
    k[1, 1, 0] = 0.0
    allowed = _masks()["bool-window"][2]
    _, rows = attention_with_stats(q, k, v, kernel_mask(allowed[:1], False, N, N, torch.float64), SCALE)
    _close_key_rows(rows, q, k, allowed, 1e-12)
    assert bool(rows.qk.first_key_cos()[1, 2:].isnan().all()) and rows.qk.first_key_norm()[1, 2] == 0
    dense = query_key_values(q, k, allowed)
    assert bool(torch.isfinite(dense["key_cos"]).all())  # the other pairs still give a mean
