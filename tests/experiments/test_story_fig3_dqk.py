"""Story fig3_dqk end to end at its tiny profile: the three d_QK claims pinned, figure labels in words."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.engine.verdicts import INCONCLUSIVE

from .paper_story_run import run_story


@pytest.fixture(scope="module")
def story() -> tuple:
    return run_story("fig3_dqk")


def test_tiny_fig3_dqk_verdicts_are_pinned(story: tuple) -> None:
    _, claims, _ = story
    # tiny:bert at init: logits are tiny, attention is near uniform whatever d_QK: no effect either way
    assert {c.id: c.verdict for c in claims} == {
        "fig3.slows[random]": INCONCLUSIVE,
        "fig3.global[random]": INCONCLUSIVE,
        "fig3.shallow[random]": INCONCLUSIVE,
    }
    slows = next(c for c in claims if c.id == "fig3.slows[random]")
    assert "smallest minus largest d_qk" in slows.evidence and "float32" in slows.evidence


def test_tiny_fig3_dqk_figure_labels_are_words(story: tuple) -> None:
    _, _, figures = story
    assert [f.name for f in figures] == ["fig3_dqk_tiny_bert_random_init"]
    labels = {t.get_text() for t in figures[0].figure.legends[0].get_texts()}
    assert {"d_QK = 1/64", "d_QK = 1", "d_QK = 64 (BERT's own)"} <= labels

