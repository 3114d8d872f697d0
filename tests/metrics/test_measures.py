"""Collapse measures on inputs with closed-form answers."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse import metrics as mt


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def rank_one(n: int = 8, d: int = 5) -> torch.Tensor:
    """All tokens equal: x = 1 v^T."""
    v = torch.randn(d, generator=_gen(), dtype=torch.float64)
    return v.expand(n, d).clone()


def test_mu_is_zero_for_identical_tokens_and_matches_formula() -> None:
    x = rank_one()
    assert float(mt.mu(x)) == pytest.approx(0.0, abs=1e-14)
    y = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    assert float(mt.mu(y)) == pytest.approx(math.sqrt(2.0))
    assert float(mt.mu_rel(y)) == pytest.approx(1.0)
    assert math.isnan(float(mt.mu_rel(torch.zeros(3, 2))))  # 0/0 is undefined, not collapsed
    assert math.isnan(float(mt.at_floor(torch.zeros(3, 2))))


def test_shapes_batch_dims_are_kept() -> None:
    x = torch.randn(2, 3, 10, 4, generator=_gen(), dtype=torch.float64)
    for fn in (mt.mu, mt.mu_rel, mt.at_floor, mt.num_rank, mt.stable_rank,
               mt.effective_rank, mt.mean_abs_cos, mt.mean_signed_cos, mt.dong_residual):
        assert fn(x).shape == (2, 3), fn.__name__
    assert mt.singular_values(x).shape == (2, 3, 4)


def test_precision_floor_flags_collapsed_but_not_small_differences() -> None:
    x = rank_one(16, 4) * (1 + 1e-16 * torch.randn(16, 4, generator=_gen(1), dtype=torch.float64))
    assert float(mt.at_floor(x)) == 1.0
    y = rank_one(16, 4) + 1e-9 * torch.randn(16, 4, generator=_gen(2), dtype=torch.float64)
    assert float(mt.at_floor(y)) == 0.0
    assert float(mt.at_floor(rank_one(16, 4).float())) == 1.0


def test_ranks_of_rank_one_matrix() -> None:
    x = rank_one()
    assert float(mt.num_rank(x)) == 1.0
    assert float(mt.full_rank(x)) == 0.0
    assert float(mt.stable_rank(x)) == pytest.approx(1.0)
    assert float(mt.effective_rank(x)) == pytest.approx(1.0, abs=1e-6)


def test_orthogonal_rows_have_full_rank_and_zero_cosine() -> None:
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=_gen(), dtype=torch.float64))
    x = q.T[:4] * torch.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=torch.float64)  # 4 orthogonal rows
    assert float(mt.num_rank(x)) == 4.0
    assert float(mt.full_rank(x)) == 1.0
    s = mt.singular_values(x)
    assert torch.allclose(s, torch.tensor([4.0, 3.0, 2.0, 1.0], dtype=torch.float64))
    assert float(mt.stable_rank(x)) == pytest.approx(30 / 16)
    p = torch.tensor([4.0, 3.0, 2.0, 1.0]) / 10
    assert float(mt.effective_rank(x)) == pytest.approx(math.exp(-(p * p.log()).sum().item()))
    assert float(mt.mean_abs_cos(x)) == pytest.approx(0.0, abs=1e-12)
    assert float(mt.mean_signed_cos(x)) == pytest.approx(0.0, abs=1e-12)
    assert float(mt.effective_rank(torch.eye(5, dtype=torch.float64))) == pytest.approx(5.0)


def test_cosines_closed_forms() -> None:
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    # pairs: (0,1) -1, (0,2) +1, (1,2) -1 -> signed mean -1/3, abs mean 1
    assert float(mt.mean_signed_cos(x)) == pytest.approx(-1 / 3)
    assert float(mt.mean_abs_cos(x)) == pytest.approx(1.0)
    assert float(mt.mean_abs_cos(rank_one())) == pytest.approx(1.0)


def test_isotropic_gaussian_cosine_near_zero_effective_rank_near_full() -> None:
    x = torch.randn(512, 64, generator=_gen(3), dtype=torch.float64)
    assert abs(float(mt.mean_signed_cos(x))) < 0.01
    # E|cos| for independent isotropic directions in d dims ~ sqrt(2/(pi d)) = 0.0997
    assert float(mt.mean_abs_cos(x)) == pytest.approx(math.sqrt(2 / (math.pi * 64)), rel=0.05)
    assert float(mt.effective_rank(x)) > 0.9 * 64
    assert float(mt.full_rank(x)) == 1.0
    assert float(mt.mu_rel(x)) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("tile", [64 * 64, 100 * 64 * 64, 1 << 20])  # n > side; samples per tile; one tile
@pytest.mark.parametrize("shape", [(2, 137, 5), (3, 2, 64, 4), (130, 3)])
def test_tiled_abs_cosine_matches_the_whole_gram_matrix(monkeypatch: pytest.MonkeyPatch, tile, shape) -> None:
    """Every pair once: tiles on the diagonal counted once, those above it twice, none below; a zero token
    counts 0; batch dimensions kept."""
    from rankcollapse.metrics import measures

    x = torch.randn(*shape, generator=_gen(4), dtype=torch.float64)
    x[..., 3, :] = 0.0
    n = shape[-2]
    g = mt.pairwise_cosines(x).abs()
    direct = (g.sum(dim=(-2, -1)) - g.diagonal(dim1=-2, dim2=-1).sum(-1)) / (n * (n - 1))
    monkeypatch.setattr(measures, "_COSINE_TILE", tile)
    got = mt.mean_abs_cos(x)
    assert got.shape == direct.shape and got.dtype == torch.float64
    assert torch.allclose(got, direct, rtol=1e-12, atol=0)
    assert torch.allclose(mt.mean_abs_cos(x.float()), direct.float(), rtol=1e-5)


def test_zero_token_counts_as_zero_cosine() -> None:
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    assert float(mt.mean_abs_cos(x)) == pytest.approx(2 / 6)
    assert float(mt.mean_signed_cos(x)) == pytest.approx(2 / 6)


def test_dong_residual_composite_norm() -> None:
    x = torch.tensor([[1.0, 2.0], [3.0, 2.0]], dtype=torch.float64)
    # residual = [[-1, 0], [1, 0]]: max col abs sum 2, max row abs sum 1 -> sqrt(2)
    assert float(mt.dong_residual(x)) == pytest.approx(math.sqrt(2.0))
    # ||x||_1 = 4, ||x||_inf = 5
    assert float(mt.dong_residual(x, relative=True)) == pytest.approx(math.sqrt(2.0) / math.sqrt(20.0))
    assert float(mt.dong_residual(rank_one())) == pytest.approx(0.0, abs=1e-13)


def test_collapse_metrics_columns_agree_with_functions_and_summarize() -> None:
    x = torch.randn(3, 12, 6, generator=_gen(5), dtype=torch.float64)
    per = mt.collapse_metrics(x)
    assert tuple(per) == mt.METRIC_NAMES
    assert all(v.shape == (3,) for v in per.values())
    assert torch.allclose(per["mu"], mt.mu(x))
    assert torch.allclose(per["mu_rel"], mt.mu_rel(x))
    assert torch.allclose(per["num_rank"], mt.num_rank(x))
    assert torch.allclose(per["sigma_min"], mt.singular_values(x)[:, -1])
    assert torch.allclose(per["effective_rank"], mt.effective_rank(x))
    assert torch.allclose(per["mean_abs_cos"], mt.mean_abs_cos(x))
    assert torch.allclose(per["dong_residual"], mt.dong_residual(x))
    row = mt.summarize(per)
    assert list(row)[: len(mt.METRIC_NAMES)] == list(mt.METRIC_NAMES)
    assert row["mu"] == pytest.approx(float(per["mu"].mean()))
    assert row["mu_min"] == pytest.approx(float(per["mu"].min()))
    assert row["full_rank_max"] == 1.0
    sub = mt.collapse_metrics(x, ["mu_rel", "sigma_max"])
    assert list(sub) == ["mu_rel", "sigma_max"]
    with pytest.raises(ValueError, match="unknown metric"):
        mt.collapse_metrics(x, ["nope"])


def test_numerical_rank_matches_torch_matrix_rank() -> None:
    a = torch.randn(4, 10, 3, generator=_gen(6), dtype=torch.float64)
    b = torch.randn(4, 3, 6, generator=_gen(7), dtype=torch.float64)
    x = a @ b  # rank 3
    assert torch.equal(mt.num_rank(x), torch.linalg.matrix_rank(x).to(torch.float64))
    assert torch.equal(mt.num_rank(x), torch.full((4,), 3.0, dtype=torch.float64))


def test_a_bfloat16_model_is_measured_in_float32_against_its_own_precision() -> None:
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(2, 8, 16, generator=gen)
    x = (base[:, :1] + 1e-3 * base).to(torch.bfloat16)  # tokens alike to 1e-3: below bf16's floor
    got = mt.collapse_metrics(x)  # the SVD has no bfloat16 kernel: this raised NotImplementedError
    ref = mt.collapse_metrics(x.float())
    torch.testing.assert_close(got["mu_rel"], ref["mu_rel"])  # the same values, measured in float32
    assert bool(torch.isfinite(got["sigma_min"]).all())
    # the floor is bfloat16's (32 eps = 0.25), not float32's: these tokens sit at it in bf16 only
    assert bool((got["at_floor"] == 1).all()) and bool((ref["at_floor"] == 0).all())
    geometry, sv = mt.token_geometry(x)
    # bf16's own rounding, (eps / 2) ||x||_F relative to s_1, above float32's 16 eps32
    # (not matrix_rank's 16 eps_bf16 = 0.125)
    own = 2**-8 * sv.square().sum(-1).sqrt() / sv[:, 0]
    assert sv.dtype == torch.float64
    floor32 = torch.full_like(own, 16 * 2**-23)
    torch.testing.assert_close(geometry["rank_tol_rel"], torch.maximum(own, floor32), rtol=1e-5, atol=0.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_state_of_rank_three_reads_rank_three_at_a_model_shape(dtype: torch.dtype) -> None:
    # matrix_rank's max(n, d) eps s_1 is 4.5 s_1 for bf16 at 512 x 576: every rank read 0 before
    gen = torch.Generator().manual_seed(1)
    x = (torch.randn(512, 3, generator=gen) @ torch.randn(3, 576, generator=gen)).to(dtype)[None]
    geometry, sv = mt.token_geometry(x)
    assert int(geometry["rank"][0]) == 3 and float(geometry["rank_tol_rel"][0]) < 0.01
    assert int(mt.collapse_metrics(x, ["num_rank"])["num_rank"][0]) == 3
    # the rounding noise (at most eps / 2 of each entry) is below the tolerance: no spurious fourth direction
    assert float(sv[0, 3] / sv[0, 0]) < float(geometry["rank_tol_rel"][0])
