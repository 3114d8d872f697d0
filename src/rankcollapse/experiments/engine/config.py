"""Experiment configs: one YAML file per story (one or more arms) or per custom sweep, with profiles.

A story's file (``stories/<name>.yaml``) holds::

    title: one line for the report section
    verdict: {...}               # every threshold of the story's rules (no defaults in code)
    ranges: {name: [lo, hi]}     # the documented range of a threshold: rows say if they depend on it
    arms:                        # one experiment per arm, e.g. the paper's setting and ours
      paper:
        title: one line
        base: {...}              # settings shared by every run (the full-scale defaults)
        grid: {axis: [values]}   # one run per point of the Cartesian product
        profiles:                # overrides; "full" is base + grid as written
          quick: {base: {...}, grid: {...}}
          tiny: {skip: true}     # this arm has no runs in this profile
      extra:
        opt_in: true             # runs only when asked for: --profile paper, or --only <story>.extra

An ``opt_in`` arm (e.g. one measuring the models of ``make models-extra``) never runs in a default call:
its grid is skipped unless the profile is ``paper`` or ``--only`` names the arm itself (``<story>.<arm>``;
the story's name alone leaves it out), :func:`select`.

A custom sweep (``--config-dir``) is one experiment: ``title``, ``task`` (a task's name), ``base``,
``grid``, ``verdict``, ``profiles`` at the top level. A profile's ``base`` keys replace base keys;
its ``grid`` axes replace whole axes (an axis set to ``null`` is dropped). Every default is in the
YAML, commented; nothing is hidden in code. This module knows nothing about the paper.

One schema (:data:`CUSTOM_KEYS`, :data:`STORY_KEYS`, :data:`ARM_KEYS`, :data:`PROFILE_KEYS`, the profile
names but ``full``): a key outside it is one line naming it, before anything runs (``grd:`` for ``grid:``
was ignored and ran one point). An experiment's name, a folder under ``runs/``, is a plain name (a file
``...yaml`` named ``..`` wrote its records at the top of ``--out``).

``batch_size`` in a (profile's) ``base`` is an execution setting, not a parameter: how many samples
go through a model at a time. It is taken out of the params (a run's identity does not depend on
it) into ``Experiment.execution`` and every run's ``RunSpec.execution``; it may not be a grid axis.

Names at the boundary: a config keeps the keys a run's identity hashes (a story's YAML says ``n`` for the
tokens, ``batch`` for the samples, ``preset`` for the block, ``steps`` for an iterated map's depth), but
an :class:`Experiment`'s ``base`` and ``grid`` are under the names table's names (``core.names``): each
stored key of a quantity its task names (``Task.names``: per task, since ``steps`` is a depth in one task
and the optimiser's steps in another) is renamed when the experiment is made, and ``Experiment.stored``
remembers the key written, so :meth:`Experiment.runs` hashes the params as stored (run ids and resumed
folders unchanged) and :meth:`Experiment.describe` shows the config as written. Stories and tasks read
the table's names only.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rankcollapse.core.names import from_stored, stored_names
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.experiments.engine.grid import RunSpec, make_runs
from rankcollapse.experiments.engine.tasks import Task

PROFILES = ("quick", "full", "tiny", "paper")
#: An experiment's name (a folder under ``runs/``): no path separator, never ``.``, ``..`` or hidden.
_PLAIN_NAME = re.compile(r"[^\W][\w.+-]*")

#: The one YAML schema: the keys each level of a config may hold (module docstring). A key outside it
#: (``grd:`` for ``grid:``, ``profiles: {quik: ...}``) is one line naming it and what is allowed, before
#: anything runs: it was ignored, and the sweep ran a config the user did not write.
CUSTOM_KEYS = ("name", "title", "task", "base", "grid", "verdict", "profiles")
STORY_KEYS = ("title", "verdict", "ranges", "arms")
ARM_KEYS = ("title", "base", "grid", "profiles", "opt_in")
PROFILE_KEYS = ("base", "grid", "skip")
#: The profiles a config's ``profiles`` may override (``full`` is base + grid as written: no override).
OVERRIDDEN = tuple(p for p in PROFILES if p != "full")


def check_keys(raw: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """One line for the first key of ``raw`` that ``allowed`` does not name (the YAML schema)."""
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        raise RankCollapseError(f"{where}: unknown key {quote(unknown[0])}; allowed: {', '.join(allowed)}")


@dataclass
class Experiment:
    """One experiment resolved for one profile: ``runs()`` expands its grid."""

    name: str
    title: str
    task: str
    base: dict[str, Any]
    grid: dict[str, list[Any]] | None  # None: an arm skipped in this profile
    verdict: dict[str, Any] = field(default_factory=dict)
    profile: str = "full"
    source: str = ""
    target: str = ""  # "module:function" of the task callable (not part of a run's identity)
    story: str = ""  # the story this experiment is an arm of ("" for a custom sweep)
    story_title: str = ""  # the story's title (its report section)
    arm: str = ""
    extension: bool = False  # an arm in our own setting: its rows are extensions
    opt_in: bool = False  # runs only under the paper profile or when --only names it (:func:`select`)
    ranges: dict[str, Any] = field(default_factory=dict)
    task_info: Task | None = field(default=None, compare=False, repr=False)
    execution: dict[str, Any] = field(default_factory=dict)  # RunSpec.execution of every run
    #: table name -> the key the config stores it under (module docstring): filled when the experiment is
    #: made, from its task's ``names``; ``base`` and ``grid`` hold the table's names.
    stored: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise RankCollapseError(f"experiment name must be a non-empty string, got {self.name!r}")
        if not _PLAIN_NAME.fullmatch(self.name):  # its records go to runs/<name>/: never out of runs/
            raise RankCollapseError(
                f"experiment name {quote(self.name)} (from {self.source or 'its config'}) is not a plain "
                "name; allowed: letters, digits and _ . + - (not first: a dot), e.g. a file my_sweep.yaml"
            )
        if self.profile not in PROFILES:
            raise RankCollapseError(f"unknown profile {self.profile!r}; allowed: {', '.join(PROFILES)}")
        for label, value in (("base", self.base), ("grid", self.grid or {}), ("verdict", self.verdict)):
            if not isinstance(value, dict):
                msg = f"experiment {self.name}: {label} must be a mapping, got {value!r}"
                raise RankCollapseError(msg[:200])
        self._name_params()

    @property
    def names(self) -> tuple[str, ...]:
        """The quantities whose stored keys this experiment's params may use: its task's ``names``
        (none without a task)."""
        return self.task_info.names if self.task_info is not None else ()

    def _name_params(self) -> None:
        """``base`` and ``grid`` under the table's names, the stored keys kept in ``stored`` (module
        docstring); a config giving a quantity under both spellings is one line. Idempotent: an
        experiment copied by ``dataclasses.replace`` keeps its names."""
        try:
            renames = stored_names([*self.base, *(self.grid or {})], self.names)
        except RankCollapseError as err:
            raise RankCollapseError(f"{self.source or self.name}, {self.name}: {err}") from None
        if not renames:
            return
        self.base = {renames.get(k, k): v for k, v in self.base.items()}
        if self.grid is not None:
            self.grid = {renames.get(k, k): v for k, v in self.grid.items()}
        self.stored = {**self.stored, **{name: old for old, name in renames.items()}}

    def as_stored(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """``params`` (``base`` or ``grid``) under the keys the config wrote."""
        return None if params is None else {self.stored.get(k, k): v for k, v in params.items()}

    def runs(self) -> list[RunSpec]:
        """One :class:`RunSpec` per grid point; a task with ``identity_facts`` adds those facts to
        each run's identity. An arm skipped in this profile has none."""
        if self.grid is None:
            return []
        facts = self.task_info.identity_facts if self.task_info is not None else None
        return make_runs(
            self.name,
            self.task,
            self.base,
            self.grid,
            target=self.target,
            facts=facts,
            execution=self.execution,
            names=self.names,
            stored=self.stored,
        )

    def cost_s(self, spec: RunSpec) -> float | None:
        """The task's estimate of one run's seconds (None: the task gives none): a finite number >= 0,
        else one line naming the config file, the run's parameters and what is wrong with them (a
        parameter missing, of the wrong type, or so large the estimate is not a number). The estimate
        reads the params under the table's names; the line names each as the config wrote it."""
        if self.task_info is None or self.task_info.cost_s is None:
            return None
        where = f"{self.source or self.name}: the run {quote(spec.params, 120)}"
        written = {name: old for old, name in stored_names(spec.params, self.names).items()}
        try:
            cost = float(self.task_info.cost_s(from_stored(spec.params, self.names)))
        except RankCollapseError as err:
            line = str(err)
            for name, old in written.items():
                line = line.replace(f"parameter {name} ", f"parameter {old} ")
            raise RankCollapseError(f"{where}: {line}") from None
        except KeyError as err:
            key = written.get(err.args[0], err.args[0])
            raise RankCollapseError(f"{where} lacks parameter {key!r} the estimate of its "
                                    f"task {self.task!r} needs") from None
        except (TypeError, ValueError, ArithmeticError) as err:
            raise RankCollapseError(f"{where} has a parameter of a type or size the estimate of its task "
                                    f"{self.task!r} cannot use ({type(err).__name__})") from None
        if not (cost >= 0 and math.isfinite(cost)):
            raise RankCollapseError(f"{where} is estimated to take {cost:g} s; allowed: sizes whose "
                                    "estimate is a finite number of seconds")
        return cost

    def describe(self) -> dict[str, Any]:
        """JSON-able settings, for the report and ``experiments.json``."""
        return {
            "name": self.name,
            "title": self.title,
            "task": self.task,
            "profile": self.profile,
            "base": self.as_stored(self.base),  # as the config writes them
            "grid": self.as_stored(self.grid),
            "verdict": self.verdict,
            "ranges": self.ranges,
            "source": self.source,
            "story": self.story,
            "story_title": self.story_title,
            "arm": self.arm,
            "extension": self.extension,
            "opt_in": self.opt_in,
            "execution": self.execution,
        }


#: Keys of a (profile's) ``base`` that are execution settings, not parameters (module docstring).
EXECUTION_BASE_KEYS: tuple[str, ...] = ("batch_size",)


def split_execution(
    base: dict[str, Any], grid: dict[str, list[Any]] | None, where: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(params base, execution)``: the execution settings taken out of ``base`` (one-line errors for
    a bad batch size, or one given as a grid axis)."""
    from rankcollapse.core.execution import check_batch_size

    for key in EXECUTION_BASE_KEYS:
        if key in (grid or {}):
            raise RankCollapseError(
                f"{where}: {key} is an execution setting, not a grid axis; set it in base"
            )
    base = dict(base)
    execution = {k: base.pop(k) for k in EXECUTION_BASE_KEYS if k in base}
    if "batch_size" in execution:
        try:
            execution["batch_size"] = check_batch_size(execution["batch_size"])
        except RankCollapseError as err:
            raise RankCollapseError(f"{where}: {err}") from None
        if execution["batch_size"] is None:
            del execution["batch_size"]
    return base, execution


def _mapping(value: Any, where: str, key: str) -> dict[str, Any]:
    """``value`` (``key:`` of a config) if it is a mapping or absent (``{}``); one line else."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RankCollapseError(f"{where}: {key} must be a mapping (name: value), got {quote(value)}")
    return value


def _apply_profile(
    raw: dict[str, Any], profile: str, where: str = "experiment config"
) -> tuple[dict[str, Any], dict[str, list[Any]] | None]:
    """``(base, grid)`` of ``raw`` under ``profile`` (None grid: skipped); every part that must be a
    mapping (``base``, ``grid``, ``profiles``, a profile, its ``base`` and ``grid``) checked, one line."""
    base = copy.deepcopy(_mapping(raw.get("base"), where, "base"))
    grid = copy.deepcopy(_mapping(raw.get("grid"), where, "grid"))
    profiles = _mapping(raw.get("profiles"), where, "profiles")
    check_keys(profiles, OVERRIDDEN, f"{where}, profiles")
    for name, each in profiles.items():
        check_keys(_mapping(each, where, f"profiles.{name}"), PROFILE_KEYS, f"{where}, profiles.{name}")
    if profile != "full":
        override = _mapping(profiles.get(profile), where, f"profiles.{profile}")
        if override.get("skip"):
            return base, None
        base.update(_mapping(override.get("base"), where, f"profiles.{profile}.base"))
        for axis, values in _mapping(override.get("grid"), where, f"profiles.{profile}.grid").items():
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
    raw = read_config(path)
    if "arms" in raw:
        raise RankCollapseError(
            f"experiment config {path} has arms: it is a story's file, not a custom sweep"
        )
    check_keys(raw, CUSTOM_KEYS, f"experiment config {path}")
    name = raw.get("name", path.stem)
    if name != path.stem:
        raise RankCollapseError(f"experiment config {path}: name {name!r} must equal the file stem")
    if task is not None and raw.get("task", task) != task:
        raise RankCollapseError(f"experiment config {path}: task {raw['task']!r} but its story runs {task!r}")
    missing = [k for k in ("title",) if k not in raw] + ([] if task or "task" in raw else ["task"])
    if missing:
        raise RankCollapseError(f"experiment config {path} lacks {', '.join(missing)}")
    for key in ("title", "task"):
        if key in raw and not isinstance(raw[key], str):
            raise RankCollapseError(f"experiment config {path}: {key} must be a word, got {quote(raw[key])}")
    base, grid = _apply_profile(raw, profile, f"experiment config {path}")
    base, execution = split_execution(base, grid, f"experiment config {path}")
    return Experiment(
        name=name,
        title=raw["title"],
        task=task or raw["task"],
        base=base,
        grid=grid,
        verdict=dict(_mapping(raw.get("verdict"), f"experiment config {path}", "verdict")),
        profile=profile,
        source=path.name,
        target=target,
        execution=execution,
    )


def read_config(path: Path) -> dict[str, Any]:
    """The mapping in a YAML config file, read through the one input opener (``rankcollapse.edge.inputs``:
    bounded, never blocking, aliases bounded); RankCollapseError, one line, for anything else."""
    from rankcollapse.edge.inputs import read_yaml

    raw = read_yaml(path, "experiment config")
    if not isinstance(raw, dict):
        raise RankCollapseError(f"experiment config {path} is not a mapping")
    return raw


def load_arms(
    path: str | Path, profile: str, story: str, tasks: dict[str, tuple[Task, bool]]
) -> list[Experiment]:
    """The experiments of a story's file, one per arm, in the file's order (``<story>.<arm>``).

    ``tasks``: arm name -> (its task, extension?) as the story declares them; the file's ``arms``
    must name exactly those. The story's ``verdict`` and ``ranges`` apply to every arm.
    """
    if profile not in PROFILES:
        raise RankCollapseError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    path = Path(path)
    raw = read_config(path)
    arms = raw.get("arms")
    if not isinstance(arms, dict) or not arms:
        raise RankCollapseError(f"story config {path} needs an 'arms:' mapping (one entry per arm)")
    if set(arms) != set(tasks):
        raise RankCollapseError(
            f"story config {path}: arms {sorted(arms)} but the story declares {sorted(tasks)}"
        )
    check_keys(raw, STORY_KEYS, f"story config {path}")
    if "title" not in raw:
        raise RankCollapseError(f"story config {path} lacks title")
    verdict, ranges = dict(raw.get("verdict") or {}), dict(raw.get("ranges") or {})
    out = []
    for arm, spec in arms.items():
        if not isinstance(spec, dict):
            raise RankCollapseError(f"story config {path}: arm {arm!r} must be a mapping")
        check_keys(spec, ARM_KEYS, f"story config {path}, arm {arm}")
        task, extension = tasks[arm]
        opt_in = spec.get("opt_in", False)
        if not isinstance(opt_in, bool):
            raise RankCollapseError(f"story config {path}, arm {arm}: opt_in must be true or false, got "
                                    f"{quote(opt_in)}")
        base, grid = _apply_profile(spec, profile, f"story config {path}, arm {arm}")
        base, execution = split_execution(base, grid, f"story config {path}, arm {arm}")
        out.append(
            Experiment(
                name=f"{story}.{arm}",
                title=str(spec.get("title", raw["title"])),
                task=task.name,
                base=base,
                grid=grid,
                verdict=verdict,
                profile=profile,
                source=path.name,
                target=task.target,
                story=story,
                story_title=str(raw["title"]),
                arm=arm,
                extension=extension,
                opt_in=opt_in,
                ranges=ranges,
                task_info=task,
                execution=execution,
            )
        )
    return out


def names_of(experiments: list[Experiment]) -> dict[str, tuple[str, ...]]:
    """experiment -> the quantities its params and run files name (:attr:`Experiment.names`): what
    ``engine.store.collect_table`` and ``collect_index`` are told (``names=``) to give the tables under the
    names table's names, as stories read them."""
    return {e.name: e.names for e in experiments}


def select(
    experiments: list[Experiment], only: list[str] | None, order: list[str] | None = None
) -> list[Experiment]:
    """Experiments in report order: by ``order`` (story names, the paper's order), then by name;
    ``only`` keeps those stories (or ``<story>.<arm>`` experiments; unknown: error). An ``opt_in`` arm is
    kept with its grid skipped (no runs) unless its profile is ``paper`` or ``only`` names it."""
    rank = {name: i for i, name in enumerate(order or [])}
    exps = sorted(experiments, key=lambda e: (rank.get(e.story or e.name, len(rank)), e.story or e.name))
    if only is not None:
        if not only:
            raise RankCollapseError("--only needs at least one experiment name; see --list")
        names = list(dict.fromkeys([*(e.story or e.name for e in exps), *(e.name for e in exps if e.story)]))
        unknown = [o for o in only if o not in names]
        if unknown:
            raise RankCollapseError(f"unknown experiment {quote(unknown[0])}; allowed: {', '.join(names)}")
        exps = [e for e in exps if e.name in only or (e.story and e.story in only)]
    return [
        dataclasses.replace(e, grid=None)
        if e.opt_in and e.grid is not None and e.profile != "paper" and e.name not in (only or [])
        else e
        for e in exps
    ]
