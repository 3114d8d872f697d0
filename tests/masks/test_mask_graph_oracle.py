"""Graph analysis equals networkx on random masks, and the closed-form radii of SPEC §4 hold."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankcollapse.masks import SparseMask, parse_mask
from rankcollapse.masks.analysis import _csr, bfs_distances, bitset_eccentricities
from rankcollapse.masks.graph import analyze_mask


def _networkx_facts(dense: np.ndarray) -> dict:
    """Reference: build the graph (edge j -> i iff M[i, j]) and ask networkx."""
    n = dense.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    rows, cols = np.nonzero(dense)
    g.add_edges_from(zip(cols.tolist(), rows.tolist(), strict=True))
    dist = {u: nx.single_source_shortest_path_length(g, u) for u in range(n)}
    centers = sorted(u for u in range(n) if len(dist[u]) == n)
    ecc = [max(dist[c].values()) for c in centers]
    cond = nx.condensation(g)
    closed = sorted(
        (sorted(cond.nodes[c]["members"]) for c in cond.nodes if cond.in_degree(c) == 0), key=lambda m: m[0]
    )
    radius = min(ecc) if centers else None
    best = centers[int(np.argmin(ecc))] if centers else None
    hops = [dist[best][v] for v in range(n)] if centers else None
    return {
        "self_loops": all(g.has_edge(i, i) for i in range(n)),
        "strongly_connected": nx.is_strongly_connected(g),
        "quasi_strongly_connected": bool(centers),
        "centers": centers,
        "ecc": ecc,
        "radius": radius,
        "best": best,
        "hops": hops,
        "closed": closed,
        "num_components": nx.number_strongly_connected_components(g),
        "edges": int(dense.sum()),
    }


def _assert_matches_networkx(dense: np.ndarray, analysis) -> None:
    ref = _networkx_facts(dense)
    assert analysis.edges == ref["edges"]
    assert analysis.self_loops == ref["self_loops"]
    assert analysis.strongly_connected == ref["strongly_connected"]
    assert analysis.quasi_strongly_connected == ref["quasi_strongly_connected"]
    assert analysis.num_components == ref["num_components"]
    assert analysis.center_nodes == ref["centers"]
    assert analysis.center_eccentricities.tolist() == ref["ecc"]
    assert analysis.radius == ref["radius"]
    assert analysis.best_center == ref["best"]
    assert (analysis.hop_distances.tolist() if analysis.hop_distances is not None else None) == ref["hops"]
    assert [c.tolist() for c in analysis.closed_components] == ref["closed"]
    assert analysis.theorem1_applies == (ref["self_loops"] and bool(ref["centers"]))


_small = st.integers(min_value=0, max_value=5)
_pos = st.integers(min_value=1, max_value=6)
_seed = st.integers(min_value=0, max_value=50)

_atoms = st.one_of(
    st.just("complete"),
    st.just("causal"),
    _small.map(lambda w: f"window:w={w}"),
    _small.map(lambda w: f"causal-window:w={w}"),
    st.tuples(_small, _pos).map(lambda t: f"dilated:w={t[0]},dilation={t[1]}"),
    _pos.map(lambda s: f"strided:stride={s}"),
    _pos.map(lambda b: f"block:size={b}"),
    _small.map(lambda k: f"prefix:k={k}"),
    st.tuples(_small, _small).map(lambda t: f"longformer:w={t[0]},global={t[1]}"),
    st.tuples(_small, _small, _small, _seed).map(
        lambda t: f"bigbird:w={t[0]},global={t[1]},random={t[2]},seed={t[3]}"
    ),
    st.tuples(_small, _small).map(lambda t: f"sinks:w={t[0]},sinks={t[1]}"),
    st.tuples(st.sampled_from([0.0, 0.05, 0.1, 0.3]), _seed).map(lambda t: f"random:p={t[0]},seed={t[1]}"),
)
_specs = st.recursive(
    _atoms,
    lambda inner: st.tuples(inner, st.sampled_from(["&", "|"]), inner).map(
        lambda t: f"({t[0]}){t[1]}({t[2]})"
    ),
    max_leaves=4,
)


@settings(max_examples=200, deadline=None)
@given(spec=_specs, n=st.integers(min_value=1, max_value=24))
def test_analysis_of_random_spec_matches_networkx(spec: str, n: int) -> None:
    mask = parse_mask(spec)
    _assert_matches_networkx(mask.dense_numpy(n), analyze_mask(mask, n))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=20),
    p=st.sampled_from([0.02, 0.08, 0.15, 0.3, 0.6]),
    seed=st.integers(0, 10_000),
    self_loops=st.booleans(),
)
def test_analysis_of_random_dense_matrix_matches_networkx(
    n: int, p: float, seed: int, self_loops: bool
) -> None:
    dense = np.random.default_rng(seed).random((n, n)) < p
    if self_loops:
        np.fill_diagonal(dense, True)
    _assert_matches_networkx(dense, analyze_mask(dense))
    _assert_matches_networkx(dense, analyze_mask(SparseMask.from_numpy(dense)))


@pytest.mark.parametrize("n", range(1, 65))
def test_closed_form_radii_of_spec_section_4(n: int) -> None:
    complete = analyze_mask("complete", n)
    assert complete.radius == (0 if n == 1 else 1)
    assert complete.center_nodes == list(range(n))
    causal = analyze_mask("causal", n)
    assert causal.radius == (0 if n == 1 else 1)
    assert causal.center_nodes == [0]
    for w in (1, 2, 3, 5, 8):
        window = analyze_mask(f"window:w={w}", n)
        assert window.center_nodes == list(range(n))
        assert window.radius == math.ceil(math.ceil((n - 1) / 2) / w)
        causal_window = analyze_mask(f"causal-window:w={w}", n)
        assert causal_window.center_nodes == [0]
        assert causal_window.radius == math.ceil((n - 1) / w)
    for b in (1, 2, 3, 7):
        if b < n:
            block = analyze_mask(f"block:size={b}", n)
            assert block.radius is None and block.center_nodes == []
            assert not block.quasi_strongly_connected
            assert len(block.closed_components) == math.ceil(n / b)


@pytest.mark.parametrize(
    "spec",
    ["random:p=0.04,seed=1", "bigbird:w=1,global=0,random=2,seed=3", "window:w=3|random:p=0.01,seed=2",
     "causal-window:w=2|block:size=20", "longformer:w=2,global=1&causal-window:w=9"],
)
def test_analysis_matches_networkx_at_moderate_n(spec: str) -> None:
    # n large enough that eccentricities go through the bit-parallel fallback on small-world masks
    mask = parse_mask(spec)
    _assert_matches_networkx(mask.dense_numpy(150), analyze_mask(mask, 150))


def test_window_eccentricities_closed_form_at_larger_n() -> None:
    n, w = 1000, 8
    a = analyze_mask(f"window:w={w}", n)
    v = np.arange(n)
    expected = np.maximum(np.ceil(v / w), np.ceil((n - 1 - v) / w)).astype(np.int64)
    assert np.array_equal(a.center_eccentricities, expected)
    assert a.bfs_runs < 60  # bounds, not one BFS per center


def test_bfs_and_bitset_eccentricities_agree() -> None:
    s = parse_mask("random:p=0.05,seed=3|causal-window:w=1").sparse(80)
    a = analyze_mask(s)
    ecc_bits = bitset_eccentricities(s, np.asarray(a.center_nodes[:64]))
    forward = s.transpose()

    g = _csr(forward.indptr, forward.indices, forward.n)
    ecc_bfs = [int(bfs_distances(g, int(c)).max()) for c in a.center_nodes[:64]]
    assert ecc_bits.tolist() == ecc_bfs == a.center_eccentricities[:64].tolist()


def test_to_dict_summarises_large_n_and_is_full_for_small_n() -> None:
    small = analyze_mask("window:w=2", 10).to_dict()
    assert small["hop_distances"] is not None and small["summarised"] == []
    assert small["center_nodes"] == list(range(10))
    big = analyze_mask("window:w=2", 5000).to_dict()
    assert "hop_distances" not in big and "hop_distances" in big["summarised"]
    assert len(big["center_nodes"]) == 5000
    assert sum(c for _, c in big["hop_distance_histogram"]) == 5000
    full = analyze_mask("window:w=2", 5000).to_dict(full=True)
    assert len(full["hop_distances"]) == 5000


def test_analysis_of_spec_never_builds_a_dense_matrix(monkeypatch) -> None:
    from rankcollapse.masks.base import Mask

    def forbidden(*args, **kwargs):
        raise AssertionError("dense n x n matrix built during analysis")

    monkeypatch.setattr(Mask, "dense_numpy", forbidden)
    monkeypatch.setattr(SparseMask, "to_numpy", forbidden)
    for spec in ["window:w=8", "causal-window:w=3|block:size=64", "longformer:w=2,global=1&window:w=50",
                 "strided:stride=64", "bigbird:w=1,global=0,random=2,seed=0"]:
        a = analyze_mask(spec, 5000)
        assert a.edges > 0


def test_analysis_accepts_torch_bool_tensor_and_rejects_bad_arrays() -> None:
    import torch

    from rankcollapse.edge.errors import RankCollapseError

    a = analyze_mask(torch.tril(torch.ones(5, 5, dtype=torch.bool)))
    assert a.center_nodes == [0] and a.radius == 1 and a.spec is None
    with pytest.raises(RankCollapseError, match="square"):
        analyze_mask(np.ones((2, 3), dtype=bool))
    with pytest.raises(RankCollapseError, match="dtype"):
        analyze_mask(np.ones((3, 3)))
    with pytest.raises(RankCollapseError, match="needs n"):
        analyze_mask("causal")
