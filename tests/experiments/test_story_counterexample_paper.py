"""Story counterexample_paper end to end at its tiny profile (w = 2): verdicts and numbers pinned."""

from __future__ import annotations

import math

import pytest

from rankcollapse.experiments.engine.verdicts import REPRODUCED

from .paper_story_run import run_story


@pytest.fixture(scope="module")
def story() -> tuple:
    return run_story("counterexample_paper")


def test_tiny_counterexample_paper_verdicts_are_pinned(story: tuple) -> None:
    _, claims, _ = story
    assert {c.id: c.verdict for c in claims} == {
        "lemma11.arcs": REPRODUCED,
        "cx.A_B": REPRODUCED,
        "cx.rank2": REPRODUCED,
        "cx.token1": REPRODUCED,
        "cx.no_ln": REPRODUCED,
        "cx.token1_moving": REPRODUCED,
    }


def test_tiny_counterexample_paper_numbers_and_titles(story: tuple) -> None:
    data, claims, figures = story
    run = data.ok.iloc[0]
    assert run["summary.B_y"] == pytest.approx(-math.sqrt(0.75), abs=1e-15)
    assert run["summary.red_start"] == pytest.approx(2 * math.pi / 3) and run[
        "summary.red_share"
    ] == pytest.approx(5 / 12)
    assert [f.name for f in figures] == ["fig1_paper_counterexample", "fig5_paper_arcs"]
    assert all("the paper's construction" in f.figure._suptitle.get_text() for f in figures)
    assert next(c for c in claims if c.id == "cx.token1_moving").source.startswith("ours")
