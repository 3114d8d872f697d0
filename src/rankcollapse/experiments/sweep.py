"""The sweep engine: a grid of independent runs, each stored atomically, resumable, optionally on Dask.

A *run* is one point of an experiment's grid: a task name (see ``tasks.py``) and a flat dict of
JSON parameters, seed included. Its identity is a hash of the canonical JSON of
``(experiment, task, params)``, so the same command finds the same runs again.

Storage under ``out_dir/runs/<experiment>/``:

- ``<run_id>.csv``: the run's rows (long format, usually one row per layer), written to a temp
  file and renamed;
- ``<run_id>.json``: the done-marker and run record (params, seed, wall time, summary, versions),
  written last, also temp + rename, after an ``fsync``. A run counts as finished iff this file
  exists with ``status == "ok"``; a run killed before it is simply run again.

``collect_table(out_dir)`` joins all finished runs into one tidy table (``runs.csv``: run_id,
experiment, task, every parameter, then the row columns) and ``collect_index`` gives one row per
run (``index.csv``). Executors: ``local`` (in-process when ``workers == 1``, else a spawn process
pool) and ``dask`` (a ``distributed`` scheduler address). Ctrl-C or ``kill -9`` loses no finished run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing as mp
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.errors import RankCollapseError
from rankcollapse.io import package_versions, to_jsonable

EXECUTORS = ("local", "dask")


# ----------------------------------------------------------------------------- grid and identity


def expand_grid(base: dict[str, Any], grid: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of ``grid`` axes over ``base``: one flat params dict per point.

    Axis order is the order of ``grid``'s keys; the last axis varies fastest. An axis with one
    value behaves like a base setting. An empty grid gives ``[base]``.

    >>> expand_grid({"d": 2}, {"mask": ["causal", "complete"], "seed": [0, 1]})[1]
    {'d': 2, 'mask': 'causal', 'seed': 1}
    """
    for axis, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or len(values) == 0:
            raise RankCollapseError(f"grid axis {axis!r} must be a non-empty list, got {values!r}")
    keys = list(grid)
    points = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        params = dict(base)
        params.update(zip(keys, combo, strict=True))
        points.append(params)
    return points


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: equal configs give equal strings (floats as repr)."""
    return json.dumps(to_jsonable(obj), sort_keys=True, separators=(",", ":"), allow_nan=True)


def run_identity(experiment: str, task: str, params: dict[str, Any]) -> str:
    """12 hex digits of SHA-256 of the canonical ``(experiment, task, params)``."""
    blob = canonical_json({"experiment": experiment, "task": task, "params": params})
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep. ``axes`` names the params that vary in its experiment's grid."""

    experiment: str
    task: str
    params: dict[str, Any]
    axes: tuple[str, ...] = ()
    run_id: str = ""

    def __post_init__(self) -> None:
        if not self.run_id:
            object.__setattr__(self, "run_id", run_identity(self.experiment, self.task, self.params))

    @property
    def seed(self) -> int | None:
        seed = self.params.get("seed")
        return None if seed is None else int(seed)

    @property
    def expected_layers(self) -> int:
        """Layer count for the progress bar (``layers`` param + 1 for X(0)), 1 when unknown."""
        layers = self.params.get("layers")
        return int(layers) + 1 if isinstance(layers, int) else 1


def make_runs(
    experiment: str, task: str, base: dict[str, Any], grid: dict[str, Sequence[Any]]
) -> list[RunSpec]:
    """The runs of one experiment; duplicate points (same identity) are kept once."""
    axes = tuple(grid)
    seen: dict[str, RunSpec] = {}
    for params in expand_grid(base, grid):
        spec = RunSpec(experiment, task, params, axes)
        seen.setdefault(spec.run_id, spec)
    return list(seen.values())


# ----------------------------------------------------------------------------- tasks


@dataclass
class RunOutput:
    """What a task returns: ``rows`` for the tidy table, ``summary`` scalars for the index."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)


TaskFn = Callable[[dict[str, Any], Callable[[int], None]], RunOutput]

_worker_ticks: Any = None  # a multiprocessing queue of layer ticks, set in pool workers


def _init_worker(ticks: Any, threads: int) -> None:
    """Pool-worker set-up: the layer-tick queue, and ``threads`` BLAS/OpenMP threads per worker."""
    global _worker_ticks
    _worker_ticks = ticks
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)  # read by torch when a task first imports it


def _resolve_task(name: str) -> TaskFn:
    from rankcollapse.experiments.tasks import get_task

    return get_task(name)


@dataclass
class RunResult:
    """A finished (or failed) run as sent back to the process that stores it."""

    run_id: str
    status: str  # "ok" or "failed"
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    wall_s: float
    error: str = ""


def execute_run(spec: RunSpec, on_layer: Callable[[int], None] | None = None) -> RunResult:
    """Run one spec wherever it is called (this process, a pool worker, a Dask worker).

    Exceptions become ``status="failed"`` with the traceback's last line, so one bad point never
    stops a sweep; KeyboardInterrupt propagates.
    """
    if on_layer is None:
        ticks = _worker_ticks
        on_layer = (lambda t: ticks.put(1)) if ticks is not None else (lambda t: None)
    start = time.perf_counter()
    try:
        out = _resolve_task(spec.task)(dict(spec.params), on_layer)
        rows = [{k: to_jsonable(v) for k, v in row.items()} for row in out.rows]
        return RunResult(spec.run_id, "ok", rows, to_jsonable(out.summary), time.perf_counter() - start)
    except Exception as err:  # recorded as a failed run; the sweep goes on
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        return RunResult(spec.run_id, "failed", [], {}, time.perf_counter() - start, last)


# ----------------------------------------------------------------------------- storage


def _fsync_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


class RunStore:
    """Finished runs under ``root/runs/<experiment>/``; see the module docstring for the layout."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RankCollapseError(f"cannot create output folder {self.root}: {err.strerror}") from err

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
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        if result.status == "ok":
            frame = pd.DataFrame(result.rows)
            _fsync_write(csv_path, frame.to_csv(index=False))
        record = {
            "run_id": spec.run_id,
            "experiment": spec.experiment,
            "task": spec.task,
            "seed": spec.seed,
            "axes": list(spec.axes),
            "params": spec.params,
            "status": result.status,
            "error": result.error,
            "wall_s": round(result.wall_s, 4),
            "n_rows": len(result.rows),
            "summary": result.summary,
            "versions": package_versions(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        _fsync_write(meta_path, json.dumps(to_jsonable(record), indent=1) + "\n")

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


def canonical_or_plain(value: Any) -> Any:
    """Lists and dicts become canonical JSON strings so the table stays flat."""
    return canonical_json(value) if isinstance(value, list | dict) else value


def write_tables(
    root: str | Path, table: pd.DataFrame | None = None, index: pd.DataFrame | None = None
) -> tuple[Path, Path]:
    """Write ``runs.csv`` (tidy, all finished runs) and ``index.csv`` atomically; return their paths.

    ``table``/``index``: already collected frames (else read from ``root``).
    """
    root = Path(root)
    table = collect_table(root) if table is None else table
    index = collect_index(root) if index is None else index
    _fsync_write(root / "runs.csv", table.to_csv(index=False))
    _fsync_write(root / "index.csv", index.to_csv(index=False))
    return root / "runs.csv", root / "index.csv"


# ----------------------------------------------------------------------------- executors


@dataclass
class SweepSummary:
    """Counts of one ``run_sweep`` call."""

    total: int = 0
    skipped: int = 0
    finished: int = 0
    failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0


class _Progress:
    """Two bars (runs, layers) from tqdm; silent when ``enabled`` is False."""

    def __init__(self, runs: int, layers: int, enabled: bool, label: str) -> None:
        self.enabled = enabled
        if enabled:
            from tqdm.auto import tqdm

            self.runs = tqdm(total=runs, desc=f"{label} runs", unit="run", position=0, leave=True)
            self.layers = tqdm(total=layers, desc=f"{label} layers", unit="layer", position=1, leave=False)
        self._lock = threading.Lock()

    def layer(self, n: int = 1) -> None:
        if self.enabled:
            with self._lock:
                self.layers.update(n)

    def run(self) -> None:
        if self.enabled:
            with self._lock:
                self.runs.update(1)

    def close(self) -> None:
        if self.enabled:
            self.layers.close()
            self.runs.close()


def default_workers() -> int:
    """min(2, cpu count)."""
    return max(1, min(2, os.cpu_count() or 1))


def run_sweep(
    runs: Iterable[RunSpec],
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    label: str = "sweep",
) -> SweepSummary:
    """Run every spec not already finished in ``out_dir``; store each as it completes.

    ``executor="local"``: ``workers`` processes (default ``min(2, cpu)``; 1 runs in this process).
    ``executor="dask"``: submit to the ``distributed`` scheduler at ``scheduler``
    (e.g. ``tcp://10.0.0.1:8786``); ``workers`` is ignored. Results are written by this process,
    so Dask workers need no shared file system. Returns counts; does not raise on failed runs.
    """
    if executor not in EXECUTORS:
        raise RankCollapseError(f"unknown executor {executor!r}; allowed: {', '.join(EXECUTORS)}")
    if executor == "dask" and not scheduler:
        raise RankCollapseError("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise RankCollapseError(f"workers must be >= 1, got {workers}")
    store = RunStore(out_dir)
    specs = list(runs)
    summary = SweepSummary(total=len(specs))
    todo = []
    for spec in specs:
        if store.is_done(spec):
            summary.skipped += 1
        else:
            todo.append(spec)
    start = time.perf_counter()
    bar = _Progress(len(todo), sum(s.expected_layers for s in todo), progress and bool(todo), label)

    def store_result(spec: RunSpec, result: RunResult, live_layers: bool) -> None:
        store.save(spec, result)
        if result.status == "ok":
            summary.finished += 1
        else:
            summary.failed += 1
            summary.failures.append((spec.run_id, result.error))
        if not live_layers:
            bar.layer(spec.expected_layers)
        bar.run()

    try:
        if todo and executor == "dask":
            _run_dask(todo, scheduler or "", store_result)
        elif todo and workers > 1:
            _run_pool(todo, workers, store_result, bar)
        else:
            for spec in todo:
                store_result(spec, execute_run(spec, on_layer=lambda t: bar.layer()), True)
    finally:
        bar.close()
        summary.wall_s = time.perf_counter() - start
    return summary


def _run_pool(
    todo: list[RunSpec],
    workers: int,
    store_result: Callable[[RunSpec, RunResult, bool], None],
    bar: _Progress,
) -> None:
    ctx = mp.get_context("spawn")
    ticks = ctx.Queue()
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                ticks.get(timeout=0.2)
            except queue.Empty:
                continue
            except (EOFError, OSError):
                return
            bar.layer()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(todo)),
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(ticks, threads),
    )
    pending: dict[Future[RunResult], RunSpec] = {}
    try:
        specs = iter(todo)
        _fill(pool, specs, pending, 2 * workers)
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in done:
                spec = pending.pop(fut)
                store_result(spec, fut.result(), True)
            _fill(pool, specs, pending, 2 * workers)
    except BaseException:
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        reader.join(timeout=1)


def _fill(pool: ProcessPoolExecutor, specs: Iterator[RunSpec], pending: dict, limit: int) -> None:
    """Keep at most ``limit`` runs queued, so an interrupt cancels little."""
    while len(pending) < limit:
        spec = next(specs, None)
        if spec is None:
            return
        pending[pool.submit(execute_run, spec)] = spec


def _run_dask(
    todo: list[RunSpec], scheduler: str, store_result: Callable[[RunSpec, RunResult, bool], None]
) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError as err:  # pragma: no cover - dask is a declared extra
        msg = "--executor dask needs dask[distributed]: pip install 'rankcollapse[dask]'"
        raise RankCollapseError(msg) from err
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as err:
        raise RankCollapseError(f"cannot reach Dask scheduler {scheduler!r}: {err}") from err
    futures = {}
    try:
        for spec in todo:
            fut = client.submit(execute_run, spec, key=f"rankcollapse-{spec.run_id}", pure=False)
            futures[fut.key] = (fut, spec)
        for fut in as_completed([f for f, _ in futures.values()]):
            spec = futures[fut.key][1]
            store_result(spec, fut.result(), False)
    except BaseException:
        client.cancel([f for f, _ in futures.values()])
        raise
    finally:
        client.close()
