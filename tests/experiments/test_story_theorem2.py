"""Story theorem2 end to end at its tiny profile: every verdict pinned, conditions named."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.engine.verdicts import REPRODUCED

from .paper_story_run import run_story


@pytest.fixture(scope="module")
def story() -> tuple:
    return run_story("theorem2")


def test_tiny_theorem2_verdicts_are_pinned(story: tuple) -> None:
    _, claims, _ = story
    assert {c.id: c.verdict for c in claims} == {
        "thm2.bound": REPRODUCED,
        "cor1.bound": REPRODUCED,
        "cor1n.bound": REPRODUCED,
        "ln.collapse": REPRODUCED,
        "cor1.causal_advantage[post]": REPRODUCED,
        "cor1.causal_advantage[pre]": REPRODUCED,
    }


def test_tiny_theorem2_names_the_failing_condition(story: tuple) -> None:
    _, claims, figures = story
    thm2 = next(c for c in claims if c.id == "thm2.bound")
    assert "causal is not strongly connected: Theorem 2 does not apply, Corollary 1 does" in thm2.evidence
    assert "the paper's" in figures[0].figure._suptitle.get_text()
