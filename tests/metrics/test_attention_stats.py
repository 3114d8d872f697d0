"""The statistics of a kernel's row log-normaliser (``metrics.attention_stats``) against the plain
reference: the whole map of ``core.attention.masked_softmax``, its ``logsumexp`` and its ``A K``."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.attention import masked_softmax
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.attention_stats import (
    TILT,
    allowed_keys,
    first_token_rows,
    key_ends,
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


def _ends(mask: torch.Tensor, center: int, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
    """The reference's outputs of the two tilted probes (logits +-TILT j, values j - c), as the plain
    masked softmax computes them in ``dtype``: (top, bottom), [i] each."""
    n = mask.shape[-1]
    j = torch.arange(n, dtype=dtype)
    values = (j - center)[:, None]
    out = []
    for sign in (1.0, -1.0):
        logits = (sign * TILT * j).expand(mask.shape[-2], n)
        out.append((masked_softmax(logits, mask) @ values)[..., 0])
    return tuple(out)


@pytest.mark.parametrize("name", ["causal", "window", "chunked", "complete"])
def test_interval_masks_are_read_back_exactly_from_count_and_ends(name):
    mask = _masks(N)[name]
    rows = torch.arange(N)
    lo = torch.where(mask, rows[None], N).amin(-1)
    hi = torch.where(mask, rows[None], -1).amax(-1)
    for dtype in (torch.float64, torch.float32):
        got = key_ends(mask.sum(-1), *_ends(mask, N // 2, dtype), N // 2)
        assert bool(got.interval.all()) and bool(got.read.all())
        assert torch.equal(got.lo, lo.double()) and torch.equal(got.hi, hi.double())


def test_rows_that_are_not_one_interval_are_told_apart():
    mask = _masks(N)["random"]
    got = key_ends(mask.sum(-1), *_ends(mask, N // 2), N // 2)
    rows = torch.arange(N)
    lo = torch.where(mask, rows[None], N).amin(-1)
    hi = torch.where(mask, rows[None], -1).amax(-1)
    really = (hi - lo + 1) == mask.sum(-1)
    assert torch.equal(got.interval, really) and not bool(really.all())
    assert torch.equal(got.lo, lo.double()) and torch.equal(got.hi, hi.double())  # the ends are still read


def test_long_rows_are_read_exactly_in_float32():
    """32,768 positions, windows of 4,096 keys ending anywhere, the probe in float32."""
    n, w = 32768, 4096
    ends = [w - 1, 10_000, n - 1]
    j = torch.arange(n, dtype=torch.float32)
    tops, bottoms = [], []
    for e in ends:
        keys = j[e - w + 1: e + 1]
        for sign, out in ((1.0, tops), (-1.0, bottoms)):
            weights = torch.softmax(sign * TILT * keys, -1)
            out.append(float(weights @ (keys - n // 2)))
    got = key_ends(torch.full((3,), float(w)), torch.tensor(tops), torch.tensor(bottoms), n // 2)
    assert bool(got.interval.all()) and got.hi.tolist() == ends
    assert got.lo.tolist() == [e - w + 1 for e in ends]
    wider = key_ends(torch.full((3,), float(w + 1)), torch.tensor(tops), torch.tensor(bottoms), n // 2)
    assert not bool(wider.interval.any())  # one key more than the ends hold: not an interval


def test_bad_inputs_are_one_line_errors():
    q, k = _qk(torch.float64)
    with pytest.raises(RankCollapseError, match="ak has shape"):
        row_entropy(q, k[..., :2], torch.zeros(2, 3, N), SCALE)
    with pytest.raises(RankCollapseError, match="q must be a floating-point"):
        first_token_rows(torch.zeros(2, 3, N, E, dtype=torch.long), k[:, :, 0], torch.zeros(2, 3, N), SCALE)
    with pytest.raises(RankCollapseError, match="center must be a whole number"):
        key_ends(torch.ones(2), torch.zeros(2), torch.zeros(2), 3.5)  # type: ignore[arg-type]
