"""A mask given in Python (masks/custom.py): a predicate f(i, j) at any length, a bool tensor up to its
size. Each equals the built-in family it spells (dense form, graph verdicts, schedules), and every bad
one is refused with one RankCollapseError line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import (
    PredicateMask,
    TensorMask,
    analyze_mask,
    analyze_schedule,
    in_memory_note,
    parse_mask,
    parse_schedule,
    to_flex_mask_mod,
)
from rankcollapse.masks.custom import SCALAR_MAX_N

# A verdict of the graph analysis (what `rankcollapse mask` reports); `bfs_runs` is bookkeeping of the
# path taken (closed-form intervals for a family, the sparse form for a table), `spec` the name.
VERDICTS = (
    "n",
    "self_loops",
    "strongly_connected",
    "quasi_strongly_connected",
    "center_nodes",
    "radius",
    "theorem1_applies",
    "closed_components",
    "scc_count",
)


def window(w: int):  # attention-gym style: a factory returning a named predicate
    def causal_window(i, j):
        return (j <= i) & (i - j <= w)

    causal_window.__name__ = f"causal_window_{w}"
    return causal_window


def verdicts(a) -> dict:
    d = a.to_dict(full=True)
    return {k: d[k] for k in VERDICTS if k in d}


@pytest.mark.parametrize(
    ("rule", "spec"),
    [
        (window(3), "causal-window:w=3"),
        (lambda i, j: (i - j).abs() <= 2, "window:w=2"),
        (lambda i, j: j <= i, "causal"),
        (lambda i, j: (i // 4) == (j // 4), "block:size=4"),
        (lambda i, j: (j < 2) | (j <= i), "prefix:k=2"),
    ],
)
@pytest.mark.parametrize("n", [1, 7, 33])
def test_a_predicate_spelling_a_family_gives_its_dense_mask_and_graph_verdicts(rule, spec, n):
    mine, family = parse_mask(rule), parse_mask(spec)
    assert isinstance(mine, PredicateMask)
    assert torch.equal(mine.dense(n), family.dense(n))
    assert mine.sparse(n).to_numpy().tolist() == family.sparse(n).to_numpy().tolist()
    assert verdicts(analyze_mask(rule, n)) == verdicts(analyze_mask(spec, n))
    assert mine.band(n) == family.band(n)


def test_a_flex_attention_mask_mod_and_a_plain_python_function_are_accepted():
    def mask_mod(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def scalar(i, j):  # `and` fails on tensors: called pair by pair
        return j <= i and i - j <= 1

    assert torch.equal(parse_mask(mask_mod).dense(9), parse_mask("causal").dense(9))
    assert torch.equal(parse_mask(scalar).dense(9), parse_mask("causal-window:w=1").dense(9))
    assert torch.equal(parse_mask(to_flex_mask_mod("window:w=1")).dense(6), parse_mask("window:w=1").dense(6))


def test_a_predicate_is_called_once_per_length_with_index_tensors():
    calls: list[tuple] = []

    def rule(i, j):
        calls.append((type(i), tuple(i.shape), tuple(j.shape), i.dtype))
        return j <= i

    m = PredicateMask(rule)
    for _ in range(3):
        m.dense(5), m.sparse(5), m.analysis(5)
    m.dense(6)
    assert calls == [(torch.Tensor, (5, 1), (1, 5), torch.int64), (torch.Tensor, (6, 1), (1, 6), torch.int64)]


def test_predicates_are_one_mask_per_function_whatever_their_names():
    f, g = (lambda i, j: j <= i), (lambda i, j: i >= 0)
    assert PredicateMask(f) == PredicateMask(f) and PredicateMask(f) != PredicateMask(g)
    assert PredicateMask(f).spec == PredicateMask(g).spec == "<predicate lambda>"
    assert PredicateMask(f, name="mine").spec == "<predicate mine>"
    sched = parse_schedule([f, g])  # two layers, not one mask repeated
    assert len(sched.reduced().period) == 2
    assert parse_schedule([f, f]).reduced().period == (PredicateMask(f),)
    assert (PredicateMask(f) & parse_mask("window:w=1")) != (PredicateMask(g) & parse_mask("window:w=1"))


def test_a_tensor_equal_to_causal_is_causal_and_serves_every_shorter_length():
    big = torch.ones(12, 12, dtype=torch.bool).tril()
    m = parse_mask(big)
    assert isinstance(m, TensorMask) and m.spec.startswith("<tensor 12x12 sha1:")
    for n in (1, 5, 12):
        assert torch.equal(m.dense(n), parse_mask("causal").dense(n))
        assert verdicts(analyze_mask(m, n)) == verdicts(analyze_mask("causal", n))
    assert parse_mask(big.float()) == m == parse_mask(big.numpy().astype(np.int64))  # 0/1 values, one hash
    assert parse_mask(~big | torch.eye(12, dtype=torch.bool)) != m


def test_a_schedule_of_a_predicate_and_a_tensor_is_the_schedule_of_their_specs():
    n = 24
    mine = analyze_schedule([window(2), torch.ones(n, n, dtype=torch.bool).tril()], n, depth=6)
    ref = analyze_schedule("causal-window:w=2;causal", n, depth=6)
    assert verdicts(mine.product) == verdicts(ref.product)
    assert (mine.layers_to_center, mine.windows, mine.layer_radii) == (
        ref.layers_to_center,
        ref.windows,
        ref.layer_radii,
    )
    assert mine.first_centers == ref.first_centers


def test_a_label_records_what_a_config_can_hold_and_the_note_says_so():
    f = window(2)
    assert in_memory_note(parse_mask("causal")) is None
    note = in_memory_note(parse_schedule([f, "causal"]))
    assert "<predicate causal_window_2>" in note and "cannot re-run" in note
    with pytest.raises(RankCollapseError, match="label of an in-memory mask"):
        parse_mask("<predicate causal_window_2>")


BAD_TENSORS = [
    (torch.ones(3, 4, dtype=torch.bool), r"shape \(3, 4\); allowed: a square"),
    (torch.ones(2, 2, 2, dtype=torch.bool), r"shape \(2, 2, 2\)"),
    (torch.tensor([[1.0, float("nan")], [1.0, 1.0]]), r"has nan at \(0, 1\); allowed: finite 0/1"),
    (torch.tensor([[1.0, 0.5], [0.0, 1.0]]), r"has 0.5 at \(0, 1\); allowed: 0/1 values"),
    (torch.tensor([[1, 0], [0, 0]]), r"no kept key in row 1; allowed: every query attends"),
    (torch.tensor([[True, False], [True, False]]), r"lacks self-loops at tokens \[1\]"),
    (torch.ones(2, 2, dtype=torch.complex64), r"dtype complex64; allowed: bool"),
]


@pytest.mark.parametrize(("tensor", "message"), BAD_TENSORS)
def test_a_bad_tensor_is_refused_with_one_line(tensor, message):
    with pytest.raises(RankCollapseError, match=message) as err:
        parse_mask(tensor)
    assert "\n" not in str(err.value)


def test_a_tensor_is_refused_at_a_longer_length_naming_both():
    m = parse_mask(torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(RankCollapseError, match=r"is 4 x 4 but n=5; allowed: n <= 4"):
        m.dense(5)


def _raises(i, j):
    raise ValueError("boom")


BAD_PREDICATES = [
    (_raises, 4, r"'_raises' raised ValueError: boom at n=4; allowed: f\(i, j\)"),
    (lambda i, j: i[:, 0] >= 0, 4, r"returned shape \(4,\) at n=4; allowed: \(4, 4\)"),
    (lambda i, j: (i + j)[:3, :3] >= 0, 4, r"returned shape \(3, 3\)"),
    (lambda i, j: "yes", 4, r"returned str at n=4"),
    (lambda i, j: (i - j).float() / 2, 4, r"has -0.5 at \(0, 1\); allowed: 0/1 values"),
    (lambda i, j: j < i, 4, r"no kept key in row 0"),
    (lambda i, j: (j == 0) | (j < i), 4, r"lacks self-loops at tokens \[1, 2, 3\]"),
    (lambda i, j: j == 0 or i == j, SCALAR_MAX_N + 1, r"pair by pair only up to n=1024"),
]


@pytest.mark.parametrize(("fn", "n", "message"), BAD_PREDICATES)
def test_a_bad_predicate_is_refused_with_one_line(fn, n, message):
    with pytest.raises(RankCollapseError, match=message) as err:
        parse_mask(fn).dense(n)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda i: i, r"takes 1 arguments; allowed: f\(i, j\) or a FlexAttention mask_mod"),
        (int, r"must be a function f\(i, j\), got type"),
    ],
)
def test_a_predicate_of_the_wrong_signature_is_refused_when_given(fn, message):
    with pytest.raises(RankCollapseError, match=message):
        PredicateMask(fn)
