"""The fast paths of ``metrics.measures`` against the plain reference, within derived error bounds.

The rank columns of float32 data read :func:`gram_singular_values` (the float64 Gram matrix's eigenvalues);
the reference is LAPACK's SVD of the same numbers in float64. ``mean_abs_cos`` sums tiles of the
symmetric Gram matrix; the reference is the whole cosine matrix in float64 (``pairwise_cosines``).
"""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse import metrics as mt
from rankcollapse.metrics import measures

U64 = 2.0**-53  # float64 unit roundoff
U32 = 2.0**-24


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _spectrum_bound(x: torch.Tensor) -> torch.Tensor:
    """``Delta`` of gram_singular_values' docstring per sample: ``(gamma_{m+1} + k u (1 + gamma_{m+1}))
    ||x||_F^2``, x [b, n, d] -> [b] (float64)."""
    n, d = x.shape[-2:]
    m, k = max(n, d), min(n, d)
    gamma = (m + 1) * U64 / (1 - (m + 1) * U64)
    return (gamma + k * U64 * (1 + gamma)) * torch.linalg.vector_norm(x.double(), dim=(-2, -1)) ** 2


def _reference(x: torch.Tensor) -> torch.Tensor:
    """LAPACK's singular values of the same numbers in float64, and their own error (``8 (n + d) u s_1``)."""
    s = torch.linalg.svdvals(x.double())
    return s, 8 * sum(x.shape[-2:]) * U64 * s[..., :1]


def _samples(seed: int, n: int, d: int) -> torch.Tensor:
    """float32 [4, n, d]: Gaussian; rank 3 (a product); a spectrum decaying geometrically over 7 decades;
    one shared direction plus small noise (|cos| near 1)."""
    g = _gen(seed)
    k = min(n, d)
    gauss = torch.randn(n, d, generator=g, dtype=torch.float64)
    f64 = torch.float64
    low = torch.randn(n, 3, generator=g, dtype=f64) @ torch.randn(3, d, generator=g, dtype=f64)
    q1, _ = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
    decay = (q1 * torch.logspace(0, -7, k, dtype=torch.float64)) @ q2.T
    shared = torch.randn(d, generator=g, dtype=f64) + 1e-3 * torch.randn(n, d, generator=g, dtype=f64)
    return torch.stack([gauss, low, decay, shared]).float()


# n > d, n < d, square, several row blocks, a Gram matrix formed as its lower block triangle (k >= 256)
@pytest.mark.parametrize("shape", [(300, 40), (40, 300), (64, 64), (1100, 20), (300, 700)])
def test_gram_singular_values_within_the_derived_bound_of_lapack_in_float64(shape) -> None:
    """|s_hat - s| <= Delta / (s_hat + s) (and <= sqrt(Delta)) for every singular value, down to the noise:
    fails if the Gram matrix is formed in float32 (products rounded), a block of rows or of the lower
    triangle is missed."""
    x = _samples(1, *shape)
    got = mt.gram_singular_values(x)
    ref, slack = _reference(x)
    assert got.shape == ref.shape and got.dtype == torch.float64
    delta = _spectrum_bound(x).unsqueeze(-1)
    bound = torch.minimum(delta / (got + ref).clamp(min=1e-300), delta.sqrt()) + slack
    assert bool(((got - ref).abs() <= bound).all()), float(((got - ref).abs() / bound).max())
    # not vacuous where ranks are decided: at and above float32's rank tolerance, within 1e-3 relative
    above = ref >= mt.rank_tolerance(ref, *shape, torch.float32).unsqueeze(-1)
    assert bool(above[2, : min(shape) // 2].all()) and bool((bound[above] <= 1e-3 * ref[above]).all())


def test_gram_singular_values_keeps_batch_dimensions_and_gives_nan_rows_for_non_finite_samples() -> None:
    x = torch.randn(2, 3, 50, 7, generator=_gen(2))
    x[1, 2, 4, 0] = math.inf
    x[0, 1, 0, 0] = math.nan
    got = mt.gram_singular_values(x)
    assert got.shape == (2, 3, 7)
    bad = torch.zeros(2, 3, dtype=torch.bool)
    bad[1, 2] = bad[0, 1] = True
    assert bool(torch.isnan(got[bad]).all()) and not bool(torch.isnan(got[~bad]).any())
    ref, _ = _reference(x[~bad])
    torch.testing.assert_close(got[~bad], ref, rtol=1e-5, atol=0)


def _band(ref: torch.Tensor, n: int, d: int, delta: torch.Tensor) -> torch.Tensor:
    """Whether a reference singular value lies where the fast path's error could move it across float32's
    rank tolerance (then the two counts may differ by rounding, as two SVDs' would)."""
    tol = mt.rank_tolerance(ref, n, d, torch.float32).unsqueeze(-1)
    return ((ref - tol).abs() <= delta.unsqueeze(-1) / tol + 8 * (n + d) * U64 * ref[..., :1]).any(dim=-1)


def _effective_rank_bound(s: torch.Tensor, err: torch.Tensor) -> torch.Tensor:
    """Worst case of |effective_rank(s + e) - effective_rank(s)| over |e_k| <= err_k: with ``p = s / S``,
    ``|dp_k| <= (err_k + p_k E) / (S - E)`` (``E = sum err``), ``|dH| <= sum eta(|dp_k|)`` (``eta(t) = -t
    log t``, the modulus of continuity of ``-p log p`` for ``|dp| <= 1/2``),
    ``|d exp H| <= exp H (e^|dH| - 1)``."""
    total, e = s.sum(-1, keepdim=True), err.sum(-1, keepdim=True)
    p = s / total
    dp = ((err + p * e) / (total - e)).clamp(min=1e-300)
    assert bool((dp <= 0.5).all())
    dh = (-dp * dp.log()).sum(-1)
    h = -(torch.where(p > 0, p * p.clamp(min=1e-300).log(), torch.zeros_like(p))).sum(-1)
    return h.exp() * torch.expm1(dh)


@pytest.mark.parametrize("shape", [(300, 40), (40, 300), (1100, 20)])
def test_float32_rank_columns_equal_the_lapack_reference_within_their_bounds(shape) -> None:
    """collapse_metrics' num_rank / full_rank of float32 data equal the reference's (no reference value in
    the rounding band of the tolerance); sigma_min, sigma_max, stable_rank, effective_rank within the bound
    carried from the singular values, plus float32's rounding of the column."""
    n, d = shape
    x = _samples(3, n, d)
    got = mt.collapse_metrics(x)
    ref, slack = _reference(x)
    delta = _spectrum_bound(x)
    assert not bool(_band(ref, n, d, delta).any())  # a valid comparison: counts are not decided by rounding
    rank = measures._rank_from_sv(ref, n, d, torch.float32)
    assert torch.equal(got["num_rank"].double(), rank)
    assert torch.equal(got["full_rank"].double(), (rank == min(n, d)).double())
    assert rank.tolist()[1] == 3.0  # the product's rank, below min(n, d)
    err = torch.minimum(delta.unsqueeze(-1) / (2 * ref - delta.sqrt().unsqueeze(-1)).clamp(min=1e-300),
                        delta.sqrt().unsqueeze(-1)) + slack
    for name, idx in (("sigma_max", 0), ("sigma_min", -1)):
        assert bool(((got[name].double() - ref[:, idx]).abs() <= err[:, idx] + U32 * ref[:, idx]).all()), name
    total, top = (ref * ref).sum(-1), ref[:, 0] ** 2
    d_total, d_top = (2 * ref * err + err * err).sum(-1), 2 * ref[:, 0] * err[:, 0] + err[:, 0] ** 2
    stable = total / top
    stable_err = (d_total + stable * d_top) / (top - d_top) + 2 * U32 * stable
    assert bool(((got["stable_rank"].double() - stable).abs() <= stable_err).all())
    eff = measures._effective_rank_from_sv(ref)
    eff_err = _effective_rank_bound(ref, err) + 2 * U32 * eff
    assert bool(((got["effective_rank"].double() - eff).abs() <= eff_err).all())


def test_float64_data_keeps_lapack_singular_values() -> None:
    """float64 resolves singular values far below the Gram path's sqrt(Delta) (about 1e-8 ||x||_F): its rank
    columns stay on LAPACK's SVD (here s_min = 1e-12 s_1 is counted, the Gram path would lose it)."""
    q1, _ = torch.linalg.qr(torch.randn(40, 6, generator=_gen(5), dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(6, 6, generator=_gen(6), dtype=torch.float64))
    x = (q1 * torch.tensor([1.0, 0.5, 0.25, 1e-3, 1e-6, 1e-12], dtype=torch.float64)) @ q2.T
    got = mt.collapse_metrics(x)
    assert float(got["num_rank"]) == 6.0
    assert float(got["sigma_min"]) == pytest.approx(1e-12, rel=1e-3)
    assert float(mt.gram_singular_values(x)[-1]) != pytest.approx(1e-12, rel=1e-3)  # why: below sqrt(Delta)


def test_a_collapsed_float32_state_has_rank_one_on_the_fast_path() -> None:
    """Identical tokens: every singular value but s_1 is 0 exactly; the Gram path's noise (<= sqrt(Delta))
    stays below float32's tolerance, so num_rank is 1 and full_rank 0, as LAPACK's float32 SVD says."""
    v = torch.randn(576, generator=_gen(7))
    x = v.expand(1, 2048, 576).clone()
    got = mt.collapse_metrics(x, ["num_rank", "full_rank", "effective_rank"])
    assert float(got["num_rank"]) == 1.0 and float(got["full_rank"]) == 0.0
    ref, _ = _reference(x)
    err = _spectrum_bound(x).sqrt().unsqueeze(-1).expand_as(ref)
    assert abs(float(got["effective_rank"]) - 1.0) <= float(_effective_rank_bound(ref, err))  # 0.007
    assert float(mt.num_rank(x)) == 1.0  # LAPACK's float32 SVD agrees


@pytest.mark.parametrize("shape", [(2, 700, 576), (1, 2049, 64), (3, 130, 16)])  # SmolLM2's d; partial tiles
def test_float32_mean_abs_cos_within_the_derived_bound_of_the_float64_whole_matrix(shape) -> None:
    """|got - reference| <= (d + side + 6) eps32 (the docstring's bound) on tokens with |cos| near 1, 0.5
    and 0; fails if a tile is skipped or counted once too often, or the rows are summed in a coarser dtype."""
    g = _gen(8)
    b, n, d = shape
    x64 = torch.randn(*shape, generator=g, dtype=torch.float64)
    x64[0] += 3 * torch.randn(d, generator=g, dtype=torch.float64)  # anisotropic: |cos| ~ 0.9
    x64[-1, :, :] += 0.7 * torch.randn(d, generator=g, dtype=torch.float64)
    x = x64.float()
    cos = mt.pairwise_cosines(x).abs()  # the float32 numbers' own cosines, in float64
    ref = (cos.sum(dim=(-2, -1)) - cos.diagonal(dim1=-2, dim2=-1).sum(-1)) / (n * (n - 1))
    got = mt.mean_abs_cos(x)
    assert got.dtype == torch.float32 and got.shape == (b,)
    side = min(n, max(64, min(1 << math.ceil(math.log2(measures._COSINE_WORK / d) / 2), 1024)))
    bound = (d + side + 6) * torch.finfo(torch.float32).eps
    assert bool(((got.double() - ref).abs() <= bound).all()), float((got.double() - ref).abs().max())
    assert float(ref[0]) > 0.8  # the anisotropic sample is far from 0
    torch.testing.assert_close(mt.mean_abs_cos(x64), (lambda c: (c.sum((-2, -1)) - n) / (n * (n - 1)))(
        mt.pairwise_cosines(x64).abs()), rtol=0, atol=1e-10)
