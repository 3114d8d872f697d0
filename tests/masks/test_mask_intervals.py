"""Interval masks: the O(n log n) analysis from runs equals BFS on the sparse form; document and tree."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.graph import analyze_sparse
from rankcollapse.masks.intervals import compose
from rankcollapse.masks.spec import _Parser


def _random_interval_spec(rng: np.random.Generator, n: int) -> str:
    atoms = ["causal", "complete", f"window:w={int(rng.integers(0, 5))}",
             f"block:size={int(rng.integers(1, 6))}", f"causal-window:w={int(rng.integers(0, 5))}",
             f"prefix:k={int(rng.integers(0, n + 1))}"]
    if n > 1:
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 4))), replace=False))
        atoms.append("document:lengths=" + ",".join(map(str, np.diff(np.concatenate([[0], cuts, [n]])))))
    picks = [atoms[int(k)] for k in rng.integers(0, len(atoms), size=int(rng.integers(1, 4)))]
    ops = rng.choice(["&", "|"], size=len(picks) - 1)
    return picks[0] + "".join(f"{op}{p}" for op, p in zip(ops, picks[1:], strict=True))


def _same(a, b) -> None:
    for key in ("edges", "self_loops", "strongly_connected", "quasi_strongly_connected", "num_components",
                "radius", "best_center", "band"):
        assert getattr(a, key) == getattr(b, key), key
    assert a.center_nodes == b.center_nodes
    assert a.center_eccentricities.tolist() == b.center_eccentricities.tolist()
    assert [c.tolist() for c in a.closed_components] == [c.tolist() for c in b.closed_components]
    ha, hb = a.hop_distances, b.hop_distances
    assert (ha is None and hb is None) or ha.tolist() == hb.tolist()


def test_interval_analysis_equals_bfs_on_the_sparse_form_for_random_combinations() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        spec = _random_interval_spec(rng, n)
        mask = _Parser(spec).parse()
        iv = mask.intervals(n)
        assert iv is not None, spec
        start, stop = iv
        i = np.arange(n)  # the conditions of an interval mask: monotone runs that contain the diagonal
        assert (start <= i).all() and (stop > i).all() and (np.diff(start) >= 0).all(), spec
        assert (np.diff(stop) >= 0).all(), spec
        dense = mask.dense_numpy(n)
        j = np.arange(n)
        assert np.array_equal(dense, (j[None, :] >= start[:, None]) & (j[None, :] < stop[:, None])), spec
        _same(mask.analysis(n), analyze_sparse(mask._sparse(n), spec))


def test_non_interval_families_have_no_interval_form() -> None:
    for spec in ("strided:stride=2", "random:p=0.3,seed=1", "dilated:w=2,dilation=2", "sinks:w=1,sinks=1",
                 "causal|strided:stride=3", "tree:parents=-1,0,0"):
        assert parse_mask(spec).intervals(3 if "tree" in spec else 9) is None


def test_composition_of_runs_is_the_boolean_product() -> None:
    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(1, 30))
        a, b = (_Parser(_random_interval_spec(rng, n)).parse() for _ in range(2))
        start, stop = compose(a.intervals(n), b.intervals(n))  # first a, then b
        product = (b.dense_numpy(n).astype(np.int64) @ a.dense_numpy(n).astype(np.int64)) > 0
        j = np.arange(n)
        assert np.array_equal(product, (j[None, :] >= start[:, None]) & (j[None, :] < stop[:, None]))


def test_window_radius_closed_form_at_a_million_tokens() -> None:
    n = 1_000_000
    a = parse_mask("window:w=7").analysis(n)
    assert a.radius == (n // 2 + 6) // 7 and a.center_nodes == list(range(n))  # ceil(ceil((n - 1) / 2) / 7)
    c = parse_mask("causal-window:w=3").analysis(n)
    assert c.radius == -(-(n - 1) // 3) and c.center_nodes == [0]


def test_documents_are_closed_components_and_causal_documents_have_one_center_each() -> None:
    bi = parse_mask("document:lengths=3,1,4").analysis(8)
    assert [c.tolist() for c in bi.closed_components] == [[0, 1, 2], [3], [4, 5, 6, 7]]
    assert bi.radius is None and not bi.theorem1_applies and bi.num_components == 3
    causal = parse_mask("document:lengths=3,1,4&causal").analysis(8)
    assert [c.tolist() for c in causal.closed_components] == [[0], [3], [4]]
    one = parse_mask("document:lengths=5&causal").analysis(5)
    assert one.radius == 1 and one.center_nodes == [0]
    assert parse_mask("document:lengths=3,5").spec == "document:lengths=3,5"


def test_tree_attention_roots_are_centers_of_their_trees() -> None:
    m = parse_mask("tree:parents=-1,0,0,1,1,2")
    dense = m.dense_numpy(6)
    assert dense[4].tolist() == [True, True, False, False, True, False]  # path 0 -> 1 -> 4
    a = m.analysis(6)
    assert a.center_nodes == [0] and a.radius == 1
    forest = parse_mask("tree:parents=-1,0,-1,2").analysis(4)
    assert [c.tolist() for c in forest.closed_components] == [[0], [2]] and forest.radius is None


@pytest.mark.parametrize(("spec", "fragment"), [
    ("document:lengths=3,0", "too small"),
    ("document:lengths=", "malformed parameter"),
    ("tree:parents=0", "is not before token 0"),
    ("tree:parents=-2", "too small"),
    ("document:lengths=3,x", "not an integer"),
])
def test_bad_list_parameters_are_one_line_errors(spec: str, fragment: str) -> None:
    with pytest.raises(RankCollapseError, match=fragment):
        parse_mask(spec)


def test_plot_block_counts_from_runs_equal_counts_from_the_sparse_form() -> None:
    from rankcollapse.masks.picture import block_counts

    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(1, 60))
        f = int(rng.integers(1, 8))
        mask = _Parser(_random_interval_spec(rng, n)).parse()
        s, cells = mask._sparse(n), -(-n // f)
        ref = np.bincount((s.row_ids() // f) * cells + s.indices // f, minlength=cells * cells)
        assert np.array_equal(block_counts(mask, n, f), ref.reshape(cells, cells))


def test_the_node_lists_a_user_reads_hold_python_ints() -> None:
    """``center_nodes``, ``missing_self_loops`` and a schedule's ``first_centers`` print as plain numbers
    (``[0, 1, 2]``, never ``np.int64(0)``); the per-token arrays stay numpy."""
    from rankcollapse.masks import analyze_mask, analyze_schedule

    a = analyze_mask("window:w=8", 64)
    assert repr(a.center_nodes[:3]) == "[0, 1, 2]" and repr(a.center_nodes[0]) == "0"
    assert type(a.best_center) is int and a.missing_self_loops == []
    assert repr(analyze_mask("causal&window:w=2", 16).center_nodes) == "[0]"
    strict = torch.ones(6, 6, dtype=torch.bool).tril(-1)
    strict[0, 0] = True  # only token 0 attends to itself
    assert repr(analyze_mask(strict, 6).missing_self_loops) == "[1, 2, 3, 4, 5]"
    s = analyze_schedule("causal-window:w=4*3;causal", n=64, depth=8)
    assert repr(s.first_centers) == "[0]" and s.product.center_nodes == [0]
    assert a.to_frame()["is_center"].sum() == 64 and a.to_dict()["center_nodes"] == list(range(64))
