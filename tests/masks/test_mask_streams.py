"""Block Two-Stream and Butterfly (Li & Guo 2026, our reading): every form equals the plain reference,
odd lengths are refused in one line, and the composed flows they are designed for hold (and a leaky
variant is caught)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.butterfly import butterfly_dense, butterfly_flow
from rankcollapse.masks.export import to_flex_mask_mod, to_hf_4d
from rankcollapse.masks.hasse import hasse_analysis
from rankcollapse.masks.two_stream import runs_to_sparse, two_stream_dense, two_stream_flow


def _closure(m: np.ndarray) -> np.ndarray:
    """Reflexive transitive closure by repeated boolean squaring (a reference of its own)."""
    r = m.astype(np.int64) | np.eye(len(m), dtype=np.int64)
    while True:
        nxt = ((r @ r) > 0).astype(np.int64)
        if np.array_equal(nxt, r):
            return r.astype(bool)
        r = nxt


@pytest.mark.parametrize("n", [2, 4, 6, 10, 24])
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_two_stream_rule_sparse_and_export_equal_the_loop_reference(n: int, size: int) -> None:
    m = parse_mask(f"block-two-stream:size={size}")
    ref = two_stream_dense(n, size)
    assert np.array_equal(m.dense_numpy(n), ref)
    assert np.array_equal(m.sparse(n).to_numpy(), ref)
    mod = to_flex_mask_mod(m, n)
    i = torch.arange(n)
    assert torch.equal(mod(0, 0, i[:, None], i[None, :]), torch.from_numpy(ref))
    assert torch.equal(to_hf_4d(m, n)[0, 0] == 0, torch.from_numpy(ref))


@pytest.mark.parametrize("n", [3, 6, 9, 30])
def test_butterfly_rule_sparse_and_export_equal_the_loop_reference(n: int) -> None:
    m = parse_mask("butterfly")
    ref = butterfly_dense(n)
    assert np.array_equal(m.dense_numpy(n), ref)
    assert np.array_equal(m.sparse(n).to_numpy(), ref)
    i = torch.arange(n)
    assert torch.equal(to_flex_mask_mod(m, n)(0, 0, i[:, None], i[None, :]), torch.from_numpy(ref))


def test_stream_masks_have_self_loops_and_round_trip_their_spec() -> None:
    for spec, n in (("block-two-stream:size=3", 12), ("butterfly", 12)):
        m = parse_mask(spec)
        assert m.analysis(n).self_loops
        assert parse_mask(m.spec) == m and m.spec == spec


@pytest.mark.parametrize(("spec", "n"), [("block-two-stream:size=2", 7), ("butterfly", 8), ("butterfly", 2)])
def test_a_length_that_is_no_multiple_of_the_streams_is_one_line(spec: str, n: int) -> None:
    with pytest.raises(RankCollapseError, match="not a multiple") as err:
        parse_mask(spec).dense_numpy(n)
    assert "\n" not in str(err.value)
    with pytest.raises(RankCollapseError, match="not a multiple"):
        parse_mask(spec).analysis(n)


def test_to_flex_mask_mod_needs_n_for_a_stream_mask() -> None:
    with pytest.raises(RankCollapseError, match="needs n"):
        to_flex_mask_mod("butterfly")


@pytest.mark.parametrize("spec", ["block-two-stream:size=1", "block-two-stream:size=4", "butterfly"])
def test_stream_masks_are_transitive_so_their_flow_is_the_mask_at_every_depth(spec: str) -> None:
    n = 24
    m = parse_mask(spec).dense_numpy(n)
    assert np.array_equal(_closure(m), m)
    assert hasse_analysis(spec, n).depth == 1


@pytest.mark.parametrize("size", [1, 2, 5])
def test_two_stream_flow_is_inference_consistent_and_a_leaky_variant_is_caught(size: int) -> None:
    n = 8 * size  # four blocks per stream
    limit = _closure(two_stream_dense(n, size))
    assert all(two_stream_flow(limit, size).values())
    leaky = two_stream_dense(n, size)
    half = n // 2
    leaky[half + 2 * size, size] = True  # a query of block 2 reads its block's clean token: trained on it
    leaky[half + 2 * size, 2 * size] = True  # a query reads the clean copy of its own token
    got = two_stream_flow(_closure(leaky), size)
    assert not got["query_sees_earlier_clean_blocks"]
    crossed = two_stream_dense(n, size)
    crossed[half + 2 * size, half] = True  # a query of block 2 hears block 0's queries
    assert not two_stream_flow(_closure(crossed), size)["query_blocks_sealed"]


def test_butterfly_flow_hears_every_other_position_and_a_leak_is_caught() -> None:
    n = 18
    limit = _closure(butterfly_dense(n))
    assert all(butterfly_flow(limit).values())
    big = n // 3
    leaky = butterfly_dense(n)
    leaky[3, 4] = True  # f_3 reads f_4; g_4 reads f_3 (allowed), so after two layers g_4 hears its own token
    got = butterfly_flow(_closure(leaky))
    assert not got["query_never_hears_its_token"] and not got["streams_directed"]
    deaf = butterfly_dense(n)
    deaf[2 * big + 3, big + 4] = False  # g_3 no longer reads b_4 (nor, through it, b_5 ...)
    deaf[2 * big + 3, big + 5 :] = False
    assert not butterfly_flow(_closure(deaf))["query_hears_every_other_position"]


def test_runs_to_sparse_merges_ordered_runs_per_row() -> None:
    n = 5
    a1, b1 = np.array([0, 0, 1, 0, 4]), np.array([1, 0, 3, 2, 5])
    a2, b2 = np.array([2, 1, 4, 3, 0]), np.array([4, 3, 5, 3, 0])
    s = runs_to_sparse(n, [(a1, b1), (a2, b2)])
    dense = np.zeros((n, n), dtype=bool)
    for i in range(n):
        dense[i, a1[i]:b1[i]] = True
        dense[i, a2[i]:b2[i]] = True
    assert np.array_equal(s.to_numpy(), dense)
