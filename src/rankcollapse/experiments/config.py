"""Experiment configs: one YAML file per experiment in ``experiments/configs/``, with profiles.

A config file holds::

    name: fig2_random            # the --only name
    title: one line for the report
    task: simulate               # a task of experiments/tasks.py
    base: {...}                  # settings shared by every run (the full-scale defaults)
    grid: {axis: [values], ...}  # one run per point of the Cartesian product
    verdict: {...}               # thresholds of the claim rules (docs/reproduce.md)
    profiles:                    # overrides; "full" is base + grid as written
      quick: {base: {...}, grid: {...}}
      tiny: {...}

A profile's ``base`` keys replace base keys; its ``grid`` axes replace whole axes (an axis set to
``null`` is dropped). Every default is in the YAML, commented; nothing is hidden in code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.sweep import RunSpec, make_runs

PROFILES = ("quick", "full", "tiny")


@dataclass
class Experiment:
    """One experiment resolved for one profile."""

    name: str
    title: str
    task: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    verdict: dict[str, Any] = field(default_factory=dict)
    profile: str = "full"
    source: str = ""
    order: int = 0

    def runs(self) -> list[RunSpec]:
        return make_runs(self.name, self.task, self.base, self.grid)

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


def config_dir() -> Path:
    """The folder of the bundled experiment configs."""
    return Path(str(resources.files("rankcollapse.experiments") / "configs"))


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


def load_experiment(path: str | Path, profile: str = "full") -> Experiment:
    """Read one config file and apply ``profile`` (RankCollapseError on a malformed file)."""
    if profile not in PROFILES:
        raise RankCollapseError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise RankCollapseError(f"cannot read experiment config {path}: {err}") from err
    missing = [k for k in ("name", "title", "task") if not isinstance(raw, dict) or k not in raw]
    if missing:
        raise RankCollapseError(f"experiment config {path} lacks {', '.join(missing)}")
    base, grid = _apply_profile(raw, profile)
    return Experiment(
        name=raw["name"],
        title=raw["title"],
        task=raw["task"],
        base=base,
        grid=grid,
        verdict=dict(raw.get("verdict") or {}),
        profile=profile,
        source=path.name,
        order=int(raw.get("order", 100)),
    )


def load_experiments(
    profile: str = "full", only: list[str] | None = None, folder: str | Path | None = None
) -> list[Experiment]:
    """All configs in ``folder`` (default: the bundled ones) in report order; ``only`` filters by name."""
    folder = Path(folder) if folder else config_dir()
    if not folder.is_dir() or not any(folder.glob("*.yaml")):
        raise RankCollapseError(f"no experiment configs (*.yaml) in {folder}")
    exps = sorted(
        (load_experiment(p, profile) for p in folder.glob("*.yaml")), key=lambda e: (e.order, e.name)
    )
    if only:
        names = [e.name for e in exps]
        unknown = [o for o in only if o not in names]
        if unknown:
            raise RankCollapseError(f"unknown experiment {unknown[0]!r}; allowed: {', '.join(names)}")
        exps = [e for e in exps if e.name in only]
    return exps
