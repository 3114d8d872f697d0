"""The story contract: one experiment = one module defining ``STORY`` + one YAML file beside it.

A story module ``rankcollapse/experiments/stories/<name>.py`` defines::

    STORY = Story(
        name="<name>",            # = the module and YAML stem, the --only name
        task=my_task,             # (params, on_layer) -> RunOutput, a top-level function
        claims=my_claims,         # (Data) -> list[Claim], see engine.verdicts
        figures=my_figures,       # (Data) -> list[FigureSpec]
    )

and ``stories/<name>.yaml`` holds its title, base settings, grid, verdict thresholds and profiles
(see ``engine.config``). The task's ``__name__`` is the task name recorded with every run (and
hashed into its identity); it must be importable by name, so process pools and Dask workers can
call it. Nothing else is registered anywhere: :func:`discover_stories` finds every module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, task_target
from rankcollapse.experiments.engine.verdicts import Claim, Data


@dataclass
class FigureSpec:
    """A drawn figure before saving: file stem, matplotlib figure, its data (saved as CSV), caption."""

    name: str
    figure: Any
    data: pd.DataFrame
    caption: str


TaskFn = Callable[[dict[str, Any], OnLayer], RunOutput]
ClaimsFn = Callable[[Data], list[Claim]]
FiguresFn = Callable[[Data], list[FigureSpec]]


def _no_figures(data: Data) -> list[FigureSpec]:
    return []


@dataclass(frozen=True)
class Story:
    """One experiment's task, claim rules and figures (its settings are in ``<name>.yaml``)."""

    name: str
    task: TaskFn
    claims: ClaimsFn
    figures: FiguresFn = _no_figures

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise RankCollapseError(f"story name {self.name!r} must be a Python identifier (the YAML stem)")
        for label in ("task", "claims", "figures"):
            if not callable(getattr(self, label)):
                raise RankCollapseError(f"story {self.name}: {label} must be callable")
        task_target(self.task)  # a top-level, importable function

    @property
    def task_name(self) -> str:
        """The name recorded with every run of this story (part of the run identity)."""
        return self.task.__name__

    @property
    def target(self) -> str:
        """``module:function`` of the task, for workers."""
        return task_target(self.task)


@dataclass(frozen=True)
class Found:
    """A discovered story and its YAML file."""

    story: Story
    config: Path


def discover_stories(package: str) -> dict[str, Found]:
    """Every module of ``package`` that defines ``STORY``, with ``<stem>.yaml`` beside it.

    Modules whose name starts with ``_`` are skipped. A module without ``STORY``, a story whose
    name is not its module's stem, or a missing YAML is an error naming the module.
    """
    pkg = importlib.import_module(package)
    found: dict[str, Found] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        story = getattr(module, "STORY", None)
        if not isinstance(story, Story):
            raise RankCollapseError(f"story module {module.__name__} defines no STORY = Story(...)")
        if story.name != info.name:
            msg = f"story module {module.__name__}: STORY.name {story.name!r} != {info.name!r}"
            raise RankCollapseError(msg)
        config = Path(str(module.__file__)).with_name(f"{info.name}.yaml")
        if not config.is_file():
            raise RankCollapseError(f"story {info.name}: no config {config.name} beside {module.__name__}")
        found[info.name] = Found(story, config)
    return found
