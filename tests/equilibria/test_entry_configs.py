"""The equilibria / counterexample / portrait entry points: a config that validates on construction (the
CLI only builds it), refusing every field that does not apply to its mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria.entry import (
    CounterexampleConfig,
    EquilibriaConfig,
    PortraitConfig,
    counterexample,
    equilibria,
)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"tokens": 0, "d": 2}, "tokens must be between 1 and 64"),
        ({"tokens": 2, "d": 65}, "d must be between 1 and 64"),
        ({"tokens": 3, "d": 2, "rank": 3}, "rank must be between 1 and 2"),
        ({"tokens": 2, "d": 2, "layers": 0}, "layers"),
        ({"tokens": 2, "d": 2, "seed": -1}, "seed"),
        ({"tokens": 2, "d": 2, "d_qk": float("nan")}, "d_qk"),
        ({"tokens": 2, "d": 2, "construction": "theirs"}, "construction 'theirs' is not allowed"),
        ({"tokens": 2, "d": 2, "value": Path("w.npy"), "construction": "ours"}, "construction does not"),
        ({"tokens": 2, "d": 2, "value": Path("w.npy"), "w": 3.0}, "w does not apply to value"),
        ({"tokens": 2, "d": 2, "construction": "paper", "mask": "causal"}, "mask does not apply"),
        ({"tokens": 2, "d": 2, "family": "paper"}, "family does not apply to construction ours"),
        ({"tokens": 2, "d": 2, "n_": 1}, "unexpected keyword"),
    ],
)
def test_an_equilibria_config_refuses_what_does_not_apply_in_one_line(fields: dict, words: str) -> None:
    with pytest.raises((RankCollapseError, TypeError)) as caught:
        EquilibriaConfig(**fields)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_mode_follows_the_fields() -> None:
    assert EquilibriaConfig(tokens=2, d=2).mode == "ours"
    assert EquilibriaConfig(tokens=2, d=2, construction="paper").mode == "paper"
    assert EquilibriaConfig(tokens=2, d=2, value=Path("w.npy")).mode == "search"


def test_the_paper_construction_finds_every_rank_as_theorem_3_counts_them() -> None:
    """Theorem 3, N = d = 2, w = 2: the enumeration gives equilibria of rank 1 and 2, each with a residual
    of the LN map at the float64 floor; ``rank`` keeps only its own."""
    rows = equilibria(EquilibriaConfig(tokens=2, d=2, construction="paper", starts=2, layers=200))
    assert {row["rank"] for row in rows} == {1, 2}
    assert all(row["residual"] < 1e-10 for row in rows)
    only = equilibria(EquilibriaConfig(tokens=2, d=2, construction="paper", rank=2, starts=2, layers=200))
    assert only and {row["rank"] for row in only} == {2}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"construction": "ours", "w": 2.0}, "w applies only to construction paper"),
        ({"construction": "ours", "measure": True}, "measure applies only"),
        ({"w": 1.0}, "w must be finite and > 1"),
    ],
)
def test_a_counterexample_config_refuses_in_one_line(fields: dict, words: str) -> None:
    with pytest.raises(RankCollapseError, match=words):
        CounterexampleConfig(**fields)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"construction": "paper", "a": 0.5}, "a does not apply to construction paper"),
        ({"construction": "ours", "w": 2.0}, "w does not apply to construction ours"),
        ({"construction": "ours", "a": 1.0}, "a must be strictly between 0 and 1"),
        ({"construction": "ours", "s": float("inf")}, "s must be a finite number"),
    ],
)
def test_a_portrait_config_refuses_in_one_line(fields: dict, words: str) -> None:
    with pytest.raises(RankCollapseError, match=words):
        PortraitConfig(**fields)


def test_the_paper_counterexample_has_a_and_b_on_the_unit_circle() -> None:
    """The closed forms: A and B are unit vectors (tokens on the sphere), four arcs cover the circle."""
    import math

    obj = counterexample(CounterexampleConfig(w=2.0))
    assert abs(math.hypot(*obj["A"]) - 1) < 1e-12 and abs(math.hypot(*obj["B"]) - 1) < 1e-12
    assert len(obj["arcs"]) == 4
