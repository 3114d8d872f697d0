"""Figures of one run as objects (figure_collapse, figure_geometry, figure_diagnostics, figures): each panel
draws the run's own values (read back from the artists), the heatmap is the per-head table, a run without
diagnostics is refused in one line, no figure is left registered with pyplot, and analyze --plot writes
every figure that applies (in each format asked) and lists it in the folder's marker."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from rankcollapse.cli.main import main
from rankcollapse.core.precision import floor_rel
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.folder import read_marker
from rankcollapse.models import AnalyzeConfig, analyze, plots, write_run
from rankcollapse.models.finished import FinishedRun, read_run

matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture(scope="module")
def runs(tiny_models):
    """Two runs of tiny BERT on the same 3 x 12 token ids: plain (float32, attention only, collapsing) and
    with diagnostics (float64, full, a sink threshold low enough for some heads to be sinks)."""
    import torch

    ids = torch.randint(0, 30000, (3, 12), generator=torch.Generator().manual_seed(1))
    plain = analyze(
        AnalyzeConfig(model="tiny:bert", mode="attn", layers=6, samples=3, tokens=12),
        model=tiny_models("bert"),
        ids=ids,
    )
    config = AnalyzeConfig(
        model="tiny:bert",
        layers=5,
        samples=3,
        tokens=12,
        dtype="float64",
        diagnostics=True,
        sink_threshold=0.15,
    )
    diag = analyze(config, model=tiny_models("bert", "f64"), ids=ids)
    return plain, diag


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label() == label)


def _drawn(ax):
    """The one unlabelled data line of a panel (its curve, markers on)."""
    return next(
        line for line in ax.get_lines() if line.get_label().startswith("_") and line.get_marker() == "o"
    )


def _same(drawn, values):
    """The plotted values are the row's (NaN where the row has none, or, on a log axis, where it is <= 0)."""
    return len(drawn) == len(values) and all(
        (math.isnan(a) and (not math.isfinite(b) or b <= 0)) or a == b
        for a, b in zip(drawn, values, strict=True)
    )


def _layers(result):
    return [r["layer"] for r in result.rows]


def test_figure_collapse_draws_the_results_mu_and_mu_rel_per_layer_with_its_floor(runs):
    plain, _ = runs
    open_before = plt.get_fignums()  # another test in this worker may have left pyplot figures open
    fig = plots.figure_collapse(plain)
    ax_mu, ax_rel = fig.axes
    assert [ax_mu.get_title(), ax_rel.get_title()] == [t for _, t in plots.COLLAPSE]
    for ax, key in ((ax_mu, "mu"), (ax_rel, "mu_rel")):
        line = _line(ax, "batch mean")
        assert list(line.get_xdata()) == _layers(plain)
        assert _same(list(line.get_ydata()), plain.column(key))
        assert ax.get_yscale() == "log" and ax.get_ylabel()
        # fill_between: both edges of the band, where both are > 0 (a log axis shows no 0: tokens equal
        # to the bit reach mu = 0 exactly under float64 sums, and the band breaks there)
        band = np.concatenate([p.vertices[:, 1] for p in ax.collections[0].get_paths()])
        lo, hi = plain.column(f"{key}_min"), plain.column(f"{key}_max")
        shown = [v for a, b in zip(lo, hi, strict=True) if a > 0 and b > 0 for v in (a, b)]
        assert shown and all(np.isclose(band, v, rtol=1e-12).any() for v in shown)
    floor = _line(ax_rel, f"precision floor {floor_rel('float32'):.1e} (float32)")
    assert set(floor.get_ydata()) == {floor_rel("float32")}
    title = fig.subfigs[0].get_suptitle()
    assert all(
        w in title
        for w in ("tiny bert (random init)", "attn", "mask complete", "float32", "3 excerpts", "12 tokens")
    )
    labels = [t.get_text() for t in fig.subfigs[1].legends[0].get_texts()]
    assert "batch mean" in labels and "min-max over samples" in labels
    assert plt.get_fignums() == open_before  # a figure object, never registered with pyplot


def test_figure_geometry_draws_each_geometry_column_against_its_bound(runs):
    plain, _ = runs
    fig = plots.figure_geometry(plain)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["effective_rank, num_rank", "full_rank", "sigma_min", "mean_abs_cos"]
    ranks, share, smin, cos = fig.axes
    for name in ("effective_rank", "num_rank"):
        assert _same(list(_line(ranks, name).get_ydata()), plain.column(name))
    d = plain.model_info["d_model"]
    assert set(_line(ranks, f"min(N, d) = {min(12, d)}").get_ydata()) == {min(12, d)}
    assert _same(list(_drawn(share).get_ydata()), plain.column("full_rank"))
    assert _same(list(_drawn(smin).get_ydata()), plain.column("sigma_min")) and smin.get_yscale() == "log"
    assert _same(list(_drawn(cos).get_ydata()), plain.column("mean_abs_cos"))
    iso = next(line for line in cos.get_lines() if line.get_label().startswith("isotropic"))
    assert set(iso.get_ydata()) == {math.sqrt(2 / (math.pi * d))}
    assert all(ax.get_xlim() == (-0.5, 6.5) for ax in fig.axes)  # every layer in range, t on x


def test_figure_diagnostics_heatmap_is_the_per_head_first_token_attention_with_the_sinks_marked(runs):
    _, diag = runs
    fig = plots.figure_diagnostics(diag)
    ax_map, ax_sink, ax_ent, ax_mass = fig.axes[:4]
    layers, table = plots.head_values(diag)
    heads = sum(k.startswith("first_token_attention_h") for k in diag.rows[1])
    assert layers == list(range(1, 6)) and len(table) == heads
    assert table == [[r[f"first_token_attention_h{h}"] for r in diag.rows[1:]] for h in range(heads)]
    image = ax_map.get_images()[0]
    assert np.array_equal(np.asarray(image.get_array()), np.array(table))  # [h, t]: heads up, layers across
    assert {int(h) for r in diag.rows[1:] for h in r["sink_heads"].split()} == {
        h for h in range(heads) if any(v > 0.15 for v in table[h])
    }
    assert _same(list(_line(ax_sink, "sink_rate, share of heads").get_ydata()), diag.column("sink_rate"))
    assert set(_line(ax_sink, "sink threshold 0.15").get_ydata()) == {0.15}
    assert _same(
        list(_line(ax_ent, "attention_entropy, mean over heads").get_ydata()),
        diag.column("attention_entropy"),
    )
    mass = next(line for line in ax_mass.get_lines() if line.get_marker() == "o")
    assert _same(list(mass.get_ydata()), diag.column("massive_ratio")) and ax_mass.get_yscale() == "log"
    assert plots.figure_names(None, True) == tuple(plots.figures(diag))


def test_the_sink_heads_outlined_are_the_cells_above_the_runs_threshold():
    """A hand-made run (3 heads, layers 1-3, threshold 0.4): the heatmap is the table, the outlined cells
    are exactly those above 0.4, the sink_rate curve is the row's."""
    table = [[0.1, 0.5, 0.9], [0.2, 0.4, 0.45], [0.95, 0.05, 0.3]]  # [h][t - 1]
    rows = [
        {
            "layer": "0",
            "status": "ok",
            "mu_rel": "1.0",
            "sink_rate": "nan",
            "massive_ratio": "3.0",
            **{f"first_token_attention_h{h}": "nan" for h in range(3)},
        }
    ]
    for t in (1, 2, 3):
        rows.append(
            {
                "layer": str(t),
                "status": "ok",
                "mu_rel": "1.0",
                "massive_ratio": "3.0",
                "sink_rate": str(sum(table[h][t - 1] > 0.4 for h in range(3)) / 3),
                **{f"first_token_attention_h{h}": str(table[h][t - 1]) for h in range(3)},
            }
        )
    facts = {
        "mask": "causal",
        "mode": "full",
        "model": "hand-made",
        "dtype": "float32",
        "d_qk": "d_qk 4",
        "layers": "3 layers",
    }
    run = FinishedRun(Path("x"), facts, rows, {"analyze": {"sink_threshold": 0.4}, "model": {}})
    fig = plots.figure_diagnostics(run)
    ax_map, ax_sink = fig.axes[:2]
    assert np.array_equal(np.asarray(ax_map.get_images()[0].get_array()), np.array(table))
    marked = next(line for line in ax_map.get_lines() if line.get_marker() == "s")
    cells = {(int(x), int(y)) for x, y in zip(marked.get_xdata(), marked.get_ydata(), strict=True)}
    assert cells == {(2, 0), (3, 0), (3, 1), (1, 2)}  # (2, 1) is 0.4 itself: not above the threshold
    assert list(_line(ax_sink, "sink_rate, share of heads").get_ydata())[1:] == [1 / 3, 1 / 3, 2 / 3]


def test_figure_diagnostics_of_a_run_without_diagnostics_is_refused_in_one_line(runs):
    plain, _ = runs
    for call in (plots.figure_diagnostics, plots.head_values):
        with pytest.raises(
            RankCollapseError, match="no diagnostics; run analyze with diagnostics=True"
        ) as err:
            call(plain)
        assert "\n" not in str(err.value)
    assert list(plain.figures()) == ["mu", "geometry"]
    with pytest.raises(RankCollapseError, match="cannot draw 'int'; allowed: an AnalyzeResult"):
        plots.figure_collapse(42)


def test_a_finished_run_read_back_draws_the_figures_of_its_result(runs, tmp_path):
    _, diag = runs
    write_run(diag, tmp_path / "run")
    again = plots.figures(read_run(tmp_path / "run"))
    first = diag.figures()
    assert list(again) == list(first) == ["mu", "geometry", "diagnostics"]
    for name in first:
        for a, b in zip(first[name].axes, again[name].axes, strict=True):
            assert a.get_title() == b.get_title()
            for la, lb in zip(a.get_lines(), b.get_lines(), strict=True):
                assert np.allclose(la.get_ydata(), lb.get_ydata(), rtol=1e-12, equal_nan=True)
        assert first[name].subfigs[0].get_suptitle() == again[name].subfigs[0].get_suptitle()


def test_the_model_record_names_its_own_depth_model_layers_and_an_old_n_layers_reads_so(runs, tmp_path):
    import json
    import warnings

    plain, _ = runs
    write_run(plain, tmp_path / "run")
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    model = record["config"]["model"]
    # tiny:bert's own 4 layers, not the run's depth (6 layers: the model's cycled)
    assert "n_layers" not in model and model["model_layers"] == 4 and len(plain.rows) - 1 == 6
    depth = model.pop("model_layers")
    model["n_layers"] = depth  # what an earlier release wrote
    (tmp_path / "run" / "config.json").write_text(json.dumps(record))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stored data: read silently, as core.names.from_stored does
        again = read_run(tmp_path / "run")
    assert again.config["model"]["model_layers"] == depth and "n_layers" not in again.config["model"]


def test_the_file_writers_leave_no_pyplot_figure_open(runs, tmp_path):
    plain, diag = runs
    open_before = plt.get_fignums()
    plots.plot_collapse(plain.rows, tmp_path / "mu.png", dtype="float32")
    plots.plot_token_geometry(plain.rows, tmp_path / "geo.pdf")
    written = plots.save_figures(diag, tmp_path, ("png", "svg"))
    write_run(plain, tmp_path / "a")
    plots.plot([tmp_path / "a", tmp_path / "a"], tmp_path / "c.png", by="mode")
    assert plt.get_fignums() == open_before
    assert [p.name for p in written] == [
        "mu.png",
        "mu.svg",
        "geometry.png",
        "geometry.svg",
        "diagnostics.png",
        "diagnostics.svg",
    ]
    assert (tmp_path / "mu.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "geo.pdf").read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in (tmp_path / "diagnostics.svg").read_bytes()[:2000]


def test_analyze_plot_writes_every_figure_that_applies_in_each_format_and_lists_them(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("It was the best of times, it was the worst of times. " * 30)
    out = tmp_path / "run"
    base = [
        "analyze",
        "--model",
        "tiny:gpt2",
        "--layers",
        "2",
        "--text-file",
        str(text),
        "--samples",
        "2",
        "--tokens",
        "10",
        "--out",
        str(out),
        "--no-progress",
        "--no-table",
    ]
    assert main([*base, "--diagnostics", "--plot", "--plot-format", "png,pdf"]) == 0
    figures = {f"{n}.{e}" for n in ("mu", "geometry", "diagnostics") for e in ("png", "pdf")}
    assert figures <= set(read_marker(out)["files"])
    assert "figures: mu.png, mu.pdf, geometry.png" in capsys.readouterr().out
    # the same folder again (--overwrite), no diagnostics: the stale diagnostics figures go with the old run
    assert main([*base, "--plot", "--overwrite"]) == 0
    assert set(read_marker(out)["files"]) == {"config.json", "metrics.csv", "mu.png", "geometry.png"}
    capsys.readouterr()
    for extra, needle in (
        (["--plot-format", "pdf"], "--plot-format applies only with --plot"),
        (["--plot", "--plot-format", "jpg"], "--plot-format 'jpg' is invalid; allowed: "),
        (["--plot", "--metrics", "dong_residual"], "--metrics dong_residual has none of them"),
    ):
        assert main([*base, *extra, "--overwrite"]) == 2  # the folder may be replaced: the option is refused
        err = capsys.readouterr().err.strip()
        assert needle in err and "\n" not in err
