"""Sequential sampling for ``reproduce --until-decided``: more seeds where the sample decides nothing yet.

**The scheme** (a fixed doubling schedule with a Bonferroni-adjusted critical value):

- look 1 judges the profile's own grid, ``n0`` samples per condition;
- after each look, every *undecided* row (``Claim.undecided``: an interval that straddles its
  threshold, or fewer than ``min_samples``) whose arm has a ``seed`` axis gets its conditions' seeds
  doubled (new seeds are new runs, so identity, resume and the one-writer lock stay as they are),
  restricted to the grid values the row's runs share (``Claim.axes``, e.g. one model);
- a row's ``n`` goes ``n0, 2 n0, 4 n0, ...`` and never past ``max_samples``, so it is looked at at most
  ``K = 1 + floor(log2(max_samples / n0))`` times; ``K`` is fixed per story from the design (the
  smallest ``n0`` of its rows) before any verdict is read;
- every look judges every interval at level ``ALPHA / K`` (``kit.curves.looks``: the Student t
  quantile ``t(1 - ALPHA / (2 K), n - 1)``). The chance that *any* of a row's looks decides wrongly is
  then at most ``K * ALPHA / K = ALPHA`` (Bonferroni), whichever look the sampling stops at;
  ``tests/pipeline/test_sequential.py`` checks it with synthetic data whose true value sits on the
  threshold, against the naive scheme (``z = 2`` at every look), which it shows inflated.

A row stops sampling when it is decided, when doubling would pass ``max_samples`` (the cap), when the
next look's runs would not fit in the ``budget`` (estimated by ``engine.costs.RunCost``: the tasks'
per-layer costs calibrated on the runs the folder measured so far), or when its arm has no seed axis
(its sample is fixed by the design); its ``sampling`` field says which.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.messages import say
from rankcollapse.edge.progress import duration_text
from rankcollapse.edge.validate import quote
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.engine.config import Experiment
from rankcollapse.experiments.engine.costs import RunCost
from rankcollapse.experiments.engine.grid import RunSpec, canonical_json

#: ``--max-samples`` when not given: per condition, about a third of the paper's 3000 (enough to
#: decide a log-rate gap of a tenth of the spread of one sample at the t interval).
DEFAULT_MAX_SAMPLES = 1024


def looks_for(n0: int, max_samples: int) -> int:
    """``K = 1 + floor(log2(max_samples / n0))``: the looks a doubling schedule from ``n0`` can take
    without passing ``max_samples`` (1 when ``n0 >= max_samples``)."""
    if n0 < 1 or max_samples < 1:
        raise RankCollapseError(f"need n0 >= 1 and max_samples >= 1, got {n0}, {max_samples}")
    k = 1
    while n0 * 2**k <= max_samples:
        k += 1
    return k


_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)\s*s)?\s*$"
)


def parse_duration(text: str, option: str = "--budget") -> float:
    """Seconds in ``"3h"``, ``"90m"``, ``"2h30m"``, ``"45s"`` or a plain number of seconds (one line,
    RankCollapseError, for anything else or a duration that is not positive)."""
    raw = str(text).strip()
    try:
        seconds = float(raw)
    except ValueError:
        m = _DURATION.match(raw)
        if not raw or m is None or not any(m.groups()):
            raise RankCollapseError(
                f"{option} {quote(raw, 40)} is not a duration; e.g. 3h, 90m, 2h30m, 45s or seconds"
            ) from None
        h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        seconds = 3600 * h + 60 * mi + s
    if not (math.isfinite(seconds) and seconds > 0):
        raise RankCollapseError(f"{option} must be a positive duration, got {quote(raw, 40)}")
    return seconds


def check_sequential(until_decided: bool, max_samples: int | None, budget_s: float | None) -> None:
    """Refuse options that do not apply (one line each)."""
    if not until_decided:
        for name, value in (("--max-samples", max_samples), ("--budget", budget_s)):
            if value is not None:
                raise RankCollapseError(f"{name} applies only with --until-decided")
    if max_samples is not None and (
        isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 1
    ):
        raise RankCollapseError(f"--max-samples must be a positive integer, got {max_samples!r}")
    if budget_s is not None and not (
        isinstance(budget_s, int | float) and math.isfinite(budget_s) and budget_s > 0
    ):
        raise RankCollapseError(f"--budget must be a positive number of seconds, got {budget_s!r}")


@dataclass
class Extension:
    """More seeds for one row's conditions: the runs to add, and what they cost (estimated)."""

    claim: str
    experiment: str
    runs: list[RunSpec]
    n_after: int
    cost_s: float


@dataclass
class Look:
    """One look: the rows undecided before it, the runs it added and how long they took."""

    look: int
    undecided: int
    rows_extended: int
    runs_added: int
    estimated_s: float
    wall_s: float


@dataclass
class Sampling:
    """What a sequential run did: the looks per story, why each row stopped, the looks' log."""

    max_samples: int
    budget_s: float | None
    looks: dict[str, int] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)
    history: list[Look] = field(default_factory=list)
    first_n: dict[str, int | None] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """JSON-able, for ``experiments.json`` and the report."""
        return {
            "scheme": "doubling schedule, Bonferroni over K looks per story (level ALPHA / K per look)",
            "max_samples": self.max_samples,
            "budget_s": self.budget_s,
            "looks_per_story": self.looks,
            "history": [vars(h) for h in self.history],
        }


def story_looks(claims: list[Claim], max_samples: int) -> dict[str, int]:
    """K per story, from the smallest ``n`` of its rows at the first look (1 for a story without n)."""
    out: dict[str, int] = {}
    for c in claims:
        if c.n is not None and c.n >= 1:
            out[c.story] = max(out.get(c.story, 1), looks_for(int(c.n), max_samples))
        else:
            out.setdefault(c.story, 1)
    return out


def _axis_value(values: list[Any], seen: Any) -> tuple[bool, Any]:
    """The grid value a table cell holds (lists are stored as canonical JSON in the table)."""
    for v in values:
        if v == seen or (isinstance(v, list | dict) and canonical_json(v) == seen):
            return True, v
    return False, None


def extension(
    c: Claim, exp: Experiment, max_samples: int, cost: Callable[[RunSpec], float | None] | None = None
) -> Extension | str:
    """The runs that double ``c``'s sample, or why it cannot be extended. ``cost``: a run's estimated
    seconds (default the task's own, ``exp.cost_s``; ``reproduce`` gives ``engine.costs.RunCost``)."""
    grid = exp.grid
    if grid is None or "seed" not in grid:
        return f"fixed sample: arm {exp.arm or exp.name} has no seed axis (its n is set by the design)"
    if c.n is None or c.n < 1:
        return "no sample size: the row is a check, not an estimate"
    if 2 * c.n > max_samples:
        return f"cap: n = {c.n}; doubling would pass --max-samples {max_samples}"
    seeds = sorted(c.seeds) or sorted(int(s) for s in grid["seed"])
    start = max(seeds) + 1
    new_grid = dict(grid)
    new_grid["seed"] = list(range(start, start + len(seeds)))
    for axis, seen in c.axes.items():
        if axis in new_grid:
            ok, value = _axis_value(list(new_grid[axis]), seen)
            if ok:
                new_grid[axis] = [value]
    runs = replace(exp, grid=new_grid).runs()
    estimate = cost or exp.cost_s
    return Extension(c.id, exp.name, runs, 2 * int(c.n), sum(estimate(s) or 0.0 for s in runs))


def plan(
    claims: list[Claim],
    experiments: dict[str, Experiment],
    max_samples: int,
    known: set[str],
    left_s: float | None,
    wall_factor: float,
    finished: Callable[[RunSpec], bool] = lambda spec: False,
    cost: Callable[[RunSpec], float | None] | None = None,
) -> tuple[list[RunSpec], list[str], dict[str, str], float]:
    """The next look: (new runs, rows extended, stop reasons of the undecided rows left out, est. wall s).

    Rows are taken cheapest first while the estimated wall time ``wall_factor * cost`` of the runs
    added so far fits in ``left_s`` (None: no budget); runs two rows share are counted once, runs
    already ``finished`` in the folder (a resumed call) cost nothing, so a rerun replays its looks.
    ``cost``: a run's estimated seconds (default its task's ``cost_s``)."""
    reasons: dict[str, str] = {}
    options: list[Extension] = []
    for c in claims:
        if not c.undecided:
            continue
        exp = experiments.get(c.experiment)
        if exp is None:
            reasons[c.id] = "no arm to extend"
            continue
        got = extension(c, exp, max_samples, cost)
        if isinstance(got, str):
            reasons[c.id] = got
        else:
            options.append(got)
    options.sort(key=lambda e: e.cost_s)
    chosen: dict[str, RunSpec] = {}
    rows: list[str] = []
    spent = 0.0
    for ext in options:
        new = [s for s in ext.runs if s.run_id not in known and s.run_id not in chosen]
        todo = [s for s in new if not finished(s)]
        estimate = cost or experiments[ext.experiment].cost_s
        wall = wall_factor * sum(estimate(s) or 0.0 for s in todo)
        if left_s is not None and wall > 0 and spent + wall > left_s:
            room = f"would not fit in the {duration_text(left_s)} left" if left_s >= 1 else "found it spent"
            reasons[ext.claim] = f"budget: the next look's runs (about {duration_text(spent + wall)}) {room}"
            continue
        spent += wall
        rows.append(ext.claim)
        for s in new:
            chosen[s.run_id] = s
    return list(chosen.values()), rows, reasons, spent


def run_sequential(
    specs: list[RunSpec],
    experiments: list[Experiment],
    judge: Callable[[list[RunSpec]], list[Claim]],
    sweep: Callable[[list[RunSpec], str], Any],
    *,
    max_samples: int,
    budget_s: float | None,
    started: float,
    wall_factor: float,
    set_looks: Callable[[dict[str, int]], None],
    finished: Callable[[RunSpec], bool] = lambda spec: False,
    cost: RunCost | None = None,
) -> tuple[list[RunSpec], Sampling]:
    """Look, extend the undecided rows, sweep the new runs, look again (see the module docstring).

    ``specs``: the profile's runs, already swept. ``judge(specs)``: the rows on those runs at the looks
    ``set_looks`` fixed. ``sweep(new, label)``: run and store new runs. ``started``: the call's start
    (``time.perf_counter()``), against which ``budget_s`` is spent; ``finished(spec)``: the run is
    already in the folder (it costs no budget: the same command resumes, and replays the looks of an
    earlier call before it adds any). ``cost``: the runs' estimated seconds, calibrated again before
    each look on the runs measured so far (:class:`~rankcollapse.experiments.engine.costs.RunCost`;
    None: the tasks' own). Returns every run and the log."""
    by_name = {e.name: e for e in experiments}
    sampling = Sampling(max_samples, budget_s)
    claims = judge(specs)  # n is set by the design: K can be fixed from it before any verdict counts
    sampling.looks = story_looks(claims, max_samples)
    sampling.first_n = {c.id: c.n for c in claims}
    set_looks(sampling.looks)
    claims = judge(specs)
    known = {s.run_id for s in specs}
    last = max(sampling.looks.values(), default=1)
    look = 1
    while look < last:
        left = None if budget_s is None else budget_s - (time.perf_counter() - started)
        calibrated = cost.refresh() if cost is not None else None
        new, rows, reasons, estimate = plan(
            claims, by_name, max_samples, known, left, wall_factor, finished, calibrated
        )
        sampling.stopped.update(reasons)
        undecided = sum(1 for c in claims if c.undecided)
        if not new:
            break
        say(f"look {look + 1} of {last}: {undecided} rows undecided; more seeds for {len(rows)} of them "
            f"({len(new)} runs, about {estimate / 60:.1f} min)")
        t0 = time.perf_counter()
        sweep(new, f"look {look + 1} of {last}")
        known.update(s.run_id for s in new)
        specs = specs + new
        sampling.history.append(
            Look(
                look + 1,
                undecided,
                len(rows),
                len(new),
                round(estimate, 1),
                round(time.perf_counter() - t0, 1),
            )
        )
        for cid in rows:
            sampling.stopped.pop(cid, None)
        claims = judge(specs)
        look += 1
    for c in claims:  # the rows still open after the last look: the cap, or no seed axis, says why
        if c.undecided and not sampling.stopped.get(c.id) and c.experiment in by_name:
            got = extension(c, by_name[c.experiment], max_samples, cost)
            sampling.stopped[c.id] = (
                got if isinstance(got, str) else f"the last planned look ({last}) reached"
            )
        sampling.stopped.setdefault(c.id, "")
    return specs, sampling


def stop_reason(c: Claim, sampling: Sampling) -> str:
    """The row's ``sampling`` words: decided at which look and n, or why its sampling stopped."""
    k = sampling.looks.get(c.story, 1)
    first = sampling.first_n.get(c.id)
    grew = first is not None and c.n is not None and c.n > first
    why = sampling.stopped.get(c.id, "")
    if c.verdict_class == "untested":
        return "untested: the paper's weights are not here, so no sample of ours can decide it"
    if not c.undecided and c.verdict_class == "inconclusive":
        return f"n = {c.n}: inconclusive for a reason more samples do not change ({c.cause_kind})"
    if not c.undecided:
        if grew:
            return f"decided at n = {c.n} (first look n = {first}; {k} looks planned)"
        return f"decided at the first look (n = {c.n}; {k} looks planned)" if c.n is not None else ""
    at = f"undecided at {c.n} {c.unit}" if c.n is not None else "undecided"
    return f"{at}: {why or f'the last planned look ({k}) reached'}"
