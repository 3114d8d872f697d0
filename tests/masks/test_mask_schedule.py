"""Mask schedules: the composed graph equals networkx BFS over the explicitly layered product graph."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.composed import analyze_schedule
from rankcollapse.masks.schedule import MAX_LAYERS, parse_schedule, schedule_from_masks


def _random_spec(rng: np.random.Generator, n: int) -> str:
    kind = int(rng.integers(0, 12))
    w = int(rng.integers(0, 4))
    seed = int(rng.integers(0, 1000))
    if kind == 0:
        return f"random:p={rng.uniform(0, 0.5):.2f},seed={seed}"
    if kind == 1:
        return f"block:size={int(rng.integers(1, 5))}"
    if kind == 2:
        return f"window:w={w}"
    if kind == 3:
        return f"causal-window:w={w}"
    if kind == 4:
        return "causal"
    if kind == 5:
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 3))), replace=False))
        lengths = np.diff(np.concatenate([[0], cuts, [n]])).tolist()
        return f"document:lengths={','.join(map(str, lengths))}" + ("&causal" if rng.random() < 0.5 else "")
    if kind == 6:
        return f"strided:stride={int(rng.integers(1, 4))}"
    if kind == 7:
        parents = [-1] + [int(rng.integers(-1, i)) for i in range(1, n)]
        return f"tree:parents={','.join(map(str, parents))}"
    if kind == 8:
        return f"sinks:w={w},sinks={int(rng.integers(0, 2))}"
    if kind == 9:
        return f"prefix:k={int(rng.integers(0, n + 1))}"
    if kind == 10:
        return f"bigbird:w=0,global=0,random=1,seed={seed}"
    return "complete"


def _product_by_networkx(denses: list[np.ndarray]) -> np.ndarray:
    """P[i, j] iff node (L, i) is reachable from (0, j) in the layered graph (t, v) -> (t + 1, u)."""
    n, depth = denses[0].shape[0], len(denses)
    g = nx.DiGraph()
    g.add_nodes_from((t, v) for t in range(depth + 1) for v in range(n))
    for t, dense in enumerate(denses):
        rows, cols = np.nonzero(dense)
        g.add_edges_from(((t, int(j)), (t + 1, int(i))) for i, j in zip(rows, cols, strict=True))
    out = np.zeros((n, n), dtype=bool)
    for j in range(n):
        for t, i in nx.descendants(g, (0, j)):
            if t == depth:
                out[i, j] = True
    return out


def _facts(dense: np.ndarray) -> tuple[list[int], list[int], int | None]:
    """Centers, their eccentricities and the radius of the graph j -> i iff dense[i, j] (networkx)."""
    n = dense.shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    rows, cols = np.nonzero(dense)
    g.add_edges_from(zip(cols.tolist(), rows.tolist(), strict=True))
    dist = {u: nx.single_source_shortest_path_length(g, u) for u in range(n)}
    centers = [u for u in range(n) if len(dist[u]) == n]
    ecc = [max(dist[c].values()) for c in centers]
    return centers, ecc, (min(ecc) if centers else None)


def _one_hop(dense: np.ndarray) -> list[int]:
    return np.flatnonzero(dense.all(axis=0)).tolist()


def _oracle(specs: list[str], n: int) -> dict:
    denses = [parse_mask(s).dense_numpy(n) for s in specs]
    product = _product_by_networkx(denses)
    centers, ecc, radius = _facts(product)
    windows, start, first = [], 0, []
    for t in range(len(denses)):
        part = _product_by_networkx(denses[start : t + 1])
        if _one_hop(part):
            if not windows:
                first = _one_hop(part)
            windows.append((start, t + 1))
            start = t + 1
    return {"product": product, "centers": centers, "ecc": ecc, "radius": radius, "windows": windows,
            "first": first, "to_center": windows[0][1] if windows else None}


def _check_against_oracle(specs: list[str], n: int) -> str:
    got = analyze_schedule(schedule_from_masks(specs), n)
    ref = _oracle(specs, n)
    assert got.product.edges == int(ref["product"].sum())
    assert got.product.center_nodes == ref["centers"]
    assert got.product.center_eccentricities.tolist() == ref["ecc"]
    assert got.product.radius == ref["radius"]
    assert got.windows == ref["windows"]
    assert got.first_centers == ref["first"]
    assert got.layers_to_center == ref["to_center"]
    return got.method


def test_random_schedules_match_networkx_on_the_explicit_product_graph() -> None:
    rng = np.random.default_rng(2024)
    methods = {"intervals": 0, "bitset": 0}
    for _ in range(150):
        n = int(rng.integers(1, 11))
        depth = int(rng.integers(1, 6))
        specs = [_random_spec(rng, n) if n > 1 else "complete" for _ in range(depth)]
        methods[_check_against_oracle(specs, n)] += 1
    assert methods["intervals"] >= 10 and methods["bitset"] >= 10, methods  # both paths exercised


def test_interval_only_schedules_match_networkx() -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.integers(2, 14))
        pool = ["causal", "complete", f"window:w={int(rng.integers(0, 3))}",
                f"block:size={int(rng.integers(1, 5))}",
                f"causal-window:w={int(rng.integers(0, 3))}", f"prefix:k={int(rng.integers(0, 4))}",
                "causal&window:w=1", "block:size=3|causal-window:w=1"]
        specs = [pool[int(k)] for k in rng.integers(0, len(pool), size=int(rng.integers(1, 6)))]
        assert _check_against_oracle(specs, n) == "intervals"


@pytest.mark.parametrize(("spec", "n"), [("window:w=1", 17), ("causal-window:w=2", 15), ("causal", 9),
                                         ("window:w=3", 40), ("causal-window:w=1", 12)])
def test_one_mask_repeated_needs_its_radius_in_layers_and_gives_theorem1_windows(spec: str, n: int) -> None:
    r = parse_mask(spec).analysis(n).radius
    depth = 3 * r + r // 2  # three whole windows, then a part window too short to count
    a = analyze_schedule(spec, n, depth)
    assert a.layers_to_center == r
    assert a.windows == [(k * r, (k + 1) * r) for k in range(3)]
    eps = 0.3
    assert a.log_bound(eps) == pytest.approx(3 * math.log(1 - eps**r))  # (1 - eps^r)^floor(t/r)
    assert a.product.radius == 1


def test_gemma_like_local_global_schedule_at_large_n_uses_intervals() -> None:
    a = analyze_schedule("causal-window:w=511*5;causal", 200_000, 26)
    assert a.method == "intervals" and a.layers_to_center == 6 and a.first_centers == [0]
    assert a.windows == [(0, 6), (6, 12), (12, 18), (18, 24)]
    assert a.layer_radii[:6] == [392, 392, 392, 392, 392, 1]  # ceil(199999 / 511) = 392


def test_documents_never_get_a_center_at_any_depth() -> None:
    a = analyze_schedule("document:lengths=3,4,2&causal;document:lengths=3,4,2", 9, 12)
    assert a.layers_to_center is None and a.windows == [] and not a.theorem1_applies
    assert a.product.radius is None and [c.tolist() for c in a.product.closed_components] == [
        [0, 1, 2], [3, 4, 5, 6], [7, 8]]


def test_schedule_syntax_repeats_groups_and_cycles_to_depth() -> None:
    s = parse_schedule("[window:w=4;complete]*2;causal", depth=7)
    assert [m.spec for m in s.masks] == ["window:w=4", "complete", "window:w=4", "complete", "causal",
                                         "window:w=4", "complete"]
    assert s.spec == "window:w=4;complete;window:w=4;complete;causal"
    t = parse_schedule("causal-window:w=511 * 5 ; causal")
    assert t.depth == 6 and t.spec == "causal-window:w=511*5;causal"
    assert parse_schedule(t.spec).spec == t.spec
    assert "depth 26 = 4 x 6 layers + the first 2" in t.at_depth(26).describe()
    combined = parse_schedule("causal&window:w=2|block:size=3*2")
    assert combined.depth == 2 and combined.masks[0].spec == "causal&window:w=2|block:size=3"


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "empty schedule"),
    ("causal;", "expected a mask spec"),
    ("causal*0", "not an integer >= 1"),
    ("causal*x", "not an integer >= 1"),
    ("[causal", "missing ']'"),
    ("causal]", "unexpected ']'"),
    ("causal*100001", f"more than {MAX_LAYERS} layers"),
    ("[[causal*1000]*1000]", f"more than {MAX_LAYERS} layers"),
    ("[" * 400 + "causal" + "]" * 400, "nested deeper"),
    ("nope*3", "unknown mask family"),
])
def test_bad_schedules_are_one_line_errors(text: str, fragment: str) -> None:
    with pytest.raises(RankCollapseError) as err:
        parse_schedule(text)
    assert fragment in str(err.value) and "\n" not in str(err.value) and len(str(err.value)) < 400


def test_bitset_path_refuses_work_beyond_the_limit() -> None:
    with pytest.raises(RankCollapseError, match="word operations"):
        analyze_schedule("random:p=0.5,seed=1", 20000, 30)
