"""The run store: one file pair per finished run, and the tables collected from them.

Storage under ``out_dir/runs/<experiment>/``:

- ``<run_id>.csv``: the run's rows (long format, usually one row per layer);
- ``<run_id>.json``: the done-marker and run record (params, seed, wall time, summary, versions),
  written last. A run counts as finished iff this file exists with ``status == "ok"``; a run
  killed before it is simply run again.

Both are written through ``rankcollapse.io.atomic_write`` (a temporary name unique per process,
fsync, rename), so two writers never share a temporary and a crash never leaves half a file.
``collect_table`` joins all finished runs into one tidy table (``runs.csv``: run_id, experiment,
task, every parameter, then the row columns); ``collect_index`` gives one row per run
(``index.csv``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.grid import RunSpec, canonical_json
from rankcollapse.experiments.engine.tasks import RunResult
from rankcollapse.io import atomic_write, package_versions, to_jsonable


class RunStore:
    """Finished runs under ``root/runs/<experiment>/``; see the module docstring for the layout.

    Reading never creates a folder; the first ``save`` does.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"

    def _paths(self, spec: RunSpec) -> tuple[Path, Path]:
        folder = self.runs_dir / spec.experiment
        return folder / f"{spec.run_id}.csv", folder / f"{spec.run_id}.json"

    def record(self, spec: RunSpec) -> dict[str, Any] | None:
        """The stored record of a run, or None if it never finished."""
        _, meta = self._paths(spec)
        try:
            return json.loads(meta.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def is_done(self, spec: RunSpec) -> bool:
        rec = self.record(spec)
        return rec is not None and rec.get("status") == "ok"

    def save(self, spec: RunSpec, result: RunResult) -> None:
        """Rows first, then the record (the done-marker), each atomically."""
        csv_path, meta_path = self._paths(spec)
        try:
            csv_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RankCollapseError(f"cannot create output folder {csv_path.parent}: {err.strerror}") from err
        if result.status == "ok":
            atomic_write(csv_path, pd.DataFrame(result.rows).to_csv(index=False), fsync=True)
        record = {
            "run_id": spec.run_id,
            "experiment": spec.experiment,
            "task": spec.task,
            "seed": spec.seed,
            "axes": list(spec.axes),
            "params": spec.params,
            "execution": {"device": "cpu", "batch_size": None, **spec.execution},  # not in the identity
            "status": result.status,
            "error": result.error,
            "wall_s": round(result.wall_s, 4),
            "n_rows": len(result.rows),
            "summary": result.summary,
            "versions": package_versions(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        atomic_write(meta_path, json.dumps(to_jsonable(record), indent=1) + "\n", fsync=True)

    def records(self, experiment: str | None = None) -> list[dict[str, Any]]:
        """All stored records (finished and failed), sorted by experiment then run_id."""
        pattern = f"{experiment}/*.json" if experiment else "*/*.json"
        out = []
        for path in sorted(self.runs_dir.glob(pattern)):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError):
                continue
        return out

    def finished(self) -> int:
        """How many runs are stored as finished (``status == "ok"``)."""
        return sum(1 for rec in self.records() if rec.get("status") == "ok")

    def rows(self, record: dict[str, Any]) -> pd.DataFrame:
        return pd.read_csv(self.runs_dir / record["experiment"] / f"{record['run_id']}.csv")


def collect_index(root: str | Path, experiment: str | None = None) -> pd.DataFrame:
    """One row per stored run: run_id, experiment, task, status, seed, wall_s, params, summary."""
    store = RunStore(root)
    rows = []
    for rec in store.records(experiment):
        row = {k: rec[k] for k in ("run_id", "experiment", "task", "status", "seed", "wall_s", "error")}
        row.update({k: v for k, v in rec["params"].items() if k not in row})
        row.update({f"summary.{k}": v for k, v in (rec.get("summary") or {}).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def canonical_or_plain(value: Any) -> Any:
    """Lists and dicts become canonical JSON strings so the table stays flat."""
    return canonical_json(value) if isinstance(value, list | dict) else value


def collect_table(root: str | Path, experiment: str | None = None) -> pd.DataFrame:
    """The tidy long table of all finished runs: identity + params columns, ``row`` (0.. within the
    run; with ``run_id`` the table's key), then the task's row columns (``layer``, metrics, ...)."""
    store = RunStore(root)
    frames = []
    for rec in store.records(experiment):
        if rec.get("status") != "ok" or not rec.get("n_rows"):
            continue
        frame = store.rows(rec)
        frame.insert(0, "row", range(len(frame)))
        ident = {"run_id": rec["run_id"], "experiment": rec["experiment"], "task": rec["task"]}
        ident.update({k: v for k, v in rec["params"].items() if k not in frame.columns})
        head = pd.DataFrame({k: [canonical_or_plain(v)] * len(frame) for k, v in ident.items()})
        frames.append(pd.concat([head, frame.reset_index(drop=True)], axis=1))
    if not frames:
        return pd.DataFrame(columns=["run_id", "experiment", "task"])
    return pd.concat(frames, ignore_index=True, sort=False)


def write_tables(
    root: str | Path, table: pd.DataFrame | None = None, index: pd.DataFrame | None = None
) -> tuple[Path, Path]:
    """Write ``runs.csv`` (tidy, all finished runs) and ``index.csv`` atomically; return their paths.

    ``table``/``index``: already collected frames (else read from ``root``).
    """
    root = Path(root)
    table = collect_table(root) if table is None else table
    index = collect_index(root) if index is None else index
    atomic_write(root / "runs.csv", table.to_csv(index=False), fsync=True)
    atomic_write(root / "index.csv", index.to_csv(index=False), fsync=True)
    return root / "runs.csv", root / "index.csv"
