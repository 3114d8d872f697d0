"""The paper's experiments, one story each: ``<name>.py`` (task, claim rules, figures) + ``<name>.yaml``.

Every module here that defines ``STORY = Story(...)`` (see ``rankcollapse.experiments.engine.story``)
is found by :func:`all_stories`; its YAML beside it holds the settings. Adding an experiment is
adding those two files, nothing else. Modules starting with ``_`` are helpers, not stories.
"""

from __future__ import annotations

import functools
from pathlib import Path

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.config import Experiment, load_experiment, select
from rankcollapse.experiments.engine.story import Found, discover_stories
from rankcollapse.experiments.engine.tasks import BUILTIN_TASKS, task_target
from rankcollapse.experiments.tasks import GENERIC_TASKS


@functools.cache
def all_stories() -> dict[str, Found]:
    """name -> (story, YAML path) for every story module of this package."""
    return discover_stories(__name__)


def task_targets() -> dict[str, str]:
    """Task name -> ``module:function`` for every task a config may name (``""`` = engine built-in)."""
    targets = {name: "" for name in BUILTIN_TASKS}
    targets.update({name: task_target(fn) for name, fn in GENERIC_TASKS.items()})
    for found in all_stories().values():
        targets.setdefault(found.story.task_name, found.story.target)
    return targets


def load_experiments(
    profile: str = "full", only: list[str] | None = None, folder: str | Path | None = None
) -> list[Experiment]:
    """The experiments of ``profile`` in report order; ``only`` filters by name.

    ``folder=None``: every story with its YAML. Otherwise every ``*.yaml`` in ``folder`` (custom
    sweeps): each names its ``task`` (a generic task, a story's task or ``toy``); one named like a
    story also gets that story's claims and figures.
    """
    if folder is None:
        exps = [
            load_experiment(f.config, profile, task=f.story.task_name, target=f.story.target)
            for f in all_stories().values()
        ]
        return select(exps, only)
    folder = Path(folder)
    if not folder.is_dir() or not any(folder.glob("*.yaml")):
        raise RankCollapseError(f"no experiment configs (*.yaml) in {folder}")
    targets = task_targets()
    exps = []
    for path in sorted(folder.glob("*.yaml")):
        exp = load_experiment(path, profile)
        if exp.task not in targets:
            raise RankCollapseError(
                f"{path.name}: unknown task {exp.task[:60]!r}; allowed: {', '.join(sorted(targets))}"
            )
        exp.target = targets[exp.task]
        exps.append(exp)
    return select(exps, only)
