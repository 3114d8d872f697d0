"""The comparison figure (issue 42, item 2): ``rankcollapse plot`` / :func:`rankcollapse.models.plots.plot`
is the single-run figures' sibling: one column (3.5 in) or two (7.2 in), 300 dpi, PNG / PDF / SVG, any
per-layer metric, the layer or the relative depth on x, every setting in which the runs differ in the
legend (the sample size included), in-memory results beside folders, and a Figure returned."""

from __future__ import annotations

import math

import pytest
import torch
from matplotlib.figure import Figure

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, plots, write_run
from rankcollapse.models.finished import read_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two folders (tiny BERT, 6 layers, 2 x 8 tokens; tiny Llama, 2 layers, 2 x 16 tokens) and one
    in-memory result (tiny GPT-2, 3 layers, 2 x 8 tokens), every metric."""
    root = tmp_path_factory.mktemp("compare")
    gen = torch.Generator().manual_seed(0)
    out = []
    for model, layers, tokens in (("tiny:bert", 6, 8), ("tiny:llama", 2, 16)):
        ids = torch.randint(5, 500, (2, tokens), generator=gen)
        result = analyze(AnalyzeConfig(model=model, layers=layers, metrics="all"), ids=ids)
        folder = root / model.replace(":", "_")
        write_run(result, folder)
        out.append(folder)
    ids = torch.randint(5, 500, (2, 8), generator=gen)
    out.append(analyze(AnalyzeConfig(model="tiny:gpt2", layers=3, metrics="all"), ids=ids))
    return out


def _lines(ax):
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith(("_", "precision", "exactly"))]


def test_the_comparison_is_a_column_wide_figure_of_any_metric_returned_and_saved_at_300_dpi(runs, tmp_path):
    fig = plots.plot(runs, tmp_path / "c.png", by="model", metrics=("effective_rank", "mean_abs_cos"),
                     formats="png,pdf,svg")
    assert isinstance(fig, Figure) and fig.get_figwidth() == pytest.approx(3.5)
    assert [ax.get_title() for ax in fig.axes] == ["effective_rank", plots.PANELS["mean_abs_cos"][0]]
    from PIL import Image

    with Image.open(tmp_path / "c.png") as image:
        assert image.size[0] == 1050  # 3.5 in at 300 dpi
    assert (tmp_path / "c.pdf").read_bytes()[:4] == b"%PDF" and b"<svg" in (tmp_path / "c.svg").read_bytes()
    # each curve is its run's own column, run by run
    first = read_run(runs[0])
    drawn = _lines(fig.axes[0])[0]
    assert list(drawn.get_ydata()) == [r["effective_rank"] for r in first.rows]
    wide = plots.plot(runs, by="model", metrics="mu_rel,effective_rank,mean_abs_cos,sigma_min",
                      width="double")
    assert wide.get_figwidth() == pytest.approx(7.2) and len(wide.axes) == 4
    assert wide.axes[3].get_yscale() == "log" and wide.axes[1].get_yscale() == "linear"


def test_every_setting_in_which_the_runs_differ_is_in_the_legend_the_sample_size_included(runs):
    fig = plots.plot(runs, by="model", metrics=("mu_rel",))
    labels = [ln.get_label() for ln in _lines(fig.axes[0])]
    assert len(labels) == 3 and len(set(labels)) == 3
    assert "2 × 8 tokens" in labels[0] and "2 × 16 tokens" in labels[1] and "6 layers" in labels[0]
    assert "tiny gpt2" in labels[2].lower()  # the in-memory result, labelled as its folder would be


def test_relative_depth_aligns_runs_of_different_depths(runs):
    fig = plots.plot(runs, metrics=("mu_rel",), depth="relative")
    for line in _lines(fig.axes[0]):
        xs = list(line.get_xdata())
        assert xs[0] == 0.0 and xs[-1] == 1.0 and xs == sorted(xs)
    assert {len(ln.get_xdata()) for ln in _lines(fig.axes[0])} == {7, 3, 4}
    by_layer = plots.plot(runs, metrics=("mu_rel",))
    assert max(max(ln.get_xdata()) for ln in _lines(by_layer.axes[0])) == 6.0


def test_a_metric_no_run_has_and_a_bad_option_are_one_line(runs, tmp_path, capsys):
    with pytest.raises(RankCollapseError, match=r"no run has \['attention_entropy'\]; allowed: .*mu_rel"):
        plots.plot(runs, metrics=("mu_rel", "attention_entropy"))
    with pytest.raises(RankCollapseError, match="unknown --depth"):
        plots.plot(runs, depth="log")
    with pytest.raises(RankCollapseError, match="unknown --width"):
        plots.plot(runs, width="a4")
    code = main(["plot", *map(str, runs[:2]), "--metrics", "nope", "--out", str(tmp_path / "x.png")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "allowed" in err and not (tmp_path / "x.png").exists()


def test_the_cli_writes_every_format_asked(runs, tmp_path, capsys):
    code = main(["plot", *map(str, runs[:2]), "--by", "model", "--metrics", "mu_rel,effective_rank",
                 "--depth", "relative", "--width", "double", "--out", str(tmp_path / "f.pdf"),
                 "--plot-format", "png,svg"])
    assert code == 0
    assert all((tmp_path / f"f.{ext}").stat().st_size > 1000 for ext in ("pdf", "png", "svg"))
    assert "f.png" in capsys.readouterr().out
    assert not math.isnan(read_run(runs[0]).rows[-1]["effective_rank"])
