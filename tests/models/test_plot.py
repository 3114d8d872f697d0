"""Figures of analysis runs: one run's mu / mu_rel with its precision floor and the geometry panels,
finished runs overlaid by mask, mode, model or dtype, and the CLI over both."""

from __future__ import annotations

import math

import pytest

from rankcollapse.cli.main import main
from rankcollapse.core.precision import floor_rel
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, plots, write_run
from rankcollapse.models.finished import read_run
from rankcollapse.models.plots import style


@pytest.fixture
def figures(monkeypatch):
    """Keep each figure instead of writing it (its artists are what the tests read)."""
    kept = []

    def keep(fig, path, *more, **_):
        kept.append(fig)
        return [path, *more]

    monkeypatch.setattr(style, "save_figure", keep)  # every file of models.plots is written through it
    return kept


def _suptitle(fig):
    """The title of a figure drawn as the single-run figures are (above the panels' subfigure)."""
    return fig.subfigs[0]._suptitle.get_text()


def _curve(ax, label):
    return next(line for line in ax.get_lines() if line.get_label() == label)


def test_plot_collapse_draws_mu_and_mu_rel_with_the_floor_of_the_runs_dtype(tiny_models, ids, figures):
    config = AnalyzeConfig(model="tiny:bert", mode="attn", layers=6)
    result = analyze(config, model=tiny_models("bert"), ids=ids)
    plots.plot_collapse(result.rows, "unused.png", dtype="float32", title="t")
    fig = figures[0]
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [t for _, t in plots.COLLAPSE]  # the geometry is its own figure (test_figures.py)
    ax_mu, ax_rel = fig.axes
    label = "batch mean"
    # a log axis shows a value > 0; an exact 0 (the float64 sums reach it in this tiny net) is a gap
    for ax, key in ((ax_mu, "mu"), (ax_rel, "mu_rel")):
        drawn = list(_curve(ax, label).get_ydata())
        assert [v if v > 0 else None for v in (r[key] for r in result.rows)] == [
            None if math.isnan(v) else v for v in drawn]
    floor = _curve(ax_rel, f"precision floor {floor_rel('float32'):.1e} (float32)")
    assert set(floor.get_ydata()) == {floor_rel("float32")} and ax_rel.get_yscale() == "log"


def test_plot_overlays_finished_runs_labelled_by_mask_and_names_what_they_share(tiny_models, ids, tmp_path,
                                                                               figures):
    folders = []
    for mask in ("causal", "window:w=1"):
        cfg = AnalyzeConfig(model="tiny:bert", mode="attn", mask=mask, layers=4, dtype="float64")
        folders.append(tmp_path / mask.replace(":", "_"))
        write_run(analyze(cfg, model=tiny_models("bert", "f64"), ids=ids), folders[-1])
    plots.plot(folders, tmp_path / "c.png", by="mask")
    ax_mu, ax_rel = figures[0].axes
    labels = [line.get_label() for line in ax_mu.get_lines()]
    assert labels[:2] == ["causal", "window:w=1"]
    title = _suptitle(figures[0])
    assert title.replace("\n", " ") == ("by mask — mode attn, model tiny bert (random init), dtype float64, "
                                         "d_qk 16.0, 4 layers, 3 × 12 tokens")
    floors = [line.get_label() for line in ax_rel.get_lines() if line.get_label().startswith("precision")]
    assert floors == [f"precision floor {floor_rel('float64'):.1e} (float64)"]
    # by mode both runs are "attn": the fact that differs (their mask) joins the label
    plots.plot(folders, tmp_path / "d.png", by="mode")
    labels = [line.get_label() for line in figures[1].axes[0].get_lines()][:2]
    assert labels == ["attn, causal", "attn, window:w=1"]
    # by model, runs that differ in mode, mask and depth are labelled by each (the README's own example
    # labelled them by model only)
    other = AnalyzeConfig(model="tiny:bert", mode="full", mask="causal", layers=2, dtype="float64")
    folders.append(tmp_path / "full")
    write_run(analyze(other, model=tiny_models("bert", "f64"), ids=ids), folders[-1])
    plots.plot(folders, tmp_path / "e.png", by="model")
    labels = [line.get_label() for line in figures[2].axes[0].get_lines()][:3]
    assert len(set(labels)) == 3 and all("tiny bert" in lab for lab in labels)
    assert labels[2].endswith("causal, full, 2 layers") and labels[1].endswith("window:w=1, attn, 4 layers")


def test_plot_reads_simulate_runs_too_and_refuses_what_is_not_a_run(tmp_path, capsys):
    sim = tmp_path / "sim"
    assert main(["simulate", "--tokens", "6", "--d", "4", "--layers", "5", "--out", str(sim),
                 "--no-progress"]) == 0
    run = read_run(sim)
    assert run.facts == {"mask": "complete", "mode": "attn", "model": "simulate N=6, d=4", "dtype": "float64",
                         "d_qk": "d_qk 1.0", "layers": "5 layers", "size": ""}
    (tmp_path / "empty").mkdir()
    with pytest.raises(RankCollapseError, match=r"not a finished run: no config\.json"):
        read_run(tmp_path / "empty")
    with pytest.raises(RankCollapseError, match="unknown --by"):
        plots.plot([sim], tmp_path / "x.png", by="colour")


def test_the_plot_command_writes_the_figure_and_errors_are_one_line(tmp_path, capsys):
    sim = tmp_path / "sim"
    assert main(["simulate", "--mask", "causal", "--tokens", "6", "--d", "4", "--layers", "5", "--out",
                 str(sim),
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["plot", str(sim), str(sim), "--by", "mode", "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 1000 and "wrote" in capsys.readouterr().out
    assert main(["plot", str(tmp_path / "nothing"), "--out", str(tmp_path / "n.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rankcollapse: error:") and "\n" not in err


def test_analyze_plot_writes_mu_png_and_per_sample_rows_are_what_the_rows_summarise(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("It was the best of times, it was the worst of times. " * 30)
    out = tmp_path / "run"
    assert main(["analyze", "--model", "tiny:gpt2", "--layers", "3", "--text-file", str(text),
                 "--samples", "3",
                 "--tokens", "12", "--dtype", "float64", "--out", str(out), "--plot", "--per-sample"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].split()[:3] == ["layer", "mu_rel", "full-rank%"]  # the table
    assert (out / "mu.png").stat().st_size > 1000
    import pandas as pd

    rows = pd.read_csv(out / "metrics.csv")
    per = pd.read_csv(out / "per_sample.csv")
    assert len(per) == 3 * len(rows) and list(per.columns[:5]) == ["layer", "hidden_state", "model_layer",
                                                                   "hook", "sample"]
    for name in ("mu", "mu_rel", "effective_rank"):
        grouped = per.groupby("layer")[name]
        assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(grouped.mean(), rows[name], strict=True))
        assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(grouped.max(), rows[f"{name}_max"],
                                                                       strict=True))


def test_a_dollar_in_a_title_folder_or_mask_name_is_drawn_literally(tmp_path, capsys):
    """matplotlib parses ``$...$`` as mathtext: a folder, title or file-mask name holding ``$\\foo{$``
    raised a ParseFatalException traceback at save time (exit 1); every user string in a figure is
    escaped (``validate.plain_text``), so each command draws it and exits 0."""
    from rankcollapse.edge.validate import plain_text

    odd = "x $\\foo{$ y"
    assert plain_text(odd) == "x \\$\\foo{\\$ y"
    run = tmp_path / odd
    assert main(["simulate", "--mask", "causal", "--tokens", "6", "--d", "3", "--layers", "2", "--out",
                 str(run),
                 "--plot"]) == 0
    assert main(["plot", str(run), str(run), "--by", "mask", "--title", odd, "--out",
                 str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 0
    import numpy as np

    mask = tmp_path / f"{odd}.npy"
    np.save(mask, np.tril(np.ones((3, 3), dtype=bool)))
    assert main(["mask", f"file:{mask}", "--tokens", "3", "--plot", str(tmp_path / "m.png")]) == 0
    assert (tmp_path / "m.png").stat().st_size > 0


def test_plot_to_a_suffix_matplotlib_does_not_write_is_one_line(tmp_path, capsys):
    """``plot --out x.foo`` came through as matplotlib's ValueError traceback; it is one line listing
    the formats, exit 2, nothing written (a known suffix in capitals still works)."""
    run = tmp_path / "run"
    args = ["simulate", "--mask", "causal", "--tokens", "6", "--d", "3", "--layers", "2", "--out", str(run)]
    assert main(args) == 0
    capsys.readouterr()
    assert main(["plot", str(run), "--out", str(tmp_path / "p.foo")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'foo'" in err[0] and "png" in err[0]
    assert not (tmp_path / "p.foo").exists()
    assert main(["plot", str(run), "--out", str(tmp_path / "p.PDF")]) == 0
    assert (tmp_path / "p.PDF").read_bytes()[:4] == b"%PDF"
