"""The Cesàro-power closed forms (Chowdhury 2026's model, our formulas): exact rows against matrix powers,
the continuous density against its definition and its limit, the dead zone, the rank order a Spearman
correlation reads."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import spearmanr

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.cesaro import (
    cesaro_density,
    cesaro_matrix,
    cesaro_row,
    dead_zone,
    middle_position,
    mixed_row,
    spearman,
    theory_profile,
)


@pytest.mark.parametrize(("n", "depth", "i"), [(1, 3, 0), (7, 0, 3), (9, 1, -1), (12, 5, 6), (30, 8, -1)])
def test_rows_equal_matrix_powers(n: int, depth: int, i: int) -> None:
    c = cesaro_matrix(n)
    assert np.allclose(c.sum(axis=1), 1.0) and np.allclose(np.triu(c, 1), 0)
    assert np.allclose(cesaro_row(n, depth, i), np.linalg.matrix_power(c, depth)[i], rtol=1e-12, atol=1e-15)
    lam = 0.3
    mixed = np.linalg.matrix_power(lam * np.eye(n) + (1 - lam) * c, depth)[i]
    assert np.allclose(mixed_row(n, depth, lam, i), mixed, rtol=1e-12, atol=1e-15)
    assert math.isclose(mixed_row(n, depth, lam, i).sum(), 1.0, rel_tol=1e-12)


@pytest.mark.parametrize("depth", [1, 2, 3, 6])
def test_density_is_a_product_of_uniforms(depth: int) -> None:
    total, _ = integrate.quad(lambda y: float(cesaro_density(y, depth)), 0, 1, limit=200)
    assert math.isclose(total, 1.0, rel_tol=1e-6)
    rng = np.random.default_rng(depth)
    draws = rng.uniform(size=(200_000, depth)).prod(axis=1)  # Monte Carlo of the same law
    for y in (0.05, 0.3):
        mass, _ = integrate.quad(lambda t: float(cesaro_density(t, depth)), 0, y)
        assert abs((draws <= y).mean() - mass) < 0.005
    assert math.isclose(float(cesaro_density(1 / math.e, depth)), dead_zone(depth), rel_tol=1e-12)


def test_density_diverges_logarithmically_at_the_start_and_vanishes_at_the_end() -> None:
    f = cesaro_density(np.array([1e-2, 1e-4, 1e-8]), 3)
    assert np.allclose(f, np.log([1e2, 1e4, 1e8]) ** 2 / 2)  # (ln 1/y)^2 / 2!: growing without bound
    assert float(cesaro_density(1.0, 4)) == 0.0 and float(cesaro_density(1.0, 1)) == 1.0
    assert math.isfinite(float(cesaro_density(1e-300, 200)))


def test_the_discrete_row_approaches_the_density_as_n_grows() -> None:
    depth, y = 3, np.array([0.1, 0.25, 0.5, 0.75])
    errors = []
    for n in (64, 512, 4096):
        row = n * cesaro_row(n, depth)
        j = np.round(y * n).astype(int)
        errors.append(np.abs(row[j] / cesaro_density(j / n, depth) - 1).max())
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.01


def test_middle_and_dead_zone() -> None:
    assert middle_position(100) == 37 and middle_position(3) == 1
    assert dead_zone(1) == 1.0 and math.isclose(dead_zone(5), 1 / 24)
    with pytest.raises(RankCollapseError, match="n >= 3"):
        middle_position(2)


def test_theory_profile_ranks_are_those_of_every_residual_mixture() -> None:
    n, depth = 40, 6
    theory = theory_profile(n, depth)
    assert (np.diff(theory[:-1]) < 0).all() and theory.argmax() == n - 1
    rng = np.random.default_rng(0)
    c = cesaro_matrix(n)
    for _ in range(5):
        w = rng.uniform(0, 1, size=depth + 1)
        mixture = sum(w[k] * np.linalg.matrix_power(c, k)[-1] for k in range(1, depth + 1))
        mixture[-1] += 2.0  # the delta above the first position
        assert spearman(theory, mixture) == pytest.approx(1.0)


def test_spearman_is_scipys_and_nan_on_a_constant() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=30), rng.normal(size=30)
    b[3] = b[7]  # a tie
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)
    assert math.isnan(spearman(np.ones(5), a[:5])) and math.isnan(spearman(a[:2], b[:2]))
    with pytest.raises(RankCollapseError, match="lengths"):
        spearman(a, b[:5])


@pytest.mark.parametrize("bad", [{"n": 0, "depth": 1}, {"n": 3, "depth": -1}, {"n": 3.0, "depth": 1}])
def test_bad_sizes_are_one_line(bad: dict) -> None:
    with pytest.raises(RankCollapseError, match="invalid"):
        cesaro_row(**bad)
    with pytest.raises(RankCollapseError, match="lam"):
        mixed_row(4, 2, lam=1.5)
