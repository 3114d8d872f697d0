"""Stories fig8_spectrum and fig9_cosines end to end at their tiny profiles: verdicts pinned."""

from __future__ import annotations

from rankcollapse.experiments.engine.verdicts import NOT_REPRODUCED, REPRODUCED

from .paper_story_run import run_story


def test_tiny_fig8_spectrum_verdict_and_figure() -> None:
    _, claims, figures = run_story("fig8_spectrum")
    # tiny:bert at init: sigma_1 / sigma_2 >= 2.36 at every layer (the shared token-type embedding),
    # sigma_min / sigma_max >= 0.16
    assert {c.id: c.verdict for c in claims} == {"fig8.dominant[random]": REPRODUCED}
    assert [f.name for f in figures] == ["fig8_spectrum_tiny_bert_random_init"]
    assert set(figures[0].data["sample"]) == {0, 1, 2}  # the 3 plotted samples; the verdict used all 4


def test_tiny_fig9_cosines_verdicts_and_figure() -> None:
    _, claims, figures = run_story("fig9_cosines")
    # tiny:bert: word + position + the shared token-type embedding (same std) -> cosines about 1/3 > 0;
    # tiny:albert (embedding size 32, projected): some pairs negative in every sample
    assert {c.id: c.verdict for c in claims} == {
        "fig9.nonnegative[tiny:albert]": NOT_REPRODUCED,
        "fig9.nonnegative[tiny:bert]": REPRODUCED,
    }
    assert figures[0].name == "fig9_cosines"
