"""What a run costs, calibrated on the runs a folder already measured.

A task's ``cost_s(params)`` is a model with constants measured once on the idle reference machine
(``kit.tasks.curves.LAYER_SAMPLE_S``: BERT-base-sized layers, one thread). On a loaded machine, for other
model sizes, or where a run's fixed cost (loading, drawing a model) dominates, it is far below the
seconds runs take: one 2-sample ``model_curves`` run each of random BERT-base, random GPT-2, SmolLM2,
MiniLM and random T5-base took 10.6, 3.7, 4.8, 1.9 and 5.7x its estimate at load 12 (the issue saw
10-19x), while a whole quick profile on an idle machine took 0.6-0.7x. :class:`RunCost` multiplies it
by the factor measured in the folder itself::

    factor = sum(measured wall_s) / sum(cost_s)   over the finished runs in the folder

of the run's own experiment when it has :data:`MIN_CALIBRATION_RUNS` finished runs, else of its task,
else :data:`UNMEASURED_FACTOR`. Predicting every other run of a folder from the rest
(``benchmarks/bench_estimates.py``), the calibrated total is within 1.00-1.26x of the measured one (the
tasks' own: 0.62-1.23x; per task 0.44-2.89x before, 0.92-1.34x after). Measured seconds include any
slowdown of parallel workers, so the wall-time line's ``PARALLEL_SLOWDOWN`` may count it twice: an
estimate high by at most that. The factor is read again by :meth:`RunCost.refresh` (each look of
``reproduce --until-decided`` refreshes it, so the budget is spent at the cost the sweep is measuring).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.engine.grid import RunSpec
from rankcollapse.experiments.engine.store import RunStore

#: Finished runs an experiment (else its task) needs before its own measured factor is used.
MIN_CALIBRATION_RUNS = 2
#: The factor of a run whose experiment and task have no finished run in the folder yet: measured on
#: this project's 2-core machine over the 903 runs of ``reproduce --full --until-decided``
#: (/work/results_full, 2026-12-03, load 6-12): 15,822 s measured against 12,879 s estimated, 1.23; the
#: quick profile on an idle machine measured 0.61-0.71 (``benchmarks/bench_estimates.py``). The larger
#: is taken: an estimate too high stops a budgeted look early, one too low overruns the budget.
UNMEASURED_FACTOR = 1.25


#: Per-run slowdown of parallel local workers sharing the cores (memory bandwidth), measured: the
#: paper runs of ``reproduce --full`` on 2 workers and 2 cores took 1.19-1.41x (mean 1.35x) their
#: one-process estimates (2026-12-01, docs/measurements.md).
PARALLEL_SLOWDOWN = 1.35


def wall_seconds(cpu_s: float, workers: int) -> float:
    """The wall time of runs estimated at ``cpu_s`` seconds (one process each) on ``workers`` workers:
    ``PARALLEL_SLOWDOWN * cpu_s / w`` for ``w > 1``, ``cpu_s`` on one. The one figure the pre-sweep line
    prints and the sweep's time left starts from (``engine.progress``)."""
    w = max(int(workers), 1)
    return cpu_s * (PARALLEL_SLOWDOWN if w > 1 else 1.0) / w


class _Experiment(Protocol):
    def cost_s(self, spec: RunSpec) -> float | None: ...


@dataclass
class Calibration:
    """Measured over estimated seconds of a folder's finished runs, per experiment and per task, with the
    number of runs behind each factor."""

    by_experiment: dict[str, tuple[float, int]] = field(default_factory=dict)
    by_task: dict[str, tuple[float, int]] = field(default_factory=dict)

    def factor(self, spec: RunSpec) -> tuple[float, str]:
        """``(factor, source)`` for ``spec``: its experiment's, else its task's, else
        :data:`UNMEASURED_FACTOR`; ``source`` says which (``experiment``, ``task``, ``unmeasured``)."""
        for source, table, key in (("experiment", self.by_experiment, spec.experiment),
                                   ("task", self.by_task, spec.task)):
            ratio, runs = table.get(key, (0.0, 0))
            if runs >= MIN_CALIBRATION_RUNS and ratio > 0:
                return ratio, source
        return UNMEASURED_FACTOR, "unmeasured"


def calibrate(store: RunStore, experiments: Mapping[str, _Experiment]) -> Calibration:
    """The factors of :class:`Calibration` from ``store``'s finished runs of ``experiments`` (a run whose
    task gives no estimate, or whose estimate is 0, is left out)."""
    sums: dict[tuple[str, str], list[float]] = {}
    for rec in store.records():
        exp = experiments.get(str(rec["experiment"]))
        wall = rec.get("wall_s")
        if exp is None or rec.get("status") != "ok" or not isinstance(wall, int | float) or wall < 0:
            continue
        spec = RunSpec(str(rec["experiment"]), str(rec["task"]), rec["params"], run_id=str(rec["run_id"]))
        try:
            estimate = exp.cost_s(spec)
        except RankCollapseError:
            continue
        if not estimate:
            continue
        for key in (("experiment", spec.experiment), ("task", spec.task)):
            acc = sums.setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += float(wall)
            acc[1] += float(estimate)
            acc[2] += 1
    out = Calibration()
    for (kind, name), (measured, estimated, runs) in sums.items():
        table = out.by_experiment if kind == "experiment" else out.by_task
        table[name] = (measured / estimated, int(runs))
    return out


class RunCost:
    """Estimated seconds of one run (one process): the task's ``cost_s`` times the folder's measured
    factor (module docstring). ``RunCost(experiments, store)(spec)``; None where the task gives no
    estimate or the run's experiment is not among ``experiments``."""

    def __init__(self, experiments: Mapping[str, _Experiment], store: RunStore | None = None) -> None:
        self.experiments = experiments
        self.store = store
        self.calibration = Calibration()
        self.refresh()

    def refresh(self) -> RunCost:
        """Read the factors again from the folder's finished runs (runs stored since count)."""
        if self.store is not None:
            self.calibration = calibrate(self.store, self.experiments)
        return self

    def task_estimate(self, spec: RunSpec) -> float | None:
        """The task's own estimate, uncalibrated."""
        exp = self.experiments.get(spec.experiment)
        return exp.cost_s(spec) if exp is not None else None

    def __call__(self, spec: RunSpec) -> float | None:
        estimate = self.task_estimate(spec)
        return None if estimate is None else estimate * self.calibration.factor(spec)[0]

    def describe(self, specs: list[RunSpec]) -> str:
        """How the estimate of ``specs`` was calibrated, for the pre-sweep line."""
        sources = [self.calibration.factor(s) for s in specs if self.task_estimate(s) is not None]
        measured = [f for f, src in sources if src != "unmeasured"]
        if not measured:
            return f"no run measured here yet: the tasks' per-layer costs x {UNMEASURED_FACTOR:g}"
        runs = sum(n for _, n in self.calibration.by_task.values())
        share = f"{len(measured)} of {len(sources)}" if len(measured) < len(sources) else "all"
        return (f"calibrated on the {runs} runs measured in this folder ({share} runs, x{min(measured):.2g}"
                f"-{max(measured):.2g} the tasks' per-layer costs)")
