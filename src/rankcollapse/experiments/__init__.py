"""Experiments: the sweep engine, the paper's experiment configs, and ``reproduce``.

- ``sweep.py``: grid expansion, run identity, atomic per-run storage, local / Dask executors.
- ``tasks.py``: one adapter per kind of run (simulate, analyze, counterexample, ...).
- ``config.py``: experiment configs (``configs/*.yaml``) and profiles (quick, full, tiny).
- ``claims.py``: the paper's claims and the rules that turn measured data into verdicts.
- ``reproduce.py``: run every experiment, draw every figure, write ``report.html``.
"""

from rankcollapse.experiments.sweep import (
    RunOutput,
    RunSpec,
    RunStore,
    collect_index,
    collect_table,
    expand_grid,
    make_runs,
    run_identity,
    run_sweep,
    write_tables,
)

__all__ = [
    "RunOutput",
    "RunSpec",
    "RunStore",
    "collect_index",
    "collect_table",
    "expand_grid",
    "make_runs",
    "run_identity",
    "run_sweep",
    "write_tables",
]
