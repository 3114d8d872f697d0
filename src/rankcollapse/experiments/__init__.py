"""Experiments: the sweep engine, one story per experiment of the paper, and ``reproduce``.

Floors, lowest first (a module imports only from its own floor or below):

- ``engine/``: grid, run identity, run store, executors, progress, verdicts, the ``Story`` contract;
  it knows nothing about the paper;
- ``analysis``, ``tasks``, ``plotting`` (and other helpers): curve statistics, the generic
  simulate/analyze tasks, plotting with the precision floor -- shared by the stories;
- ``stories/<name>.py`` + ``stories/<name>.yaml``: one experiment each (task, claim rules, figures);
- ``reproduce``: run every story, judge every claim, write the report (with ``rankcollapse.reports``).

This package re-exports the engine's public names.
"""

from rankcollapse.experiments.engine.executors import SweepSummary, run_sweep
from rankcollapse.experiments.engine.grid import RunSpec, expand_grid, make_runs, run_identity
from rankcollapse.experiments.engine.store import RunStore, collect_index, collect_table, write_tables
from rankcollapse.experiments.engine.tasks import RunOutput

__all__ = [
    "RunOutput",
    "RunSpec",
    "RunStore",
    "SweepSummary",
    "collect_index",
    "collect_table",
    "expand_grid",
    "make_runs",
    "run_identity",
    "run_sweep",
    "write_tables",
]
