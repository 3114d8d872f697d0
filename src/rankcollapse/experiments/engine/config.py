"""Experiment configs: one YAML file per experiment, with profiles.

A config file holds::

    name: fig2_random            # optional; must equal the file stem (the --only name)
    title: one line for the report
    task: simulate               # the task's name (optional where a story supplies the task)
    base: {...}                  # settings shared by every run (the full-scale defaults)
    grid: {axis: [values], ...}  # one run per point of the Cartesian product
    verdict: {...}               # thresholds of the claim rules
    profiles:                    # overrides; "full" is base + grid as written
      quick: {base: {...}, grid: {...}}
      tiny: {...}

A profile's ``base`` keys replace base keys; its ``grid`` axes replace whole axes (an axis set to
``null`` is dropped). Every default is in the YAML, commented; nothing is hidden in code.
This module knows nothing about the paper: it turns a file into an :class:`Experiment`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.grid import RunSpec, make_runs

PROFILES = ("quick", "full", "tiny", "paper")


@dataclass
class Experiment:
    """One experiment resolved for one profile: ``runs()`` expands its grid."""

    name: str
    title: str
    task: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    verdict: dict[str, Any] = field(default_factory=dict)
    profile: str = "full"
    source: str = ""
    order: int = 0
    target: str = ""  # "module:function" of the task callable (not part of a run's identity)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise RankCollapseError(f"experiment name must be a non-empty string, got {self.name!r}")
        if self.profile not in PROFILES:
            raise RankCollapseError(f"unknown profile {self.profile!r}; allowed: {', '.join(PROFILES)}")
        for label, value in (("base", self.base), ("grid", self.grid), ("verdict", self.verdict)):
            if not isinstance(value, dict):
                msg = f"experiment {self.name}: {label} must be a mapping, got {value!r}"
                raise RankCollapseError(msg[:200])

    def runs(self) -> list[RunSpec]:
        """One :class:`RunSpec` per grid point; a task with ``identity_facts(params)`` adds those
        facts to each run's identity."""
        facts = None
        if self.target:
            from rankcollapse.experiments.engine.tasks import resolve_target

            facts = getattr(resolve_target(self.target, self.task), "identity_facts", None)
        return make_runs(self.name, self.task, self.base, self.grid, target=self.target, facts=facts)

    def describe(self) -> dict[str, Any]:
        """JSON-able settings, for the report and ``experiments.json``."""
        return {
            "name": self.name,
            "title": self.title,
            "task": self.task,
            "profile": self.profile,
            "base": self.base,
            "grid": self.grid,
            "verdict": self.verdict,
            "source": self.source,
        }


def _apply_profile(raw: dict[str, Any], profile: str) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    base = copy.deepcopy(raw.get("base") or {})
    grid = copy.deepcopy(raw.get("grid") or {})
    if profile != "full":
        override = (raw.get("profiles") or {}).get(profile) or {}
        base.update(override.get("base") or {})
        for axis, values in (override.get("grid") or {}).items():
            if values is None:
                grid.pop(axis, None)
            else:
                grid[axis] = values
    return base, grid


def load_experiment(
    path: str | Path, profile: str = "full", *, task: str | None = None, target: str = ""
) -> Experiment:
    """Read one config file and apply ``profile`` (RankCollapseError on a malformed file).

    ``task``: the task name a story supplies (then the file may omit ``task:``; if it names one,
    it must agree). ``target``: where workers find the task callable (``module:function``).
    """
    if profile not in PROFILES:
        raise RankCollapseError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise RankCollapseError(f"cannot read experiment config {path}: {err}"[:300]) from err
    if not isinstance(raw, dict):
        raise RankCollapseError(f"experiment config {path} is not a mapping")
    name = raw.get("name", path.stem)
    if name != path.stem:
        raise RankCollapseError(f"experiment config {path}: name {name!r} must equal the file stem")
    if task is not None and raw.get("task", task) != task:
        raise RankCollapseError(f"experiment config {path}: task {raw['task']!r} but its story runs {task!r}")
    missing = [k for k in ("title",) if k not in raw] + ([] if task or "task" in raw else ["task"])
    if missing:
        raise RankCollapseError(f"experiment config {path} lacks {', '.join(missing)}")
    base, grid = _apply_profile(raw, profile)
    return Experiment(
        name=name,
        title=raw["title"],
        task=task or raw["task"],
        base=base,
        grid=grid,
        verdict=dict(raw.get("verdict") or {}),
        profile=profile,
        source=path.name,
        order=int(raw.get("order", 100)),
        target=target,
    )


def select(experiments: list[Experiment], only: list[str] | None) -> list[Experiment]:
    """Experiments in report order ``(order, name)``; ``only`` keeps those names (unknown: error)."""
    exps = sorted(experiments, key=lambda e: (e.order, e.name))
    if only is not None:
        if not only:
            raise RankCollapseError("--only needs at least one experiment name; see --list")
        names = [e.name for e in exps]
        unknown = [o for o in only if o not in names]
        if unknown:
            raise RankCollapseError(f"unknown experiment {unknown[0][:60]!r}; allowed: {', '.join(names)}")
        exps = [e for e in exps if e.name in only]
    return exps
