"""Every family: dense form == a plain double loop of the documented rule; sparse == dense; band."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from rankcollapse.masks import SparseMask, parse_mask
from rankcollapse.masks.seeded import bigbird_random_keys

Rule = Callable[[int, int, int], bool]


def _random_table(n: int, p: float, seed: int) -> np.ndarray:
    u = np.random.default_rng(seed).random((n, n))
    return u < p


def _bigbird_extra(n: int, r: int, seed: int) -> list[set[int]]:
    keys = bigbird_random_keys(n, r, seed)
    return [set(keys[i].tolist()) for i in range(n)]


# (spec, rule(i, j, n)) — the rule is the table of the issue, written as plain Python.
CASES: list[tuple[str, Rule]] = [
    ("complete", lambda i, j, n: True),
    ("causal", lambda i, j, n: j <= i),
    ("window:w=0", lambda i, j, n: i == j),
    ("window:w=2", lambda i, j, n: abs(i - j) <= 2),
    ("causal-window:w=3", lambda i, j, n: 0 <= i - j <= 3),
    ("dilated:w=2,dilation=3", lambda i, j, n: abs(i - j) <= 6 and (i - j) % 3 == 0),
    ("dilated:w=1,dilation=1", lambda i, j, n: abs(i - j) <= 1),
    ("strided:stride=3", lambda i, j, n: j <= i and (i - j < 3 or (i - j) % 3 == 0)),
    ("strided:stride=1", lambda i, j, n: j <= i),
    ("block:size=3", lambda i, j, n: i // 3 == j // 3),
    ("prefix:k=3", lambda i, j, n: j < 3 or j <= i),
    ("prefix:k=0", lambda i, j, n: j <= i),
    ("longformer:w=1,global=2", lambda i, j, n: abs(i - j) <= 1 or i < 2 or j < 2),
    ("sinks:w=2,sinks=2", lambda i, j, n: 0 <= i - j <= 2 or j < 2),
    ("random:p=0.3,seed=7", lambda i, j, n: i == j or bool(_random_table(n, 0.3, 7)[i, j])),
    ("random:p=0.0,seed=1", lambda i, j, n: i == j),
    (
        "bigbird:w=1,global=1,random=2,seed=5",
        lambda i, j, n: abs(i - j) <= 1 or i < 1 or j < 1 or j in _bigbird_extra(n, 2, 5)[i],
    ),
    ("causal&window:w=2", lambda i, j, n: j <= i and abs(i - j) <= 2),
    ("block:size=2|causal-window:w=1", lambda i, j, n: i // 2 == j // 2 or 0 <= i - j <= 1),
    (
        "block:size=4&window:w=1|causal&prefix:k=2",
        lambda i, j, n: (i // 4 == j // 4 and abs(i - j) <= 1) or (j <= i and (j < 2 or j <= i)),
    ),
    ("(block:size=4|causal)&window:w=1", lambda i, j, n: (i // 4 == j // 4 or j <= i) and abs(i - j) <= 1),
]

SIZES = [1, 2, 3, 5, 8, 13]


def _loop_reference(rule: Rule, n: int) -> np.ndarray:
    ref = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            ref[i, j] = rule(i, j, n)
    return ref


@pytest.mark.parametrize(("spec", "rule"), CASES, ids=[c[0] for c in CASES])
def test_dense_equals_double_loop_of_rule(spec: str, rule: Rule) -> None:
    mask = parse_mask(spec)
    for n in SIZES:
        dense = mask.dense(n)
        assert dense.dtype == torch.bool and dense.shape == (n, n)
        assert np.array_equal(dense.numpy(), _loop_reference(rule, n)), n


@pytest.mark.parametrize(("spec", "rule"), CASES, ids=[c[0] for c in CASES])
def test_sparse_equals_dense_and_is_canonical_csr(spec: str, rule: Rule) -> None:
    mask = parse_mask(spec)
    for n in [*SIZES, 40]:
        s = mask.sparse(n)
        assert s.indptr.dtype == np.int64 and s.indices.dtype == np.int64
        assert s.indptr.shape == (n + 1,) and s.indptr[0] == 0
        for i in range(n):
            row = s.row(i)
            assert np.all(np.diff(row) > 0)  # sorted, unique
        assert np.array_equal(s.to_numpy(), mask.dense_numpy(n)), n
        assert s.has_self_loops()


@pytest.mark.parametrize(("spec", "rule"), CASES, ids=[c[0] for c in CASES])
def test_band_matches_dense_definition(spec: str, rule: Rule) -> None:
    mask = parse_mask(spec)
    for n in [*SIZES, 21]:
        dense = mask.dense_numpy(n)
        offsets = np.arange(n)[None, :] - np.arange(n)[:, None]  # j - i
        band = mask.band(n)
        if band is None:
            for lo in range(-(n - 1), 1):
                for hi in range(0, n):
                    assert not np.array_equal(dense, (offsets >= lo) & (offsets <= hi))
        else:
            lo, hi = band
            assert np.array_equal(dense, (offsets >= lo) & (offsets <= hi))
            assert lo == offsets[dense].min() and hi == offsets[dense].max()  # tight
        assert mask.is_complete(n) == bool(dense.all())


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("complete", lambda n: (-(n - 1), n - 1)),
        ("causal", lambda n: (-(n - 1), 0)),
        ("window:w=3", lambda n: (-min(3, n - 1), min(3, n - 1))),
        ("causal-window:w=3", lambda n: (-min(3, n - 1), 0)),
        ("causal&window:w=3", lambda n: (-min(3, n - 1), 0)),
        ("window:w=2&window:w=5", lambda n: (-min(2, n - 1), min(2, n - 1))),
        ("causal|window:w=2", lambda n: (-(n - 1), min(2, n - 1))),
    ],
)
def test_band_closed_forms(spec: str, expected: Callable[[int], tuple[int, int]]) -> None:
    for n in range(1, 20):
        assert parse_mask(spec).band(n) == expected(n)


def test_random_families_reproducible_from_seed() -> None:
    for spec in ["random:p=0.2,seed=3", "bigbird:w=1,global=1,random=3,seed=3"]:
        a, b = parse_mask(spec), parse_mask(spec)
        assert torch.equal(a.dense(30), b.dense(30))
        assert a.sparse(30) == b.sparse(30)
    one, two = parse_mask("random:p=0.5,seed=1"), parse_mask("random:p=0.5,seed=2")
    assert not torch.equal(one.dense(30), two.dense(30))


def test_random_sparse_chunks_match_one_draw() -> None:
    # n large enough that the sparse generator draws in several row chunks
    n = 2100
    mask = parse_mask("random:p=0.001,seed=4")
    assert np.array_equal(mask.sparse(n).to_numpy(), mask.dense_numpy(n))


def test_bigbird_random_keys_distinct_and_in_range() -> None:
    keys = bigbird_random_keys(50, 7, seed=0)
    assert keys.shape == (50, 7)
    assert all(len(set(row.tolist())) == 7 for row in keys)
    assert keys.min() >= 0 and keys.max() < 50
    assert bigbird_random_keys(4, 10, seed=0).shape == (4, 4)  # R is clipped to n


def test_file_mask_round_trip(tmp_path) -> None:
    table = parse_mask("block:size=2|causal").dense_numpy(6)
    path = tmp_path / "m.npy"
    np.save(path, table)
    mask = parse_mask(f"file:{path}")
    assert np.array_equal(mask.dense_numpy(6), table)
    assert np.array_equal(mask.sparse(6).to_numpy(), table)
    combined = parse_mask(f"file:{path}&window:w=1")
    assert np.array_equal(combined.dense_numpy(6), table & parse_mask("window:w=1").dense_numpy(6))


def test_sparse_and_or_without_densifying_match_dense() -> None:
    a, b = parse_mask("window:w=2").sparse(17), parse_mask("strided:stride=4").sparse(17)
    assert np.array_equal((a & b).to_numpy(), a.to_numpy() & b.to_numpy())
    assert np.array_equal((a | b).to_numpy(), a.to_numpy() | b.to_numpy())
    assert SparseMask.from_numpy(a.to_numpy()) == a
    assert np.array_equal(a.transpose().to_numpy(), a.to_numpy().T)


def test_canonical_spec_round_trips() -> None:
    for text, canonical in [
        (" causal & window: w = 4 ", "causal&window:w=4"),
        ("dilated:dilation=2,w=3", "dilated:w=3,dilation=2"),
        ("(causal|block:size=2)&window:w=1", "(causal|block:size=2)&window:w=1"),
        ("(causal&window:w=1)|block:size=2", "causal&window:w=1|block:size=2"),
        ("random:p=.5,seed=0", "random:p=0.5,seed=0"),
        ("((causal))", "causal"),
    ]:
        mask = parse_mask(text)
        assert mask.spec == canonical
        assert parse_mask(mask.spec).spec == canonical


def test_and_binds_tighter_than_or() -> None:
    n = 9
    m = parse_mask("block:size=3|causal&window:w=1").dense_numpy(n)
    blk = parse_mask("block:size=3").dense_numpy(n)
    cw = parse_mask("causal").dense_numpy(n) & parse_mask("window:w=1").dense_numpy(n)
    assert np.array_equal(m, blk | cw)


def test_python_operators_combine_masks() -> None:
    m = parse_mask("causal") & parse_mask("window:w=2")
    assert m.spec == "causal&window:w=2"
    assert (parse_mask("causal") | parse_mask("block:size=2")).spec == "causal|block:size=2"
