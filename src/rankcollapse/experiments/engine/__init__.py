"""The sweep engine: knows nothing about the paper.

- ``grid``: grid expansion, run identity (SHA-256 of the canonical config), :class:`RunSpec`;
- ``config``: a story's YAML (one experiment per arm) or a custom sweep -> :class:`Experiment`;
- ``tasks``: :class:`Task` (a task with its declared cost and identity facts), :class:`RunOutput`,
  running one spec anywhere (``execute_run``), the toy task;
- ``store``: atomic per-run files, the tidy table (``runs.csv``) and the run index;
- ``executors``: ``run_sweep`` in this process, a local process pool or on Dask, with progress;
- ``workers``: pool workers that die with their parent; ``lock``: one writer per output folder;
- ``verdicts``: :class:`Verdict`, :class:`Origin`, ``combine_verdicts``, the word table, :class:`Claim`;
- ``story``: the :class:`Story` contract (statements, arms, claims, figures), :class:`Data`,
  ``discover_stories``.
"""

from rankcollapse.experiments.engine.config import PROFILES, Experiment, load_arms, load_experiment, select
from rankcollapse.experiments.engine.grid import RunSpec, canonical_json, expand_grid, make_runs, run_identity
from rankcollapse.experiments.engine.story import (
    Arm,
    Data,
    FigureSpec,
    Found,
    Statement,
    Story,
    StoryData,
    discover_stories,
    slice_data,
)
from rankcollapse.experiments.engine.tasks import (
    OnLayer,
    RunOutput,
    RunResult,
    Task,
    config_from,
    execute_run,
)
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NA,
    NOT_REPRODUCED,
    REPRODUCED,
    UNTESTED,
    VERDICTS,
    Claim,
    Origin,
    Verdict,
    combine_verdicts,
    verdict_word,
)

__all__ = [
    "INCONCLUSIVE",
    "NA",
    "NOT_REPRODUCED",
    "PROFILES",
    "REPRODUCED",
    "UNTESTED",
    "VERDICTS",
    "Arm",
    "Claim",
    "Data",
    "Experiment",
    "FigureSpec",
    "Found",
    "OnLayer",
    "Origin",
    "RunOutput",
    "RunResult",
    "RunSpec",
    "Statement",
    "Story",
    "StoryData",
    "Task",
    "Verdict",
    "canonical_json",
    "combine_verdicts",
    "config_from",
    "discover_stories",
    "execute_run",
    "expand_grid",
    "load_arms",
    "load_experiment",
    "make_runs",
    "run_identity",
    "select",
    "slice_data",
    "verdict_word",
]
