"""`rankcollapse reproduce`: every figure of the paper, every claim checked, one report.html."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import typer

from rankcollapse.cli.app import app
from rankcollapse.cli.options import apply_download, device_option, download_option, progress_option
from rankcollapse.core.names import quantity as q
from rankcollapse.edge.errors import Interrupted, RankCollapseError


def _split(values: list[str] | None) -> list[str] | None:
    """``--only a,b --only c`` -> [a, b, c]; not given -> None; given but empty -> [] (refused later)."""
    if values is None or len(values) == 0:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


class _Interrupt:
    """SIGINT handler for the whole command: the first Ctrl-C raises KeyboardInterrupt (the sweep
    stops its workers and keeps every finished run); further ones during that clean-up are ignored."""

    def __init__(self) -> None:
        self.hit = False
        self.previous = None
        self.active = threading.current_thread() is threading.main_thread()

    def __enter__(self) -> _Interrupt:
        if self.active:
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.hit:
            self.hit = True
            raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self.active:
            signal.signal(signal.SIGINT, self.previous or signal.default_int_handler)


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
    profile: str = typer.Option(
        None, "--profile", help="Profile: quick, full, paper (3000 samples, as published) or tiny (tests)."
    ),
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
    out: str = typer.Option(
        None,
        "--out",
        help="Output folder (default results/<profile>). Re-running the "
        "same command resumes: finished runs are skipped. One process writes a folder at a time.",
    ),
    wait: bool = typer.Option(
        False, "--wait", help="If another process is writing --out, wait for it (default: exit 2 at once)."
    ),
    progress: bool = progress_option(),
    list_only: bool = typer.Option(
        False, "--list", help="List the experiments and their run counts, then exit."
    ),
    config_dir: Path = typer.Option(
        None,
        "--config-dir",
        help="Folder of experiment YAML files to run instead of the bundled ones (example: configs/).",
    ),
    until_decided: bool = typer.Option(
        False,
        "--until-decided",
        help="Sequential sampling: conditions whose rows are undecided get more seeds (the samples "
        "double per look, every look judged at level 0.0455/K, Bonferroni) until decided, --max-samples or "
        "--budget.",
    ),
    max_samples: int = typer.Option(
        None,
        "--max-samples",
        help="With --until-decided: at most this many samples per condition (default 1024).",
    ),
    budget: str = typer.Option(
        None,
        "--budget",
        help="With --until-decided: wall time for the whole call, e.g. 3h, 90m, 2h30m (default: none).",
    ),
    download: bool = download_option(
        "paper checkpoints not in the local Hugging Face cache are fetched (announced on stderr) instead of "
        "replaced by stand-ins"
    ),
    device: str = device_option(None, "each run (default cpu)"),
    batch_size: int = typer.Option(
        None, "--batch-size", help=q("batch_size").help("default: the profile's, else all")
    ),
) -> None:
    """Run the paper's experiments as one resumable sweep; write figures, claims and report.html."""
    apply_download(download)
    with _Interrupt() as guard:
        try:
            _run(
                quick,
                full,
                profile,
                only,
                executor,
                scheduler,
                workers,
                out,
                wait,
                progress,
                list_only,
                config_dir,
                until_decided=until_decided,
                max_samples=max_samples,
                budget=budget,
                device=device,
                batch_size=batch_size,
            )
        except KeyboardInterrupt:
            guard.hit = True
            from rankcollapse.pipeline.reproduce import finished_runs

            out_dir = Path(out) if out else Path("results") / _profile(quick, full, profile)
            raise Interrupted(f"{finished_runs(out_dir)} finished runs kept in {out_dir}") from None


def _profile(quick: bool, full: bool, profile: str | None) -> str:
    chosen = [name for name, flag in (("quick", quick), ("full", full)) if flag]
    if profile is not None:
        if not profile.strip():
            raise RankCollapseError("--profile must name a profile (quick, full, paper, tiny), got ''")
        chosen.append(profile)
    if len(set(chosen)) > 1:
        raise RankCollapseError(f"choose one profile, got {' and '.join(chosen)}")
    return chosen[0] if chosen else "quick"


def check_config_dir(folder: Path) -> None:
    """Read every ``*.yaml`` of ``--config-dir`` through the one input opener (regular files only, at
    most 1 MiB each, aliases bounded): a FIFO, a link to /dev/zero or an alias bomb is one line
    before the experiment loader opens anything."""
    from rankcollapse.edge.inputs import check_folder, read_yaml

    check_folder(folder, "--config-dir")
    try:
        paths = sorted(Path(folder).glob("*.yaml"))
    except OSError as err:
        from rankcollapse.edge.inputs import os_error

        raise os_error("--config-dir", folder, err, verb="list") from None
    for path in paths:
        read_yaml(path, "experiment config")


def _run(
    quick: bool,
    full: bool,
    profile: str | None,
    only: list[str] | None,
    executor: str,
    scheduler: str | None,
    workers: int | None,
    out: str | None,
    wait: bool,
    progress: bool,
    list_only: bool,
    config_dir: Path | None,
    *,
    until_decided: bool = False,
    max_samples: int | None = None,
    budget: str | None = None,
    device: str | None = None,
    batch_size: int | None = None,
) -> None:
    from rankcollapse.experiments.contract.verdicts import FOLLOWUPS, tally, tally_line
    from rankcollapse.experiments.stories import load_experiments
    from rankcollapse.pipeline.reproduce import ReproduceConfig, reproduce
    from rankcollapse.pipeline.sequential import parse_duration

    name = _profile(quick, full, profile)
    config = ReproduceConfig(
        Path("results") / name if out is None else out,
        profile=name,
        only=_split(only),
        executor=executor,
        scheduler=scheduler,
        workers=workers,
        progress=progress,
        config_dir=config_dir,
        wait=wait,
        until_decided=until_decided,
        max_samples=max_samples,
        budget_s=parse_duration(budget) if budget is not None else None,
        device=device,
        batch_size=batch_size,
    )
    if config_dir is not None:
        check_config_dir(config_dir)
    if list_only:
        for exp in load_experiments(config.profile, config.only, config_dir):
            runs = len(exp.runs())
            note = f" (opt-in: --only {exp.name} or --profile paper)" if exp.opt_in and not runs else ""
            typer.echo(f"{exp.name:26s} {runs:4d} runs  {exp.title}{note}")
        return
    from rankcollapse.edge.folder import check_output_folder

    check_output_folder(config.out_dir, "reproduce", existing="resume")  # a foreign folder: refused, nothing
    result = reproduce(config)
    counts = tally(result.claims)
    sweep = result.sweep
    typer.echo(
        f"runs: {sweep.total} ({sweep.skipped} already finished, {sweep.finished} run now, "
        f"{sweep.failed} failed) in {result.wall_s:.1f} s"
    )
    for run_id, error in sweep.failures[:5]:
        typer.echo(f"  failed {run_id}: {error}", err=True)
    if not result.claims:
        typer.echo("claims: none (no claim rules for these experiments)")
    for origin, by_class in counts.items():
        typer.echo(f"claims ({tally_line(origin, by_class)})")
    for paper in FOLLOWUPS:  # each follow-up's rows on their own lines, never in the main tally
        for origin, by_class in tally(result.claims, paper).items():
            typer.echo(f"claims, follow-up arXiv {paper} ({tally_line(origin, by_class)})")
    typer.echo(f"report: {result.report}")
