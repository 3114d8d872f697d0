"""App. F.4 searched: complete-mask equilibria of the paper's bidiagonal W_V with a free W_QK.

Every found equilibrium is checked against one post-LN complete-mask layer written here in plain NumPy
(not the package's map); the full-rank impossibility (Perron-Frobenius) is checked on random (X, M)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rankcollapse.equilibria.complete_mask import (
    CompleteMaskSummary,
    FullRankChecks,
    SearchEnd,
    cone_margin,
    embed,
    full_rank_checks,
    perron_gap,
    reduced_residual,
    search_rank,
    stability,
)
from rankcollapse.equilibria.lnmap import ln_attention_map
from rankcollapse.equilibria.theorem3 import bidiagonal_value

#: A seed whose first starts hit at N = d = 3, w = 2 (4 of its first 4 starts do).
HITTING_SEED = 2


def plain_layer(x: np.ndarray, m: np.ndarray, w_v: np.ndarray) -> np.ndarray:
    """One post-LN layer under the complete mask: ``normalize_rows(softmax(X M X^T) X W_V)``; x [n, d]."""
    s = x @ m @ x.T
    a = np.exp(s - s.max(axis=1, keepdims=True))
    a = a / a.sum(axis=1, keepdims=True)
    y = a @ x @ w_v
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def plain_attention(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    s = x @ m @ x.T
    a = np.exp(s - s.max(axis=1, keepdims=True))
    return a / a.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def rank_two() -> list[SearchEnd]:
    """The rank-2 search at N = d = 3, w = 2: two starts of a seed that hits; the ends that are
    equilibria (residual <= 1e-10, rank 2, attention not saturated)."""
    found = search_rank(3, 2, 2.0, starts=2, m_bound=5.0, rng=np.random.default_rng(HITTING_SEED))
    assert found.starts == 2 and found.drawn >= 2 and len(found.ends) == 2
    return [e for e in found.ends if e.residual <= 1e-10 and e.rank == 2 and e.attention_min >= 1e-6]


def test_the_search_finds_rank_two_at_n_d_3_within_two_starts(rank_two: list[SearchEnd]) -> None:
    assert len(rank_two) >= 1


def test_a_found_equilibrium_is_a_fixed_point_of_a_plain_numpy_layer(rank_two: list[SearchEnd]) -> None:
    w_v = bidiagonal_value(3, 2.0).numpy()
    for e in rank_two:
        assert np.abs(plain_layer(e.x, e.m, w_v) - e.x).max() <= 1e-12
        assert np.allclose(np.linalg.norm(e.x, axis=1), 1.0, atol=1e-15)
        assert plain_attention(e.x, e.m).min() > 1e-6  # a true softmax, not a saturated one


def test_a_found_equilibrium_has_rank_exactly_two_in_the_invariant_subspace(
    rank_two: list[SearchEnd],
) -> None:
    for e in rank_two:
        sv = np.linalg.svd(e.x, compute_uv=False)
        assert sv[1] / sv[0] > 1e-3 and sv[2] <= 1e-15  # rank 2, not a collapsed rank-1 state
        assert np.all(e.x[:, 0] == 0.0) and e.outside == 0.0  # span{e_2, e_3}: W_V-invariant
        assert np.all(e.m[0, :] == 0.0) and np.all(e.m[:, 0] == 0.0)  # only M's trailing block acts


def test_the_stored_row_round_trips_the_equilibrium_exactly(rank_two: list[SearchEnd]) -> None:
    row = rank_two[0].to_row()
    assert np.array_equal(np.array(json.loads(row["x"])), rank_two[0].x)
    assert np.array_equal(np.array(json.loads(row["m"])), rank_two[0].m)


def test_at_an_equilibrium_c_inverse_a_acts_as_w_v_inverse_on_its_rows(rank_two: list[SearchEnd]) -> None:
    """The identity the full-rank proof turns on: ``A X W_V = C X`` gives ``C^-1 A X = X W_V^-1``."""
    w_v = bidiagonal_value(3, 2.0).numpy()
    for e in rank_two:
        a = plain_attention(e.x, e.m)
        c = np.linalg.norm(a @ e.x @ w_v, axis=1)
        assert np.abs((a / c[:, None]) @ e.x - e.x @ np.linalg.inv(w_v)).max() <= 1e-12


def test_below_full_rank_perron_only_pushes_the_jordan_eigenvalue_below_the_top(
    rank_two: list[SearchEnd],
) -> None:
    """Why the proof stops at full rank: at a rank-k equilibrium ``C^-1 A`` maps X's column space to itself
    like ``J_k^-1`` (the eigenvalue 1, k times), so 1 cannot be its simple dominant eigenvalue: the Perron
    eigenvalue sits strictly above 1, and 1 is an eigenvalue of the rest."""
    w_v = bidiagonal_value(3, 2.0)
    for e in rank_two:
        pg = perron_gap(torch.from_numpy(e.x), torch.from_numpy(e.m), w_v)
        a = plain_attention(e.x, e.m)
        c = np.linalg.norm(a @ e.x @ w_v.numpy(), axis=1)
        ev = np.linalg.eigvals(a / c[:, None])
        assert pg.top > 1 + 1e-6 and np.sort(np.abs(ev - 1.0))[1] < 1e-6  # 1 twice (up to eps^(1/2))


def test_an_equilibrium_passes_the_cone_test_by_its_attention(rank_two: list[SearchEnd]) -> None:
    """Its softmax rows are positive weights that solve the cone's linear conditions."""
    j_k = bidiagonal_value(2, 2.0).numpy()
    for e in rank_two:
        assert cone_margin(e.x[:, 1:], j_k) >= 0.99 * e.attention_min


@pytest.mark.parametrize("seed", range(6))
def test_no_invertible_x_is_a_complete_mask_equilibrium_perron(seed: int) -> None:
    """Random full-rank X and random M (several scales): the dominant eigenvalue of ``C^-1 A`` is real,
    positive, simple and strictly above the others' moduli, while ``W_V^-1`` has the eigenvalue 1 N
    times: never similar. No invertible Y passes the cone test either (no positive attention at all)."""
    rng = np.random.default_rng(seed)
    n = 3 + seed % 2
    w_v = bidiagonal_value(n, 2.0 + seed)
    assert np.allclose(torch.linalg.eigvals(torch.linalg.inv(w_v)).numpy(), 1.0)
    for scale in (0.1, 1.0, 5.0):
        z = rng.standard_normal((n, n))
        x = z / np.linalg.norm(z, axis=1, keepdims=True)
        pg = perron_gap(torch.from_numpy(x), torch.from_numpy(scale * rng.standard_normal((n, n))), w_v)
        assert pg.top > 0 and pg.top_imag == 0.0 and pg.second < pg.top and pg.gap > 1e-6
        assert cone_margin(x, w_v.numpy()) < 0


def test_full_rank_checks_report_the_smallest_gap_and_the_largest_cone_margin() -> None:
    c = full_rank_checks(3, 2.0, draws=8, m_bound=5.0, rng=np.random.default_rng(0))
    assert c.draws == 8 and c.min_gap > 0 and c.max_imag == 0.0 and c.max_cone < 0


def test_the_full_rank_search_finds_no_equilibrium() -> None:
    found = search_rank(3, 3, 2.0, starts=3, m_bound=5.0, rng=np.random.default_rng(0))
    assert found.starts == found.drawn == 3  # no cone test at full rank
    full = [e for e in found.ends if e.rank == 3]
    assert all(e.residual > 1e-6 for e in full)
    assert all(e.rank < 3 for e in found.ends if e.residual <= 1e-10)  # converged ones collapsed


def test_the_reduced_jacobian_is_the_derivative_of_the_reduced_residual() -> None:
    rng = np.random.default_rng(0)
    n, k = 4, 3
    j_k = bidiagonal_value(k, 2.0).numpy()
    p = rng.standard_normal(n * k + k * k)
    _, jac = reduced_residual(p, n, k, j_k, jacobian=True)
    h = 1e-6
    numeric = np.stack(
        [
            (reduced_residual(p + h * e, n, k, j_k) - reduced_residual(p - h * e, n, k, j_k)) / (2 * h)
            for e in np.eye(len(p))
        ],
        axis=1,
    )
    assert np.abs(numeric - jac).max() < 1e-7


def test_the_reduced_residual_is_the_full_maps_residual_in_the_subspace() -> None:
    rng = np.random.default_rng(1)
    n, k, d = 4, 2, 4
    z, m_k = rng.standard_normal((n, k)), rng.standard_normal((k, k))
    r = reduced_residual(np.concatenate([z.ravel(), m_k.ravel()]), n, k, bidiagonal_value(k, 3.0).numpy())
    x, m = embed(z / np.linalg.norm(z, axis=1, keepdims=True), m_k, d)
    full = ln_attention_map(torch.from_numpy(x), bidiagonal_value(d, 3.0), None, torch.from_numpy(m)).numpy()
    assert np.abs(full[:, : d - k]).max() == 0.0
    assert np.abs((full - x)[:, d - k :].ravel() - r).max() < 1e-14


def test_w_qk_zero_makes_every_state_rank_one_after_one_layer() -> None:
    """Uniform attention (``W_QK = 0``, the old search's third candidate): every token becomes
    ``normalize(mean(X) W_V)``, so no equilibrium of rank >= 2 exists for it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4))
    out = plain_layer(x, np.zeros((4, 4)), bidiagonal_value(4, 2.0).numpy())
    assert np.abs(out - out[0]).max() < 1e-15


def test_nearby_starts_return_to_an_attracting_state_and_leave_a_found_equilibrium(
    rank_two: list[SearchEnd],
) -> None:
    """The nearby-start measure sees both outcomes: every token at e_3 with ``W_QK = 0`` and
    ``W_V = diag(1/2, 1/2, 1)`` (rank one, exponentially attracting) draws its starts back; a found rank-2
    equilibrium of the paper's W_V, with an unstable tangent direction, does not."""
    sink = torch.zeros(3, 3, dtype=torch.float64)
    sink[:, -1] = 1.0
    g = torch.Generator().manual_seed(0)
    contracting = torch.diag(torch.tensor([0.5, 0.5, 1.0], dtype=torch.float64))
    at_sink = stability(
        sink, torch.zeros(3, 3, dtype=torch.float64), contracting, nearby=4, layers=50, generator=g
    )
    assert at_sink.share_back == 1.0 and at_sink.unstable == 0 and at_sink.top_modulus < 1
    w_v = bidiagonal_value(3, 2.0)
    e = rank_two[0]
    found = stability(torch.from_numpy(e.x), torch.from_numpy(e.m), w_v, nearby=4, layers=300, generator=g)
    assert found.unstable >= 1 and found.top_modulus > 1 and found.share_back == 0.0


def test_a_summary_reads_back_as_the_same_record() -> None:
    rec = CompleteMaskSummary(
        4, 2.0, (2, 3, 4), (24, 24, 8), (61, 218, 8), FullRankChecks(32, 0.048, 0.0, -0.04)
    )
    flat = json.loads(json.dumps(rec.to_summary()))
    assert CompleteMaskSummary.from_summary(4, 2.0, flat) == rec
    with pytest.raises(ValueError, match="every searched rank"):
        CompleteMaskSummary(3, 2.0, (2, 3), (8,), (9, 2), rec.checks)
