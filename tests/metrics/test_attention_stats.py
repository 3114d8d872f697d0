"""The statistics of a kernel's row log-normaliser (``metrics.attention_stats``) against the plain
reference: the whole map of ``core.attention.masked_softmax``, its ``logsumexp`` and its ``A K``."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.attention import masked_softmax
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.attention_stats import (
    allowed_keys,
    first_token_rows,
    key_intervals,
    position_values,
    row_entropy,
    sink_attention,
)

N, E, SCALE = 17, 5, 0.7
EPS32 = torch.finfo(torch.float32).eps


def _masks(n: int) -> dict[str, torch.Tensor]:
    """bool [n, n] masks, each with every self-loop: causal, a causal window of 3 keys, chunks of 4
    (causal inside), complete, and a random one (not intervals)."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None]
    gen = torch.Generator().manual_seed(3)
    random = (torch.rand(n, n, generator=gen) < 0.4) | torch.eye(n, dtype=torch.bool)
    return {"causal": j <= i, "window": (j <= i) & (j > i - 3), "chunked": (j <= i) & (j // 4 == i // 4),
            "complete": torch.ones(n, n, dtype=torch.bool), "random": random}


def _qk(dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q = 3 * torch.randn(2, 3, N, E, generator=gen, dtype=torch.float64)  # far from uniform
    k = torch.randn(2, 3, N, E, generator=gen, dtype=torch.float64)
    return q.to(dtype), k.to(dtype)


def _reference(q, k, mask, bias=None):
    """The map, its log-normaliser and ``A K`` as the plain reference computes them, in q's dtype."""
    logits = SCALE * (q @ k.transpose(-1, -2))
    if bias is not None:
        logits = logits + bias
    a = masked_softmax(logits, mask)
    lse = torch.logsumexp(logits.masked_fill(~mask, -math.inf), -1)
    return a, lse, a @ k


def _entropy(a: torch.Tensor) -> torch.Tensor:
    a = a.to(torch.float64)
    return -(a * torch.where(a > 0, a.log(), 0.0)).sum(-1)


@pytest.mark.parametrize("name", ["causal", "window", "chunked", "complete", "random"])
def test_first_token_and_entropy_from_lse_equal_the_whole_map_in_float64(name):
    mask = _masks(N)[name]
    q, k = _qk(torch.float64)
    a, lse, ak = _reference(q, k, mask)
    first = first_token_rows(q, k[:, :, 0], lse, SCALE, allowed=mask[:, 0])
    torch.testing.assert_close(first, a[..., 0], rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(row_entropy(q, ak, lse, SCALE), _entropy(a), rtol=1e-12, atol=1e-13)


def test_a_position_bias_enters_the_entropy_through_a_b():
    """ALiBi-type bias ``B_ij = -m (i - j)``: ``H_i = lse_i - scale q_i . (A K)_i - (A B)_i``."""
    mask = _masks(N)["causal"]
    i, j = torch.arange(N)[:, None], torch.arange(N)[None]
    bias = -0.3 * (i - j).to(torch.float64)
    q, k = _qk(torch.float64, seed=1)
    a, lse, ak = _reference(q, k, mask, bias)
    ab = (a * bias).sum(-1)
    torch.testing.assert_close(row_entropy(q, ak, lse, SCALE, ab=ab), _entropy(a), rtol=1e-12, atol=1e-13)
    first = first_token_rows(q, k[:, :, 0], lse, SCALE, allowed=mask[:, 0], bias=bias[:, 0])
    torch.testing.assert_close(first, a[..., 0], rtol=1e-12, atol=1e-15)
    assert float((row_entropy(q, ak, lse, SCALE) - _entropy(a)).abs().max()) > 1e-3  # the term matters


@pytest.mark.parametrize("name", ["causal", "window", "random"])
def test_float32_kernel_values_give_the_float64_statistics_to_n_eps32(name):
    """lse and ``A K`` rounded to float32 (as a float32 kernel returns them): the statistics agree with
    the float64 map within ``n eps32`` of the logits' size (the entropy is a difference of two numbers
    of that size, ``lse_i`` and ``scale q_i . (A K)_i``, each an n-term sum rounded in float32)."""
    mask = _masks(N)[name]
    q, k = _qk(torch.float64, seed=2)
    a, _, _ = _reference(q, k, mask)
    q32, k32 = q.float(), k.float()
    _, lse32, ak32 = _reference(q32, k32, mask)
    size = max(1.0, float((SCALE * (q @ k.transpose(-1, -2))).abs().max()))
    bar = N * EPS32
    got = row_entropy(q32, ak32, lse32, SCALE)
    assert float((got - _entropy(a)).abs().max()) < bar * size
    first = first_token_rows(q32, k32[:, :, 0], lse32, SCALE, allowed=mask[:, 0])
    assert float((first - a[..., 0]).abs().max()) < bar


def test_q_zero_gives_the_count_of_allowed_keys():
    for mask in _masks(N).values():
        lse = torch.logsumexp(torch.zeros(N, N, dtype=torch.float64).masked_fill(~mask, -math.inf), -1)
        assert torch.equal(allowed_keys(lse), mask.sum(-1).to(torch.float64))
    assert float(allowed_keys(torch.tensor([-math.inf]))) == 0.0


def test_learned_sink_logits_take_mass_and_enter_the_entropy():
    """GPT-OSS: the softmax over the keys and one sink logit per head; the sink has no value."""
    mask = _masks(N)["window"]
    q, k = _qk(torch.float64, seed=4)
    s_aux = torch.tensor([0.5, 2.0, -1.0], dtype=torch.float64)
    _, lse, ak = _reference(q, k, mask)  # over the keys alone, as the kernel returns them
    logits = (SCALE * (q @ k.transpose(-1, -2))).masked_fill(~mask, -math.inf)
    full = torch.softmax(torch.cat([logits, s_aux.reshape(1, 3, 1, 1).expand(2, 3, N, 1)], -1), -1)
    torch.testing.assert_close(sink_attention(lse, s_aux), full[..., -1], rtol=1e-12, atol=1e-15)
    total = torch.logaddexp(lse, s_aux.reshape(1, 3, 1))
    torch.testing.assert_close(first_token_rows(q, k[:, :, 0], total, SCALE, allowed=mask[:, 0]),
                               full[..., 0], rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(row_entropy(q, ak, lse, SCALE, s_aux=s_aux), _entropy(full),
                               rtol=1e-12, atol=1e-13)


def _probe(mask: torch.Tensor, center: int, float32_softmax: bool = False) -> torch.Tensor:
    """The reference's output on the probe values at q = 0: [i, 3]."""
    logits = torch.zeros(mask.shape, dtype=torch.float32 if float32_softmax else torch.float64)
    a = masked_softmax(logits, mask).to(torch.float64)
    return a @ position_values(mask.shape[-1], center)


@pytest.mark.parametrize("name", ["causal", "window", "chunked", "complete"])
def test_interval_masks_are_read_back_exactly_from_count_and_moments(name):
    mask = _masks(N)[name]
    for f32 in (False, True):  # a float32 softmax rounds 1/|N_i|: the same factor on the row, divided out
        got = key_intervals(mask.sum(-1), _probe(mask, N // 2, f32), N // 2)
        rows = torch.arange(N)
        lo = torch.where(mask, rows[None], N).amin(-1)
        hi = torch.where(mask, rows[None], -1).amax(-1)
        assert bool(got.interval.all())
        assert torch.equal(got.lo, lo.double()) and torch.equal(got.hi, hi.double())


def test_rows_that_are_not_one_interval_are_told_apart():
    mask = _masks(N)["random"]
    got = key_intervals(mask.sum(-1), _probe(mask, N // 2), N // 2)
    rows = torch.arange(N)
    lo = torch.where(mask, rows[None], N).amin(-1)
    hi = torch.where(mask, rows[None], -1).amax(-1)
    really = (hi - lo + 1) == mask.sum(-1)
    assert torch.equal(got.interval, really) and not bool(really.all())
    # the same mean and variance as [0, 10] but 6 keys: the count tells them apart
    row = torch.zeros(1, 11, dtype=torch.bool)
    row[0, [0, 3, 4, 6, 7, 10]] = True
    assert not bool(key_intervals(row.sum(-1), _probe(row, 5), 5).interval.any())


def test_long_rows_are_read_exactly():
    """32,768 positions, windows of 4,096 keys ending anywhere: the float64 moments are exact enough."""
    n, w = 32768, 4096
    ends = torch.tensor([w - 1, 10_000, n - 1])
    count = torch.full((3,), float(w))
    pos = position_values(n, n // 2)
    moments = torch.stack([pos[e - w + 1: e + 1].mean(0) for e in ends.tolist()])
    got = key_intervals(count, moments, n // 2)
    assert bool(got.interval.all()) and torch.equal(got.hi, ends.double())
    holed = moments.clone()
    holed[:, 2] += 2.0 / w  # sum j^2 two larger: the nearest other set of w integers with that mean
    assert not bool(key_intervals(count, holed, n // 2).interval.any())


def test_bad_inputs_are_one_line_errors():
    q, k = _qk(torch.float64)
    with pytest.raises(RankCollapseError, match="ak has shape"):
        row_entropy(q, k[..., :2], torch.zeros(2, 3, N), SCALE)
    with pytest.raises(RankCollapseError, match="q must be a floating-point"):
        first_token_rows(torch.zeros(2, 3, N, E, dtype=torch.long), k[:, :, 0], torch.zeros(2, 3, N), SCALE)
    with pytest.raises(RankCollapseError, match="center must be a whole number"):
        position_values(8, 3.5)  # type: ignore[arg-type]
