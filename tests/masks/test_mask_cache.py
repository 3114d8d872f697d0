"""One mask object per spec caches its forms per n: each is built once and equals the uncached build."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankcollapse.masks import Mask, analyze_dense, analyze_mask, from_dense, parse_mask
from rankcollapse.masks.base import CACHE_LENGTHS
from rankcollapse.masks.graph import analyze_sparse
from rankcollapse.masks.spec import _Parser

SPECS = ["causal&window:w=3", "random:p=0.3,seed=5", "block:size=3|prefix:k=2", "strided:stride=3",
         "document:lengths=4,3,5&causal", "tree:parents=-1,0,0,1,1,2,-1,6,7,7,3,10"]


def _fresh(spec: str) -> Mask:
    """An uncached mask: parsed without the parse memo."""
    return _Parser(spec).parse()


@pytest.mark.parametrize("spec", SPECS)
def test_every_form_is_built_once_and_equals_the_uncached_build(spec: str, monkeypatch) -> None:
    n = 12
    mask = _fresh(spec)
    calls = {"sparse": 0, "predicate": 0}
    real_sparse, real_predicate = mask._sparse, mask.predicate

    def counted_sparse(k: int):
        calls["sparse"] += 1
        return real_sparse(k)

    def counted_predicate(k: int):
        calls["predicate"] += 1
        return real_predicate(k)

    monkeypatch.setattr(mask, "_sparse", counted_sparse)
    monkeypatch.setattr(mask, "predicate", counted_predicate)
    for _ in range(3):
        dense, sparse, band = mask.dense(n), mask.sparse(n), mask.band(n)
        complete, facts = mask.is_complete(n), mask.analysis(n)
        assert analyze_mask(mask, n) is facts
    assert calls["predicate"] == 1 and calls["sparse"] <= 1
    builds = mask.cache_info()["builds"]
    assert all(count == 1 for count in builds.values()), builds
    ref = _fresh(spec)
    assert torch.equal(dense, ref.dense(n)) and sparse == ref._sparse(n) and band == ref._band(n)
    assert complete == ref.is_complete(n)
    plain = analyze_sparse(ref._sparse(n), ref.spec)
    assert facts.radius == plain.radius and facts.center_nodes == plain.center_nodes
    assert facts.center_eccentricities.tolist() == plain.center_eccentricities.tolist()
    assert facts.num_components == plain.num_components and facts.edges == plain.edges


def test_parse_returns_one_object_per_spec_and_canonical_spec() -> None:
    a = parse_mask("causal & window:w=3")
    assert parse_mask("causal & window:w=3") is a and parse_mask(a.spec) is a
    a.analysis(16)
    before = a.cache_info()["builds"]["analysis"]
    analyze_mask("causal&window:w=3", 16)
    assert a.cache_info()["builds"]["analysis"] == before


def test_dense_is_a_fresh_tensor_and_cached_sparse_is_read_only() -> None:
    m = _fresh("causal")
    d = m.dense(5)
    d[0, 4] = True
    assert not bool(m.dense(5)[0, 4])
    with pytest.raises(ValueError):
        m.sparse(5).indices[0] = 3


def test_cache_keeps_only_recent_lengths() -> None:
    m = _fresh("window:w=2")
    for n in range(1, CACHE_LENGTHS + 5):
        m.analysis(n)
    assert m.cache_info()["lengths"] == list(range(5, CACHE_LENGTHS + 5))
    m.analysis(1)
    assert m.cache_info()["builds"]["analysis"] == CACHE_LENGTHS + 5


def test_analyze_dense_and_from_dense_match_the_spec_without_a_string_round_trip() -> None:
    cases = [("window:w=2", 11), ("causal-window:w=1", 9), ("block:size=3", 7), ("random:p=0.2,seed=3", 10)]
    for spec, n in cases:
        dense = parse_mask(spec).dense(n)
        got, ref = analyze_dense(dense), parse_mask(spec).analysis(n)
        assert got.radius == ref.radius and got.center_nodes == ref.center_nodes
        assert got.spec is None
        assert from_dense(dense.numpy()) == from_dense(dense)  # content hash
        assert from_dense(dense).radius(n) == ref.radius


def test_from_dense_refuses_what_is_not_a_square_bool_matrix() -> None:
    from rankcollapse.edge.errors import RankCollapseError

    for bad in (np.ones((2, 3), dtype=bool), np.ones((3, 3)), [[True]]):
        with pytest.raises(RankCollapseError):
            from_dense(bad)


def test_pickling_keeps_the_rule_and_drops_the_cache() -> None:
    import pickle

    m = _fresh("document:lengths=3,4&causal")
    m.analysis(7)
    m.dense(7)
    copy = pickle.loads(pickle.dumps(m))
    assert copy == m and copy.cache_info() == {"lengths": [], "builds": {}}
    assert torch.equal(copy.dense(7), m.dense(7)) and copy.analysis(7).radius == m.analysis(7).radius


def test_threads_sharing_one_mask_get_the_same_facts() -> None:
    from concurrent.futures import ThreadPoolExecutor

    mask = _fresh("random:p=0.2,seed=9")
    lengths = [5 + k % 12 for k in range(200)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        radii = list(pool.map(lambda n: mask.analysis(n).radius, lengths))
    assert radii == [_fresh("random:p=0.2,seed=9").analysis(n).radius for n in lengths]
