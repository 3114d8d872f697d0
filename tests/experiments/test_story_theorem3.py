"""Story theorem3 end to end at its tiny profile (N = d = 3, w = 2 and 3): verdicts and counts pinned."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.engine.verdicts import REPRODUCED

from .paper_story_run import run_story


@pytest.fixture(scope="module")
def story() -> tuple:
    return run_story("theorem3")


def test_tiny_theorem3_verdicts_are_pinned(story: tuple) -> None:
    _, claims, _ = story
    assert {c.id: c.verdict for c in claims} == {
        "thm3.every_rank": REPRODUCED,
        "thm3.below_w": REPRODUCED,
        "f2.srank": REPRODUCED,
        "f3.lemma13": REPRODUCED,
        "f4.complete": REPRODUCED,
        "thm3.not_hyperbolic": REPRODUCED,
    }


def test_tiny_theorem3_counts_and_labels(story: tuple) -> None:
    data, claims, figures = story
    run = data.ok[data.ok["w"] == 3.0].iloc[0]
    assert [int(run[f"summary.paper_rank{k}"]) for k in (1, 2, 3)] == [2, 4, 8]
    assert [int(run[f"summary.other_rank{k}"]) for k in (1, 2, 3)] == [0, 6, 0]
    assert "the paper's construction" in figures[0].figure._suptitle.get_text()
    assert next(c for c in claims if c.id == "thm3.not_hyperbolic").source.startswith("ours")
