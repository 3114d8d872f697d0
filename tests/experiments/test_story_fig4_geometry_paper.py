"""Story fig4_geometry_paper end to end at its tiny profile: verdicts per model pinned, figure labelled."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.engine.verdicts import INCONCLUSIVE, REPRODUCED

from .paper_story_run import run_story


@pytest.fixture(scope="module")
def story() -> tuple:
    return run_story("fig4_geometry_paper")


def test_tiny_fig4_verdicts_are_pinned(story: tuple) -> None:
    _, claims, _ = story
    # tiny random models at init: full rank and sigma_min well above 0; mean |cos| does not grow
    # measurably in 4 layers (bert: 0.396 -> 0.391; gpt2: 0.105 -> 0.131, near the isotropic 0.1)
    assert {c.id: c.verdict for c in claims} == {
        "fig4.full_rank[tiny:bert]": REPRODUCED,
        "fig4.sigma_min[tiny:bert]": REPRODUCED,
        "fig4.cos_grows[tiny:bert]": INCONCLUSIVE,
        "fig4.full_rank[tiny:gpt2]": REPRODUCED,
        "fig4.sigma_min[tiny:gpt2]": REPRODUCED,
        "fig4.cos_grows[tiny:gpt2]": INCONCLUSIVE,
    }


def test_tiny_fig4_figure_names_every_model(story: tuple) -> None:
    _, _, figures = story
    fig = figures[0]
    labels = {t.get_text() for t in fig.figure.legends[0].get_texts()}
    assert labels == {"tiny bert (random init)", "tiny gpt2 (random init)"}
    assert set(fig.data["quantity"]) == {"full_rank", "sigma_min", "sigma_ratio", "mean_abs_cos"}

