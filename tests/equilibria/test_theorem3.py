"""Theorem 3 as published: the bidiagonal W_V's equilibria of every rank, their checks, App. F.2-F.3.

Closed forms where the paper gives them (chain tokens, 2^k count, stable-rank bound); otherwise a plain
float64 iteration of the map written here (NumPy, uniform causal attention)."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria.lnmap import causal_mask
from rankcollapse.equilibria.theorem3 import (
    appendix_f1_value,
    bidiagonal_value,
    enumerate_equilibria,
    paper_chain,
)
from rankcollapse.equilibria.theorem3_checks import (
    check_f2,
    convergence_from_nearby,
    direction_counts,
    lemma13,
    srank_bound,
    tangent_moduli,
)
from rankcollapse.metrics import num_rank


def plain_step(x: np.ndarray, w_v: np.ndarray) -> np.ndarray:
    """One layer X <- D A X W_V with A_ij = 1/i for j <= i (W_Q = W_K = 0, causal); x [n, d]."""
    y = (np.cumsum(x, axis=0) / np.arange(1, len(x) + 1)[:, None]) @ w_v
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def counts(n: int, w: float) -> collections.Counter:
    return collections.Counter((e.rank, e.family) for e in enumerate_equilibria(bidiagonal_value(n, w), n))


def test_bidiagonal_value_matrix_closed_form() -> None:
    w = bidiagonal_value(3, 4.0)
    assert torch.equal(
        w, torch.tensor([[1.0, 4.0, 0.0], [0.0, 1.0, 4.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    )
    assert torch.equal(appendix_f1_value(3, 1, 4.0), torch.eye(3, dtype=torch.float64))
    assert torch.equal(appendix_f1_value(3, 2, 2.0)[1:, 1:], torch.tensor([[1.0, 2.0], [0.0, 1.0]]).double())


@pytest.mark.parametrize("n", [3, 4, 5])
def test_paper_family_has_two_to_the_k_of_every_rank_when_w_is_at_least_n(n: int) -> None:
    c = counts(n, float(n))
    assert [c[(k, "paper")] for k in range(1, n + 1)] == [2**k for k in range(1, n + 1)]


def test_every_equilibrium_is_a_fixed_point_of_the_plain_map_with_its_rank() -> None:
    n, w = 4, 4.0
    w_v = bidiagonal_value(n, w)
    for e in enumerate_equilibria(w_v, n):
        x = e.x.numpy()
        assert np.abs(plain_step(x, w_v.numpy()) - x).max() < 1e-13
        assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
        assert e.rank == int(num_rank(e.x)) == np.linalg.matrix_rank(x, tol=1e-9)


def test_chain_tokens_match_the_printed_closed_form() -> None:
    for w in (3.0, 4.0, 7.5):
        eqs = enumerate_equilibria(bidiagonal_value(3, w), 3, family="paper")
        chain = paper_chain(3, w)
        match = [e for e in eqs if torch.allclose(e.x, chain, rtol=0.0, atol=1e-14)]
        assert len(match) == 1 and match[0].rank == 3 and match[0].family == "paper"


def test_first_tokens_at_e_d_then_the_chain() -> None:
    n = 4
    for e in enumerate_equilibria(bidiagonal_value(n, 4.0), n, family="paper"):
        s = float(e.x[0, -1])
        m = n - e.rank + 1
        assert torch.equal(e.x[:m], s * torch.eye(n, dtype=torch.float64)[-1].expand(m, n))
        assert e.lambdas[:m] == pytest.approx(list(range(1, m + 1)))
        assert all(b == "jordan" for b in e.branches[m:])


def test_below_w_equals_n_the_paper_family_thins_but_other_branches_keep_every_rank() -> None:
    c = counts(4, 3.0)  # w = 3 < N = 4: the rank-2 chain token sits on the boundary (no free sign)
    assert c[(2, "paper")] == 2 and c[(4, "paper")] == 16
    c = counts(4, 1.5)
    assert c[(2, "paper")] == 0 and c[(3, "paper")] == 0 and c[(4, "paper")] == 16
    assert all(c[(k, "paper")] + c[(k, "other")] > 0 for k in range(1, 5))


def test_other_branches_are_equilibria_outside_the_paper_family() -> None:
    n, w = 3, 3.0
    eqs = enumerate_equilibria(bidiagonal_value(n, w), n)
    other = [e for e in eqs if e.family == "other"]
    assert len(other) == 6 and {e.rank for e in other} == {2}
    assert all(
        any(b == "lambda" and abs(lam - 1) > 1e-6 for b, lam in zip(e.branches, e.lambdas, strict=True))
        for e in other
    )


def test_stable_rank_bound_of_app_f2_on_every_full_rank_equilibrium() -> None:
    for n in (3, 4):
        eqs = enumerate_equilibria(bidiagonal_value(n, float(n)), n)
        rows = check_f2(eqs, float(n))
        assert len(rows) == sum(e.rank == n for e in eqs) > 0
        assert all(r["holds"] for r in rows)
        assert rows[0]["bound"] == pytest.approx(n / (n - (n - 1) / n**2))
    assert srank_bound(4, 4.0) == pytest.approx(4 / (4 - 3 / 16))


def test_tangent_spectrum_counts_on_the_product_of_spheres() -> None:
    n, w = 4, 4.0
    w_v = bidiagonal_value(n, w)
    eqs = enumerate_equilibria(w_v, n)
    rank1 = next(e for e in eqs if e.rank == 1)
    mods = tangent_moduli(rank1.x, w_v, causal_mask(n), torch.zeros(n, n, dtype=torch.float64), True)
    # token i at e_d with lambda_i = i: the Jordan block of W_V on e_d^perp divided by i
    assert sorted(mods) == pytest.approx(sorted([1.0] * 3 + [0.5] * 3 + [1 / 3] * 3 + [0.25] * 3), abs=1e-9)
    assert direction_counts(mods) == {"unstable": 0, "neutral": 3, "stable": 9}
    for e in eqs:
        c = direction_counts(tangent_moduli(e.x, w_v, causal_mask(n), torch.zeros(n, n).double(), True))
        assert sum(c.values()) == n * (n - 1) and c["neutral"] >= n - 1  # token 1's Jordan block
        if e.rank == n:
            assert c["unstable"] >= 1  # no full-rank equilibrium of the family is stable


def test_nearby_starts_converge_algebraically_to_rank_one_or_leave() -> None:
    n, w = 3, 3.0
    w_v = bidiagonal_value(n, w)
    eqs = enumerate_equilibria(w_v, n, family="paper")
    conv = convergence_from_nearby(eqs, w_v, starts=8, steps=1000)
    rank1 = [c for e, c in zip(eqs, conv, strict=True) if e.rank == 1]
    # token 1's neutral Jordan block: starts with the right sign of the leading coordinate come back like 1/t,
    # the others go to the antipode (a semi-stable equilibrium)
    assert all(c["kind"] == "algebraic" and c["exponent"] == pytest.approx(1.0, abs=0.15) for c in rank1)
    assert all(0 < c["share_returning"] < 1 for c in rank1)
    full = [c for e, c in zip(eqs, conv, strict=True) if e.rank == n]
    assert all(c["kind"] == "leaves" for c in full)
    assert all(c["layers"] == 1000 and "steps" not in c for c in conv)  # the depth, as core.names names it


def test_lemma13_invariant_set_keeps_rank_two() -> None:
    for d in (2, 3):
        r = lemma13(d, 4.0, samples=64, steps=800)
        assert r["samples"] == 64 and r["share_stays"] == 1.0 and r["share_rank2"] == 1.0
        assert r["layers"] == 800 and "steps" not in r


@pytest.mark.parametrize(
    "bad", [dict(n=4, d=3, w=4.0), dict(n=3, d=3, w=1.0), dict(n=3, d=3, w=math.nan), dict(n=0, d=0, w=2.0)]
)
def test_bad_construction_input_names_the_condition(bad: dict) -> None:
    from rankcollapse.equilibria.theorem3 import check_size

    with pytest.raises(RankCollapseError):
        check_size(bad["n"], bad["d"], bad["w"])


def test_enumeration_refuses_a_continuum() -> None:
    with pytest.raises(RankCollapseError, match="continuum"):
        enumerate_equilibria(appendix_f1_value(3, 2, 2.0), 3)


@pytest.mark.parametrize(("d", "k"), [(3, 1), (3, 2), (4, 2), (4, 3), (4, 4)])
def test_appendix_f1_examples_have_the_chain_of_rank_k(d: int, k: int) -> None:
    """App. F.1: W_V with a Jordan block of size k for eigenvalue 1: e_d then the chain (k tokens) is an
    equilibrium of rank k (closed forms: the bidiagonal block's paper chain in the last k coordinates)."""
    w = float(max(k, 2))
    w_v = appendix_f1_value(d, k, w).numpy()
    x = np.zeros((k, d))
    x[:, d - k :] = paper_chain(k, w).numpy() if k > 1 else np.array([[1.0]])
    if k > 3:  # beyond the printed tokens: the enumerated chain of the k x k block
        x[:, d - k :] = enumerate_equilibria(bidiagonal_value(k, w), k, family="paper")[-1].x.numpy()
    assert np.abs(plain_step(x, w_v) - x).max() < 1e-13
    assert np.linalg.matrix_rank(x, tol=1e-9) == k
