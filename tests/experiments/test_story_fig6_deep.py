"""Story fig6_deep end to end at its tiny profile (8 fresh tiny layers): verdict and figure pinned."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.engine.verdicts import NOT_REPRODUCED

from .paper_story_run import run_story


@pytest.fixture(scope="module")
def story() -> tuple:
    return run_story("fig6_deep")


def test_tiny_fig6_deep_verdict_is_pinned(story: tuple) -> None:
    data, claims, _ = story
    assert {c.id: c.verdict for c in claims} == {"fig6.ln_stops[random]": NOT_REPRODUCED}
    assert all(data.ok["summary.fresh_layers"])  # 8 layers = 2 fresh blocks of tiny:bert's 4


def test_tiny_fig6_deep_figure_covers_all_layers(story: tuple) -> None:
    _, _, figures = story
    assert [f.name for f in figures] == ["fig6_deep_tiny_bert_random_init"]
    assert figures[0].data["layer"].max() == 8
