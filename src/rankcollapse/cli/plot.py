"""`rankcollapse plot`: finished runs overlaid on one figure (mu and mu_rel per layer)."""

from __future__ import annotations

from pathlib import Path

import typer

from rankcollapse.cli.app import app


@app.command("plot")
def plot_command(
    runs: list[Path] = typer.Argument(..., help="Run folders written by analyze or simulate (config.json, "
                                      "metrics.csv)."),
    by: str = typer.Option("mask", "--by", help="Label each curve by: mask, mode, model or dtype."),
    out: Path = typer.Option(Path("compare.png"), "--out", help="The figure (PNG, PDF or SVG by suffix)."),
    title: str = typer.Option("", "--title", help="Figure title (default: 'by <by>' and what "
                              "the runs share)."),
) -> None:
    """Overlay finished runs: mu and mu_rel against the layer, one curve per run, precision floors drawn."""
    from rankcollapse.models.plot import plot

    path = plot(runs, out, by=by, title=title)
    typer.echo(f"wrote {path} ({len(runs)} runs by {by})")
