"""Masks as Hasse diagrams: the limit of the composed flow, its depth, condensation and transitive reduction
equal networkx's on every family, on random masks and on random schedules; the closed-form depths hold."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import ALL_FAMILY_NAMES, from_dense, parse_schedule
from rankcollapse.masks.hasse import (
    check_hasse,
    composed_flows,
    hasse_analysis,
    hasse_reference,
    window_depth,
)

#: One spec per family (every registered family but file:, which a test file of its own covers).
FAMILY_SPECS = {
    "complete": "complete", "causal": "causal", "window": "window:w=2", "causal-window": "causal-window:w=2",
    "dilated": "dilated:w=2,dilation=3", "strided": "strided:stride=3", "block": "block:size=4",
    "prefix": "prefix:k=3", "longformer": "longformer:w=1,global=2",
    "bigbird": "bigbird:w=1,global=1,random=2,seed=3",
    "sinks": "sinks:w=1,sinks=2", "random": "random:p=0.15,seed=1", "document": "document:lengths=5,4,3",
    "tree": "tree:parents=-1,0,0,1,1,2,2,3,-1,8,8,9", "block-two-stream": "block-two-stream:size=2",
    "butterfly": "butterfly",
}


def _graph(masks: list[np.ndarray]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(masks[0].shape[0]))
    for m in masks:
        q, k = np.nonzero(m)
        g.add_edges_from(zip(k.tolist(), q.tolist(), strict=True))
    return g


def _assert_matches_networkx(spec: str, n: int) -> None:
    """Every fact of hasse_analysis against networkx, computed here from the dense layer masks."""
    sched = parse_schedule(spec)
    dense = [m.dense_numpy(n) for m in sched.period]
    g = _graph(dense)
    ours = hasse_analysis(spec, n)
    limit = ours.limit.to_numpy()
    closure = nx.transitive_closure(g, reflexive=True)
    assert {(j, i) for i, j in zip(*np.nonzero(limit), strict=True)} == set(closure.edges())
    sccs = list(nx.strongly_connected_components(g))
    assert ours.components == len(sccs)
    for comp in sccs:
        assert len({int(ours.component_of[v]) for v in comp}) == 1
    cond = nx.condensation(g)
    members = {c: frozenset(cond.nodes[c]["members"]) for c in cond.nodes}
    want = {(members[a], members[b]) for a, b in nx.transitive_reduction(cond).edges()}
    groups = [frozenset(np.flatnonzero(ours.component_of == c).tolist()) for c in range(ours.components)]
    got = {(groups[a], groups[b]) for a, b in ours.hasse_edges.tolist()}
    assert got == want
    assert ours.is_dag and nx.is_directed_acyclic_graph(cond)
    assert all(a < b for a, b in ours.hasse_edges.tolist())  # the numbering is a topological order


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_every_family_matches_networkx(family: str) -> None:
    _assert_matches_networkx(FAMILY_SPECS[family], 12)


def test_every_registered_family_is_covered() -> None:
    assert set(FAMILY_SPECS) == set(ALL_FAMILY_NAMES) - {"file"}


@pytest.mark.parametrize("seed", range(12))
def test_random_masks_and_random_schedules_match_networkx(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 15))
    p = float(rng.uniform(0.03, 0.3))
    one = f"random:p={p:.3f},seed={seed}"
    _assert_matches_networkx(one, n)
    layers = [f"random:p={float(rng.uniform(0.02, 0.2)):.3f},seed={seed + 100 + k}" for k in range(3)]
    layers.append(str(rng.choice(["causal-window:w=1", "window:w=1", "block:size=3", "causal"])))
    _assert_matches_networkx(";".join(layers[: int(rng.integers(2, 5))]), n)


def test_depth_is_the_fewest_layers_whose_composed_product_is_the_limit() -> None:
    """Against the layer-by-layer products themselves: P_{L*} is the limit and P_{L*-1} is not."""
    spec, n = "block:size=3;causal-window:w=1", 13
    ours = hasse_analysis(spec, n)
    sched = parse_schedule(spec, depth=ours.depth + 7)
    reach = np.eye(n, dtype=np.int64)
    products = [reach]
    for m in sched.masks:
        reach = ((m.dense_numpy(n).astype(np.int64) @ reach) > 0).astype(np.int64)
        products.append(reach)
    limit = ours.limit.to_numpy()
    assert all(np.array_equal(p.astype(bool), limit) for p in products[ours.depth:])
    assert not np.array_equal(products[ours.depth - 1].astype(bool), limit)
    assert ours.pairs_by_depth == [int(p.sum()) for p in products[: ours.depth + 1]]
    flows = composed_flows(spec, n, ours.depth + 2)
    assert all(np.array_equal(f, p.astype(bool)) for f, p in zip(flows, products[1:], strict=False))


@pytest.mark.parametrize("n", [1, 2, 17, 64])
@pytest.mark.parametrize("w", [1, 2, 5])
def test_window_depths_have_their_closed_form(n: int, w: int) -> None:
    assert hasse_analysis(f"window:w={w}", n).depth == window_depth(n, w)
    assert hasse_analysis(f"causal-window:w={w}", n).depth == window_depth(n, w)


def test_single_step_masks_and_orders_on_the_tokens() -> None:
    for spec in ("causal", "complete", "block:size=4", "prefix:k=3"):
        assert hasse_analysis(spec, 16).depth == 1
    causal = hasse_analysis("causal", 16)
    assert causal.partial_order_on_tokens and causal.hasse_edges.tolist() == [[t, t + 1] for t in range(15)]
    window = hasse_analysis("window:w=1", 16)
    assert window.components == 1 and not window.partial_order_on_tokens and len(window.hasse_edges) == 0
    assert hasse_analysis("block:size=4", 16).components == 4


def test_check_hasse_agrees_and_names_the_longest_shortest_path() -> None:
    c = check_hasse("sinks:w=2,sinks=1", 20)
    assert c.holds and c.longest_shortest_path == c.analysis.depth == c.reference_depth
    s = check_hasse("causal-window:w=1*3;causal", 20)
    assert s.holds and s.longest_shortest_path is None and s.analysis.depth == 4


def test_a_mask_without_self_loops_is_refused_in_one_line() -> None:
    strict = np.tril(np.ones((6, 6), dtype=bool), -1)
    strict[0, 0] = True
    for fn in (hasse_analysis, hasse_reference):
        with pytest.raises(RankCollapseError, match="no self-loop") as err:
            fn(from_dense(strict), 6)
        assert "\n" not in str(err.value)


def test_to_dict_is_json_ready() -> None:
    import json

    d = hasse_analysis("butterfly", 12).to_dict()
    assert json.loads(json.dumps(d))["depth"] == 1 and d["hasse_edge_count"] == len(d["hasse_edges"])
