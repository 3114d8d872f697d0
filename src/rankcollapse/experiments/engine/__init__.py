"""The sweep engine: knows nothing about the paper.

- ``grid``: grid expansion, run identity (SHA-256 of the canonical config), :class:`RunSpec`;
- ``config``: an experiment's YAML file with profiles -> :class:`Experiment`;
- ``tasks``: :class:`RunOutput`, running one spec anywhere (``execute_run``), the toy task;
- ``store``: atomic per-run files, the tidy table (``runs.csv``) and the run index;
- ``executors``: ``run_sweep`` in this process, a local process pool or on Dask, with progress;
- ``workers``: pool workers that die with their parent; ``lock``: one writer per output folder;
- ``verdicts``: :class:`Claim`, ``VERDICTS``, ``combine_verdicts``, :class:`Data`;
- ``story``: the :class:`Story` contract and ``discover_stories``.
"""

from rankcollapse.experiments.engine.config import PROFILES, Experiment, load_experiment, select
from rankcollapse.experiments.engine.grid import RunSpec, canonical_json, expand_grid, make_runs, run_identity
from rankcollapse.experiments.engine.story import FigureSpec, Found, Story, discover_stories
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, RunResult, config_from, execute_run
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    VERDICTS,
    Claim,
    Data,
    combine_verdicts,
)

__all__ = [
    "INCONCLUSIVE",
    "NOT_REPRODUCED",
    "PROFILES",
    "REPRODUCED",
    "VERDICTS",
    "Claim",
    "Data",
    "Experiment",
    "FigureSpec",
    "Found",
    "OnLayer",
    "RunOutput",
    "RunResult",
    "RunSpec",
    "Story",
    "canonical_json",
    "combine_verdicts",
    "config_from",
    "discover_stories",
    "execute_run",
    "expand_grid",
    "load_experiment",
    "make_runs",
    "run_identity",
    "select",
]
