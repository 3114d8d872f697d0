"""`rankcollapse reproduce`: every figure of the paper, every claim checked, one report.html."""

from __future__ import annotations

from pathlib import Path

import typer

from rankcollapse.cli.app import app
from rankcollapse.errors import RankCollapseError


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


@app.command("reproduce")
def reproduce_command(
    quick: bool = typer.Option(
        False, "--quick", help="Small sizes: all figures and the report in minutes (the default profile)."
    ),
    full: bool = typer.Option(
        False,
        "--full",
        help="Paper scale: 128 layers, several seeds (see docs/reproduce.md for the measured time).",
    ),
    profile: str = typer.Option(None, "--profile", help="Profile by name: quick, full or tiny (tests)."),
    only: list[str] = typer.Option(
        None, "--only", help="Run only these experiments (repeat or comma-separate); see --list."
    ),
    executor: str = typer.Option(
        "local", "--executor", help="local (process pool) or dask (a distributed scheduler, see --scheduler)."
    ),
    scheduler: str = typer.Option(
        None, "--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786."
    ),
    workers: int = typer.Option(
        None, "--workers", help="Local worker processes (default min(2, cpu); 1 = in this process)."
    ),
    out: Path = typer.Option(
        None,
        "--out",
        help="Output folder (default results/<profile>). Re-running the "
        "same command resumes: finished runs are skipped.",
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bars (runs and layers)."),
    list_only: bool = typer.Option(
        False, "--list", help="List the experiments and their run counts, then exit."
    ),
    config_dir: Path = typer.Option(
        None,
        "--config-dir",
        help="Folder of experiment YAML files to run instead of the bundled ones (example: configs/).",
    ),
) -> None:
    """Run the paper's experiments as one resumable sweep; write figures, claims and report.html."""
    from rankcollapse.experiments.config import load_experiments
    from rankcollapse.experiments.reproduce import reproduce, verdict_counts

    chosen = [name for name, flag in (("quick", quick), ("full", full)) if flag]
    if profile:
        chosen.append(profile)
    if len(set(chosen)) > 1:
        raise RankCollapseError(f"choose one profile, got {' and '.join(chosen)}")
    name = chosen[0] if chosen else "quick"
    names = _split(only)
    if list_only:
        for exp in load_experiments(name, names, config_dir):
            typer.echo(f"{exp.name:18s} {len(exp.runs()):4d} runs  {exp.title}")
        return
    out_dir = out if out is not None else Path("results") / name
    result = reproduce(
        out_dir,
        profile=name,
        only=names,
        executor=executor,
        scheduler=scheduler,
        workers=workers,
        config_dir=config_dir,
        progress=progress,
    )
    counts = verdict_counts(result.claims)
    sweep = result.sweep
    typer.echo(
        f"runs: {sweep.total} ({sweep.skipped} already finished, {sweep.finished} run now, "
        f"{sweep.failed} failed) in {result.wall_s:.1f} s"
    )
    for run_id, error in sweep.failures[:5]:
        typer.echo(f"  failed {run_id}: {error}", err=True)
    verdicts = ", ".join(f"{v} {k}" for k, v in counts.items())
    typer.echo("claims: " + (verdicts or "none (no claim rules for these experiments)"))
    typer.echo(f"report: {result.report}")
