"""``reproduce``: run every story's grid through one sweep, draw every figure, judge every claim.

>>> result = reproduce("results/quick", profile="quick")
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
from all finished runs of the selected experiments. This module sits above the engine and the
stories: it takes each story's claims and figures from ``rankcollapse.experiments.stories``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.config import Experiment
from rankcollapse.experiments.engine.executors import SweepSummary, check_executor, run_sweep
from rankcollapse.experiments.engine.grid import RunSpec
from rankcollapse.experiments.engine.lock import OutputLock
from rankcollapse.experiments.engine.store import RunStore, collect_index, collect_table, write_tables
from rankcollapse.experiments.engine.verdicts import VERDICTS, Claim, judge, slice_data
from rankcollapse.experiments.plotting import FigureFile, save_figure
from rankcollapse.experiments.stories import all_stories, load_experiments
from rankcollapse.io import atomic_write, package_versions, to_jsonable, write_json


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


def _cost(spec: RunSpec) -> tuple[int, float]:
    """Longest runs first: those whose task estimates its seconds (``cost_s``, the paper's models),
    then pretrained models, then the biggest simulations; fewer idle workers at the end."""
    from rankcollapse.experiments.engine.tasks import resolve_target

    p = spec.params
    estimate = getattr(resolve_target(spec.target, spec.task), "cost_s", None) if spec.target else None
    if estimate is not None:
        return (0, -float(estimate(p)))  # seconds
    if spec.task == "analyze":
        return (1, -float(p.get("layers") or 32) * float(p.get("samples", 1)) * float(p.get("tokens", 1)))
    size = (
        float(p.get("layers") or 12)
        * float(p.get("batch", 1))
        * float(p.get("n", 2)) ** 2
        * float(p.get("d", 2))
    )
    return (2, -size)


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


def estimate_seconds(specs: list[RunSpec], store: RunStore | None = None) -> tuple[float, int]:
    """(estimated CPU seconds, runs estimated) of the unfinished specs whose task has ``cost_s(params)``."""
    from rankcollapse.experiments.engine.tasks import resolve_target

    total, known = 0.0, 0
    for spec in specs:
        if not spec.target or (store is not None and store.is_done(spec)):
            continue
        cost = getattr(resolve_target(spec.target, spec.task), "cost_s", None)
        if cost is not None:
            total += float(cost(spec.params))
            known += 1
    return total, known


#: Per-run slowdown of parallel local workers sharing the cores (memory bandwidth), measured: the
#: paper runs of ``reproduce --full`` on 2 workers and 2 cores took 1.19-1.41x (mean 1.35x) their
#: one-process estimates (2026-12-01, docs/measurements.md).
PARALLEL_SLOWDOWN = 1.35


def print_estimate(specs: list[RunSpec], profile: str, workers: int | None, store: RunStore) -> None:
    """One line on stderr before a sweep starts: the estimated time of the runs left to do.

    CPU time is the sum of the tasks' ``cost_s`` (one process alone); the wall time on ``w > 1``
    local workers is ``PARALLEL_SLOWDOWN * cpu / w``."""
    from rankcollapse.experiments.engine.executors import default_workers

    total, known = estimate_seconds(specs, store)
    if known:
        w = workers or default_workers()
        def span(sec: float) -> str:
            return f"{sec / 3600:.1f} h" if sec >= 3600 else f"{sec / 60:.1f} min"

        wall = total * (PARALLEL_SLOWDOWN if w > 1 else 1.0) / w
        print(f"rankcollapse: reproduce --profile {profile}: estimated {span(total)} of CPU time for "
              f"{known} of {len(specs)} runs, about {span(wall)} on {w} local workers (measured "
              "per-layer costs of the paper's models; more workers or a Dask cluster divide it)",
              file=sys.stderr)


def finished_runs(out_dir: str | Path) -> int:
    """How many finished runs ``out_dir`` holds (what an interrupted ``reproduce`` kept)."""
    return RunStore(out_dir).finished()


def reproduce(
    out_dir: str | Path,
    *,
    profile: str = "quick",
    only: list[str] | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    config_dir: str | Path | None = None,
    wait: bool = False,
) -> ReproduceResult:
    """Run the selected experiments of ``profile`` into ``out_dir`` and write the report.

    Every option is checked before anything is written. ``out_dir`` is locked for the whole call:
    a second writer gets a RankCollapseError naming the holder's pid, or blocks with ``wait=True``.
    """
    if not str(out_dir).strip():
        raise RankCollapseError("--out must name a folder, got ''")
    check_executor(executor, scheduler, workers)
    experiments = load_experiments(profile, only, config_dir)
    start = time.perf_counter()
    out = Path(out_dir)
    specs = sorted((s for e in experiments for s in e.runs()), key=_cost)
    with OutputLock(out, wait=wait):
        print_estimate(specs, profile, workers, RunStore(out))
        if executor == "local":
            _prepare_models(specs, RunStore(out))
        sweep = run_sweep(
            specs,
            out,
            executor=executor,
            workers=workers,
            scheduler=scheduler,
            progress=progress,
            label=f"reproduce --{profile}",
        )
        table, index = collect_table(out), collect_index(out)
        write_tables(out, table, index)
        wanted = {s.run_id for s in specs}
        if not table.empty:
            table = table[table["run_id"].isin(wanted)]
        if not index.empty:
            index = index[index["run_id"].isin(wanted)]
        claims, figures, described = _analyse(experiments, table, index, out)
        wall = time.perf_counter() - start
        meta = _meta(profile, only, executor, workers, sweep, index, wall)
        from rankcollapse.reports.html import write_report

        report = write_report(claims, figures, described, meta, out)
        write_json(out / "experiments.json", {"meta": meta, "experiments": described})
    return ReproduceResult(out, report, claims, figures, sweep, wall, experiments)


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
        "command": " ".join(["rankcollapse", *sys.argv[1:]]) if sys.argv[0].endswith("rankcollapse") else "",
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
        "versions": package_versions(),
        "failed_runs": [
            {"experiment": r["experiment"], "run_id": r["run_id"], "error": r["error"]}
            for _, r in failed.iterrows()
        ],
    }


def _analyse(
    experiments: list[Experiment], table: pd.DataFrame, index: pd.DataFrame, out: Path
) -> tuple[list[Claim], list[FigureFile], list[dict[str, Any]]]:
    """Each story's claims and figures from its slice of the tables; experiments without a story
    (custom configs) get neither, only data."""
    stories = all_stories()
    claims: list[Claim] = []
    figures: list[FigureFile] = []
    described = []
    for exp in experiments:
        data = slice_data(exp, table, index)
        found = stories.get(exp.name)
        if found is not None and found.story.task_name == exp.task:
            claims.extend(judge(found.story.claims, data))
            for spec in found.story.figures(data):
                figures.append(save_figure(spec, out / "figures", exp.name))
        info = exp.describe()
        info["runs"] = len(exp.runs())
        info["wall_s"] = round(float(data.index["wall_s"].sum()), 1) if not data.index.empty else 0.0
        described.append(info)
    rows = [c.to_dict() for c in claims]
    atomic_write(out / "claims.csv", pd.DataFrame(rows).to_csv(index=False))
    write_json(out / "claims.json", rows)
    return claims, figures, to_jsonable(described)


def verdict_counts(claims: list[Claim]) -> dict[str, int]:
    """How many claims got each verdict, in the order of ``VERDICTS``."""
    counts = {v: sum(1 for c in claims if c.verdict == v) for v in VERDICTS}
    return {v: n for v, n in counts.items() if n}
