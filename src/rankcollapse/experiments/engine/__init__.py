"""The sweep engine: runs grids of tasks and stores what they return; knows nothing about the paper.

- ``grid``: grid expansion, run identity (SHA-256 of the canonical config), :class:`RunSpec`;
- ``config``: a YAML file (one experiment per arm) or a custom sweep -> :class:`Experiment`;
- ``tasks``: :class:`Task` (a task with its declared cost and identity facts), :class:`RunOutput`,
  running one spec anywhere (``execute_run``), the toy task;
- ``store``: atomic per-run files, the tidy table (``runs.csv``) and the run index;
- ``executors``: ``run_sweep`` in this process, a local process pool or on Dask, with progress;
- ``workers``: pool workers that die with their parent; ``lock``: one writer per output folder;
- ``progress``: progress weighted by each run's estimated cost; ``costs``: that estimate, the tasks' own
  calibrated on the runs a folder already measured (``RunCost``).

What a story is and how its statements are judged (``Story``, ``Claim``, ``Verdict``, ``tally``) is the
judging contract, one floor up: ``rankcollapse.experiments.contract``.
"""

from rankcollapse.experiments.engine.config import PROFILES, Experiment, load_arms, load_experiment, select
from rankcollapse.experiments.engine.grid import RunSpec, canonical_json, expand_grid, make_runs, run_identity
from rankcollapse.experiments.engine.tasks import (
    OnLayer,
    RunOutput,
    RunResult,
    Task,
    config_from,
    execute_run,
)

__all__ = [
    "PROFILES",
    "Experiment",
    "OnLayer",
    "RunOutput",
    "RunResult",
    "RunSpec",
    "Task",
    "canonical_json",
    "config_from",
    "execute_run",
    "expand_grid",
    "load_arms",
    "load_experiment",
    "make_runs",
    "run_identity",
    "select",
]
