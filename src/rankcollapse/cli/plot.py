"""`rankcollapse plot`: finished runs compared on one figure (:func:`rankcollapse.models.plots.plot`)."""

from __future__ import annotations

from pathlib import Path

import typer

from rankcollapse.cli.app import app


@app.command("plot")
def plot_command(
    runs: list[Path] = typer.Argument(..., help="Run folders written by analyze or simulate (config.json, "
                                      "metrics.csv)."),
    by: str = typer.Option("mask", "--by", help="Label each curve by: mask, mode, model or dtype (every "
                           "other setting in which the runs differ follows it)."),
    metrics: str = typer.Option("mu,mu_rel", "--metrics", help="The per-layer columns to draw, one panel "
                                "each (e.g. mu_rel,effective_rank,mean_abs_cos,sink_rate)."),
    depth: str = typer.Option("layer", "--depth", help="x: layer (t) or relative (t / L: runs of "
                              "different depths aligned)."),
    width: str = typer.Option("column", "--width", help="column (3.5 in) or double (7.2 in)."),
    out: Path = typer.Option(Path("compare.png"), "--out", help="The figure (PNG, PDF or SVG by suffix)."),
    plot_format: str = typer.Option("", "--plot-format", help="Also these formats beside --out, e.g. "
                                    "png,pdf,svg (the same stem)."),
    title: str = typer.Option("", "--title", help="Figure title (default: 'by <by>' and what "
                              "the runs share)."),
) -> None:
    """Compare finished runs: any per-layer metric against the layer or the relative depth, one curve
    per run, precision floors drawn, 300 dpi (the single-run figures' sibling)."""
    from rankcollapse.models.plots import figure_paths, plot

    plot(runs, out, by=by, metrics=metrics, depth=depth, width=width, formats=plot_format or None,
         title=title)
    written = figure_paths(out, plot_format or None)
    typer.echo(f"wrote {', '.join(map(str, written))} ({len(runs)} runs by {by})")
