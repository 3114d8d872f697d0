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


def test_a_pretrained_row_whose_stand_in_is_the_random_init_is_untested_and_not_drawn() -> None:
    """ALBERT offline: ``pretrained:albert-base-v2`` falls back to the random init, the same model as
    the random-init row; judging it again would count one measurement twice."""
    import matplotlib

    matplotlib.use("Agg")
    from rankcollapse.experiments.engine.verdicts import INCONCLUSIVE
    from rankcollapse.experiments.stories.fig9_cosines import claims, figures

    from .synthetic import make_data

    groups = [("random:albert-base-v2", "albert-base-v2 (random init)", False),
              ("pretrained:albert-base-v2", "albert-base-v2 (random init), stand-in for albert", False),
              ("pretrained:bert-base-uncased", "all-mpnet-base-v2, stand-in for bert-base-uncased", True)]
    runs, rows = [], []
    for i, (model, label, pretrained) in enumerate(groups):
        rid = f"r{i}"
        runs.append({"run_id": rid, "model": model})
        common = {"run_id": rid, "model": model, "model_label": label, "pretrained": pretrained}
        rows += [{**common, "kind": "phi0", "sample": s, "phi0": 0.1, "negative_share": 0.0}
                 for s in range(4)]
        rows += [{**common, "kind": "cos_hist", "sample": 0, "bin_lo": b / 10, "bin_hi": (b + 1) / 10,
                  "count": 3} for b in range(10)]
    data = make_data("fig9_cosines", runs, rows=rows, verdict={"min_samples": 4, "share_min": 0.99},
                     task="paper_geometry")
    verdicts = {c.id: c for c in claims(data)}
    assert verdicts["fig9.nonnegative[random:albert-base-v2]"].verdict == REPRODUCED
    assert verdicts["fig9.nonnegative[pretrained:bert-base-uncased]"].verdict == REPRODUCED
    untested = verdicts["fig9.nonnegative[pretrained:albert-base-v2]"]
    assert untested.verdict == INCONCLUSIVE and "same model as the random-init row" in untested.evidence
    (fig,) = figures(data)
    assert len(fig.figure.axes) == 2  # no panel repeats the random-init one
