"""The run store: one file pair per finished run, and the tables collected from them.

Storage under ``out_dir/runs/<experiment>/``:

- ``<run_id>.csv``: the run's rows (long format, usually one row per layer);
- ``<run_id>.json``: the done-marker and run record (params, seed, wall time, summary, versions,
  and the row count, byte size and SHA-256 of the CSV), written last. A run counts as finished iff
  this file exists with ``status == "ok"``, names the run it is read for (:func:`identity_problem`:
  its run id, experiment, task, params and facts, and the run id their hash gives) and its CSV matches
  the record (:meth:`RunStore.verify`); a run killed before, or whose CSV was cut, changed or deleted
  since, is simply run again, never trusted, and ``collect_table`` leaves it out (``collect_index``
  flags it ``damaged``). A record copied under another run's name is read as no record at all.

Both are written through ``rankcollapse.edge.atomic.atomic_write`` (a temporary name unique per process,
fsync, rename), so two writers never share a temporary and a crash never leaves half a file.
``collect_table`` joins all finished runs into one tidy table (``runs.csv``: run_id, experiment,
task, every parameter, then the row columns); ``collect_index`` gives one row per run
(``index.csv``).

Names on read: a record keeps its params as the config stored them (the run's identity hashes them) and
a run file its columns as the task wrote them; both tables give them under the names table's names
(``core.names``), renaming each stored key of the quantities its experiment names (``names``:
experiment -> its task's ``Task.names``, e.g. ``n`` -> ``tokens``, ``preset`` -> ``mode``, and in an
iterated map ``steps`` -> ``layers``). An experiment not in ``names`` has its run files' ``variant``
read as ``mode`` (:data:`STORED_COLUMNS`) and its params as stored. Files and records stay as written.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.core.names import from_stored, stored_names
from rankcollapse.edge.atomic import atomic_write, to_jsonable
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.folder import real_subfolder
from rankcollapse.edge.inputs import read_bytes
from rankcollapse.edge.provenance import package_versions
from rankcollapse.experiments.engine.grid import RunSpec, canonical_json, run_identity
from rankcollapse.experiments.engine.tasks import RunResult

#: Keys every readable run record has (a record without them is ignored, as if absent).
RECORD_KEYS = ("run_id", "experiment", "task", "status", "params")
#: ``status`` given in ``collect_index`` to a finished run whose CSV no longer matches its record.
DAMAGED = "damaged"


#: Run files already verified in this process, keyed by (path, inode, size, mtime, ctime, digest,
#: rows): a resume asks for each several times (models to prepare, the estimate, the sweep).
_VERIFIED: dict[tuple[str, int, int, int, int, str, str], bool] = {}


#: Row columns an earlier release wrote under a kept old name (``core.names``' ``stored``): a run file
#: with ``variant`` (the block assembly) is read with ``mode``; the file, its checksum and the run's
#: identity stay as they were, so a resumed folder's runs are skipped, not recomputed.
STORED_COLUMNS = ("mode",)


#: What :func:`collect_table` and :func:`collect_index` are told an experiment names: experiment ->
#: the quantities of ``core.names`` whose stored keys its params and run files use (module docstring).
Names = Mapping[str, Iterable[str]]


def _read_rows(data: bytes, keys: Iterable[str] = STORED_COLUMNS) -> pd.DataFrame:
    """A run file's rows, its stored column names of the quantities ``keys`` read under the table's."""
    frame = pd.read_csv(io.BytesIO(data))
    return frame.rename(columns=stored_names(frame.columns, keys))


def _parse(data: bytes, keys: Iterable[str] = STORED_COLUMNS) -> pd.DataFrame | None:
    try:
        return _read_rows(data, keys)
    except (ValueError, TypeError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        return None


def _load_record(path: Path) -> dict[str, Any] | None:
    """A run record, or None if it is missing, unreadable, not JSON or lacks :data:`RECORD_KEYS`."""
    try:
        rec = json.loads(read_bytes(path, "run record"))
    except (RankCollapseError, ValueError, RecursionError):
        return None
    if not isinstance(rec, dict) or any(k not in rec for k in RECORD_KEYS):
        return None
    if not isinstance(rec["params"], dict):
        return None
    return rec


def misnamed(record: dict[str, Any], path: Path) -> str | None:
    """Why the record read from ``runs/<experiment>/<run_id>.json`` is not that run's (None: it is).

    The file's name must be the record's run id and its folder the record's experiment; a record that
    stores its ``facts`` (every record written since) must also hash to its run id
    (:func:`~rankcollapse.experiments.engine.grid.run_identity` of its experiment, task, params and facts):
    a record copied, or copied and renamed inside, under another run's name is caught either way."""
    run_id, experiment = str(record["run_id"]), str(record["experiment"])
    if path.stem != run_id or path.parent.name != experiment:
        return f"it holds the record of run {experiment}/{run_id}"
    facts = record.get("facts")
    if facts is not None:
        try:
            own = run_identity(experiment, str(record["task"]), record["params"], facts or None)
        except (TypeError, ValueError):
            own = ""
        if own != run_id:
            return f"its params hash to run {own or '(unhashable)'}, not to {run_id}"
    return None


def _read_record(path: Path) -> dict[str, Any] | None:
    """The record of the run that ``path`` names, or None: missing, unreadable, or another run's
    (:func:`misnamed`)."""
    rec = _load_record(path)
    return None if rec is None or misnamed(rec, path) else rec


def identity_problem(record: dict[str, Any], spec: RunSpec) -> str | None:
    """Why ``record`` is not the record of ``spec``'s run (None: it is): its run id, experiment, task,
    params or (when stored) facts differ from the spec's."""
    for key, want in (("run_id", spec.run_id), ("experiment", spec.experiment), ("task", spec.task)):
        if str(record.get(key)) != want:
            return f"its {key} is {str(record.get(key))[:40]!r}, not {want!r}"
    if canonical_json(record["params"]) != canonical_json(spec.params):
        return "its params are not the run's"
    if "facts" in record and canonical_json(record["facts"] or {}) != canonical_json(spec.facts or {}):
        return "its facts (what the params resolve to here) are not the run's"
    return None


#: The SHA-256 of no bytes: the checksum of a run without rows.
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _describes_no_file(record: dict[str, Any]) -> bool:
    """Whether a record that counts no rows says so throughout: no bytes and the checksum of none (a
    record from before checksums: no bytes recorded). An ``n_rows: 0`` whose ``csv_bytes`` /
    ``csv_sha256`` describe a file is an edited or damaged record: its run is measured again, never
    trusted (its rows vanished from ``runs.csv`` and a verdict flipped)."""
    if record.get("n_rows") != 0 or isinstance(record.get("n_rows"), bool):
        return False
    digest = record.get("csv_sha256")
    if isinstance(digest, str) or "csv_bytes" in record:
        return record.get("csv_bytes") == 0 and digest in (_EMPTY_SHA256, None)
    return True


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
        """The stored record of a run, or None if it never finished or the file holds another run's
        record (:meth:`misfiled` says why)."""
        _, meta = self._paths(spec)
        rec = _load_record(meta)
        return None if rec is None or misnamed(rec, meta) or identity_problem(rec, spec) else rec

    def misfiled(self, spec: RunSpec) -> str | None:
        """One line when the file of ``spec``'s record holds a record that is not that run's (copied or
        renamed from another grid point, edited): the run is computed again, never trusted; else None."""
        _, meta = self._paths(spec)
        rec = _load_record(meta)
        why = None if rec is None else misnamed(rec, meta) or identity_problem(rec, spec)
        return None if why is None else f"{meta.parent.name}/{meta.name} is not the record of its run ({why})"

    def is_done(self, spec: RunSpec) -> bool:
        """Finished: the run's own record (:meth:`record`) with ``status == "ok"`` whose CSV matches it
        (:meth:`verify`)."""
        rec = self.record(spec)
        return rec is not None and rec.get("status") == "ok" and self.verify(rec)

    def csv_path(self, record: dict[str, Any]) -> Path:
        return self.runs_dir / str(record["experiment"]) / f"{record['run_id']}.csv"

    def verify(self, record: dict[str, Any]) -> bool:
        """Whether the run file of a finished record is intact: present, of the recorded size and
        SHA-256 (records written before checksums: of the recorded row count). A run without rows
        has no file and is intact when its record says so throughout (:func:`_describes_no_file`). A
        file verified once is not read again while its size and
        modification time stay the same (a resume asks several times)."""
        if not record.get("n_rows"):
            return _describes_no_file(record)
        path = self.csv_path(record)
        try:
            info = os.stat(path)
        except OSError:
            return False
        digest = record.get("csv_sha256")
        if isinstance(digest, str) and info.st_size != record.get("csv_bytes"):
            return False
        key = (str(path), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, str(digest),
               str(record.get("n_rows")))
        if key not in _VERIFIED:
            _VERIFIED[key] = self._intact_bytes(record) is not None
        return _VERIFIED[key]

    def _intact_bytes(self, record: dict[str, Any]) -> bytes | None:
        """The bytes of a finished run's file if they match its record, else None (never raises)."""
        try:
            data = read_bytes(self.csv_path(record), "run file")
        except RankCollapseError:
            return None
        digest = record.get("csv_sha256")
        if isinstance(digest, str):
            ok = len(data) == record.get("csv_bytes") and hashlib.sha256(data).hexdigest() == digest
            return data if ok else None
        frame = _parse(data)  # a record from before checksums: the row count is what is checked
        try:
            return data if frame is not None and len(frame) == int(record["n_rows"]) else None
        except (TypeError, ValueError):
            return None

    def _intact(self, record: dict[str, Any], keys: Iterable[str] = STORED_COLUMNS) -> pd.DataFrame | None:
        """The rows of a finished run if its file matches the record, else None (never raises); the stored
        columns of the quantities ``keys`` under the table's names."""
        data = self._intact_bytes(record)
        return None if data is None else _parse(data, keys)

    def save(self, spec: RunSpec, result: RunResult) -> None:
        """Rows first, then the record (the done-marker, with the rows' size and checksum), each
        atomically; neither is written through a link."""
        csv_path, meta_path = self._paths(spec)
        real_subfolder(self.root, "runs")
        real_subfolder(self.runs_dir, spec.experiment)
        data = b""
        if result.status == "ok" and result.rows:
            data = pd.DataFrame(result.rows).to_csv(index=False).encode("utf-8")
            atomic_write(csv_path, data, fsync=True)
        record = {
            "run_id": spec.run_id,
            "experiment": spec.experiment,
            "task": spec.task,
            "seed": spec.seed,
            "axes": list(spec.axes),
            "params": spec.params,
            "facts": spec.facts,  # with the rest, hashes to run_id (``misnamed``)
            "execution": {"device": "cpu", "batch_size": None, **spec.execution},  # not in the identity
            "status": result.status,
            "error": result.error,
            "error_detail": result.detail,  # the whole text; ``error`` is its one line
            "wall_s": round(result.wall_s, 4),
            "n_rows": len(result.rows),
            "csv_bytes": len(data),
            "csv_sha256": hashlib.sha256(data).hexdigest(),
            "summary": result.summary,
            "versions": package_versions(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        atomic_write(meta_path, json.dumps(to_jsonable(record), indent=1) + "\n", fsync=True)

    def records(self, experiment: str | None = None) -> list[dict[str, Any]]:
        """All stored records (finished and failed), sorted by experiment then run_id."""
        pattern = f"{experiment}/*.json" if experiment else "*/*.json"
        out = []
        try:
            paths = sorted(self.runs_dir.glob(pattern))
        except OSError:
            return out
        for path in paths:
            rec = _read_record(path)
            if rec is not None:
                out.append(rec)
        return out

    def finished(self) -> int:
        """How many runs are stored as finished (``status == "ok"``, run file intact)."""
        return sum(1 for rec in self.records() if rec.get("status") == "ok" and self.verify(rec))

    def rows(self, record: dict[str, Any], keys: Iterable[str] = STORED_COLUMNS) -> pd.DataFrame:
        """The rows of a finished run (RankCollapseError, one line, if its file is unreadable); the stored
        columns of the quantities ``keys`` under the table's names."""
        data = read_bytes(self.csv_path(record), "run file")
        try:
            return _read_rows(data, keys)
        except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
            reason = " ".join(str(err).split())[:100]
            where = self.csv_path(record)
            raise RankCollapseError(f"run file {where} is not a readable CSV ({reason})") from None


#: The index's columns of a run's summary: ``summary.<key>`` for each key its task returned.
SUMMARY_PREFIX = "summary."


def run_summary(run: Mapping[str, Any]) -> dict[str, Any]:
    """One run's summary back from its index row (:func:`collect_index`): every ``summary.<key>`` column,
    the prefix stripped (a key that only other runs have reads NaN)."""
    return {k[len(SUMMARY_PREFIX) :]: v for k, v in run.items() if k.startswith(SUMMARY_PREFIX)}


def _keys(names: Names | None, record: dict[str, Any]) -> tuple[str, ...] | None:
    """The quantities the record's experiment names (None: not told; module docstring)."""
    if names is None or str(record["experiment"]) not in names:
        return None
    return tuple(names[str(record["experiment"])])


def _named_params(record: dict[str, Any], keys: tuple[str, ...] | None) -> dict[str, Any]:
    """A record's params under the table's names (as stored where ``keys`` is None)."""
    return dict(record["params"]) if keys is None else from_stored(record["params"], keys)


def collect_index(
    root: str | Path, experiment: str | None = None, names: Names | None = None
) -> pd.DataFrame:
    """One row per stored run: run_id, experiment, task, status, seed, wall_s, params (under the table's
    names where ``names`` says which: module docstring), summary (``summary.<key>`` columns:
    :func:`run_summary`)."""
    store = RunStore(root)
    rows = []
    for rec in store.records(experiment):
        row = {k: rec.get(k) for k in ("run_id", "experiment", "task", "status", "seed", "wall_s", "error")}
        if rec.get("status") == "ok" and not store.verify(rec):
            row["status"] = DAMAGED
            row["error"] = "its run file is missing or does not match its record (size, SHA-256); rerun"
        row.update({k: v for k, v in _named_params(rec, _keys(names, rec)).items() if k not in row})
        summary = rec.get("summary") if isinstance(rec.get("summary"), dict) else {}
        row.update({f"{SUMMARY_PREFIX}{k}": v for k, v in summary.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def canonical_or_plain(value: Any) -> Any:
    """Lists and dicts become canonical JSON strings so the table stays flat."""
    return canonical_json(value) if isinstance(value, list | dict) else value


def collect_table(
    root: str | Path, experiment: str | None = None, names: Names | None = None
) -> pd.DataFrame:
    """The tidy long table of all finished runs: identity + params columns, ``row`` (0.. within the
    run; with ``run_id`` the table's key), then the task's row columns (``layer``, metrics, ...); params
    and row columns under the table's names where ``names`` says which (module docstring)."""
    store = RunStore(root)
    frames = []
    for rec in store.records(experiment):
        if rec.get("status") != "ok" or not rec.get("n_rows"):
            continue
        keys = _keys(names, rec)
        frame = store._intact(rec, STORED_COLUMNS if keys is None else keys)
        if frame is None:
            continue  # damaged: flagged by collect_index, recomputed by the next sweep
        frame.insert(0, "row", range(len(frame)))
        ident = {"run_id": rec["run_id"], "experiment": rec["experiment"], "task": rec["task"]}
        ident.update({k: v for k, v in _named_params(rec, keys).items() if k not in frame.columns})
        head = pd.DataFrame({k: [canonical_or_plain(v)] * len(frame) for k, v in ident.items()})
        frames.append(pd.concat([head, frame.reset_index(drop=True)], axis=1))
    if not frames:
        return pd.DataFrame(columns=["run_id", "experiment", "task"])
    return pd.concat(frames, ignore_index=True, sort=False)


def write_tables(
    root: str | Path, table: pd.DataFrame | None = None, index: pd.DataFrame | None = None,
    names: Names | None = None,
) -> tuple[Path, Path]:
    """Write ``runs.csv`` (tidy, all finished runs) and ``index.csv`` atomically; return their paths.

    ``table``/``index``: already collected frames (else read from ``root``, under ``names``).
    """
    root = Path(root)
    table = collect_table(root, names=names) if table is None else table
    index = collect_index(root, names=names) if index is None else index
    atomic_write(root / "runs.csv", table.to_csv(index=False), fsync=True)
    atomic_write(root / "index.csv", index.to_csv(index=False), fsync=True)
    return root / "runs.csv", root / "index.csv"
