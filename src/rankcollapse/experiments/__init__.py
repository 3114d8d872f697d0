"""Experiments: the sweep engine, the judging kit, and one story per paper result.

Floors, lowest first (a module imports only from its own floor or below):

- ``engine/``: grid, run identity, run store, executors, workers, locks, progress; it knows nothing
  about the paper;
- ``contract/``: the judging contract: the ``Story`` contract (statements, arms), ``Claim``,
  ``Verdict`` / ``Origin``, the one combiner, word table and tally;
- ``kit/``: the one way every story summarises curves, judges statements and draws figures
  (thresholds, curves, statuses, rules, claim rows, plots, task adapters, the glossary);
- ``stories/<name>.py`` + ``stories/<name>.yaml``: one paper result each (statements, arms, figures).

``rankcollapse.pipeline`` (above this package) runs them: ``reproduce`` and the report.
This package re-exports the engine's public names.
"""

from rankcollapse.experiments.engine.executors import SweepSummary, run_sweep
from rankcollapse.experiments.engine.grid import RunSpec, expand_grid, make_runs, run_identity
from rankcollapse.experiments.engine.store import RunStore, collect_index, collect_table, write_tables
from rankcollapse.experiments.engine.tasks import RunOutput, Task

__all__ = [
    "RunOutput",
    "RunSpec",
    "RunStore",
    "SweepSummary",
    "Task",
    "collect_index",
    "collect_table",
    "expand_grid",
    "make_runs",
    "run_identity",
    "run_sweep",
    "write_tables",
]
