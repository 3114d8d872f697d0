"""Story theorem1 end to end at its tiny profile: verdicts pinned; the bound is t/r and vacuity is counted."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.engine.verdicts import REPRODUCED

from .paper_story_run import run_story


@pytest.fixture(scope="module")
def story() -> tuple:
    return run_story("theorem1")


def test_tiny_theorem1_verdicts_are_pinned(story: tuple) -> None:
    _, claims, _ = story
    assert {c.id: c.verdict for c in claims} == {
        "thm1.collapse": REPRODUCED,
        "thm1.bound": REPRODUCED,
        "thm1.no_center": REPRODUCED,
    }


def test_tiny_theorem1_bound_reports_vacuous_runs_and_the_exponent(story: tuple) -> None:
    data, claims, _ = story
    bound = next(c for c in claims if c.id == "thm1.bound")
    assert "t/r" in bound.statement and "consistent 2, vacuous 2" in bound.evidence
    verdicts = set(data.ok["summary.theory.verdict"])
    assert verdicts == {"consistent", "vacuous", "not_applicable"}  # block:size=4 has no center
