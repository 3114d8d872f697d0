"""Executors: run every unfinished spec in this process, a local process pool, or on Dask.

``run_sweep(specs, out_dir)`` skips runs already finished in ``out_dir``, stores each result as
it arrives (``engine.store``) and returns counts. ``local``: ``workers`` spawned processes
(1 = in this process); they die with the parent, even on ``kill -9`` (``engine.workers``), and
Ctrl-C stops them at once. ``dask``: a ``distributed`` scheduler address; results come back
to this process, which writes them, so Dask workers need no shared file system.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import error_line
from rankcollapse.edge.messages import warning
from rankcollapse.edge.validate import quote
from rankcollapse.experiments.engine.costs import wall_seconds
from rankcollapse.experiments.engine.grid import RunSpec
from rankcollapse.experiments.engine.progress import SweepProgress, run_weights
from rankcollapse.experiments.engine.store import RunStore
from rankcollapse.experiments.engine.tasks import RunResult, execute_run
from rankcollapse.experiments.engine.workers import init_worker

EXECUTORS = ("local", "dask")
_ADDRESS = re.compile(r"^((tcp|tls|ucx|ws|wss)://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$|^inproc://\S+$")


@dataclass
class SweepSummary:
    """Counts of one ``run_sweep`` call."""

    total: int = 0
    skipped: int = 0
    finished: int = 0
    failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0


def default_workers() -> int:
    """min(2, cpu count)."""
    return max(1, min(2, os.cpu_count() or 1))


def check_executor(executor: str, scheduler: str | None, workers: int | None) -> None:
    """Refuse options that do not apply (RankCollapseError, one line naming the option)."""
    if executor not in EXECUTORS:
        raise RankCollapseError(f"unknown executor {quote(str(executor))}; allowed: {', '.join(EXECUTORS)}")
    if executor == "local" and scheduler is not None:
        raise RankCollapseError("--scheduler applies only with --executor dask (the local executor has none)")
    if executor == "dask":
        if not scheduler:
            raise RankCollapseError("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
        if not _ADDRESS.match(scheduler):
            raise RankCollapseError(
                f"--scheduler {quote(scheduler)} is not a scheduler address; expected e.g. tcp://10.0.0.5:8786"
            )
        if workers is not None:
            raise RankCollapseError("--workers applies only with --executor local (Dask has its own workers)")
    cpus = os.cpu_count() or 1
    if workers is not None and not 1 <= workers <= cpus:
        raise RankCollapseError(f"--workers must be between 1 and {cpus} (the CPUs here), got {workers}")


def order_runs(specs: list[RunSpec], weights: dict[str, float], workers: int) -> list[RunSpec]:
    """The order runs start in: one lane takes the cheapest runs while the others take the longest.

    Longest first alone (the least idle time at the end) kept every worker on a long run for minutes
    at the start of a sweep, nothing finishing ("0 of 739 runs" for 6 min). Here, of ``lanes = max(workers,
    2)``, the longest runs fill ``lanes - 1`` and the cheapest fill one, in proportion to their estimated
    seconds (``weights``): the run after a long one is cheap until the cheap ones caught up with its cost.
    A pool taking runs in this order has runs finishing from the first minute; the longest still start
    early, and what is left at the end is cheap. Ties keep the given order.
    """
    lanes = max(int(workers), 2)
    by_cost = sorted(specs, key=lambda s: -weights.get(s.run_id, 0.0))
    out: list[RunSpec] = []
    i, j = 0, len(by_cost) - 1
    long_s = short_s = 0.0
    while i <= j:
        if long_s <= (lanes - 1) * short_s:
            spec, i = by_cost[i], i + 1
            long_s += weights.get(spec.run_id, 0.0)
        else:
            spec, j = by_cost[j], j - 1
            short_s += weights.get(spec.run_id, 0.0)
        out.append(spec)
    return out


def run_sweep(
    runs: Iterable[RunSpec],
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    label: str = "sweep",
    cost: Callable[[RunSpec], float | None] | None = None,
) -> SweepSummary:
    """Run every spec not already finished in ``out_dir``; store each as it completes.

    ``executor="local"``: ``workers`` processes (default ``min(2, cpu)``; 1 runs in this process), taking
    the runs in :func:`order_runs`' order (runs finish from the start, the longest start early).
    ``executor="dask"``: submit to the ``distributed`` scheduler at ``scheduler``
    (e.g. ``tcp://10.0.0.1:8786``). ``progress``: progress on stderr (off by default in Python, as every
    entry point). ``cost``: a run's estimated seconds (None: unknown), which weighs it in the progress and
    its time left (``engine.progress``). Returns counts; does not
    raise on failed runs.
    """
    check_executor(executor, scheduler, workers)
    workers = default_workers() if workers is None else workers
    store = RunStore(out_dir)
    specs = list(runs)
    summary = SweepSummary(total=len(specs))
    todo, misfiled = [], []
    for spec in specs:
        if store.is_done(spec):
            summary.skipped += 1
        else:
            todo.append(spec)
            misfiled += [why] if (why := store.misfiled(spec)) else []
    if misfiled:  # another run's record under this run's name: computed again, said once
        more = f" (and {len(misfiled) - 1} more)" if len(misfiled) > 1 else ""
        warning(f"{misfiled[0]}{more}; computed again")
    start = time.perf_counter()
    estimate = cost or (lambda s: None)
    weights = run_weights(todo, estimate)
    lanes = 1 if executor == "dask" or workers <= 1 else min(workers, len(todo))
    todo = order_runs(todo, weights, lanes) if executor == "local" else todo
    estimated = [c for s in todo if (c := estimate(s)) is not None]
    # where the time left starts: the pre-sweep line's figure (a Dask cluster's workers are not known here)
    expected = wall_seconds(sum(weights.values()), lanes) if estimated and executor == "local" else None
    bar = SweepProgress(todo, weights, progress and bool(todo), label, expected_s=expected)

    def store_result(spec: RunSpec, result: RunResult, live_layers: bool) -> None:
        store.save(spec, result)
        if result.status == "ok":
            summary.finished += 1
        else:
            summary.failed += 1
            summary.failures.append((spec.run_id, result.error))
        bar.run(spec.run_id)

    try:
        if todo and executor == "dask":
            _run_dask(todo, scheduler or "", store_result)
        elif todo and workers > 1:
            _run_pool(todo, workers, store_result, bar)
        else:
            for spec in todo:
                ticks = lambda t, rid=spec.run_id: bar.layer(rid)  # noqa: E731
                store_result(spec, execute_run(spec, on_layer=ticks), True)
    finally:
        bar.close()
        summary.wall_s = time.perf_counter() - start
    return summary


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """SIGKILL every worker of ``pool`` (an interrupted sweep must not wait for running tasks)."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            proc.kill()
        except (OSError, ValueError):
            continue


def _run_pool(
    todo: list[RunSpec],
    workers: int,
    store_result: Callable[[RunSpec, RunResult, bool], None],
    bar: SweepProgress,
) -> None:
    ctx = mp.get_context("spawn")
    ticks = ctx.Queue()
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                run_id = ticks.get(timeout=0.2)
            except queue.Empty:
                continue
            except (EOFError, OSError, ValueError):
                return
            bar.layer(str(run_id))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(todo)),
        mp_context=ctx,
        initializer=init_worker,
        initargs=(ticks, threads, os.getpid()),
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
        _kill_workers(pool)
        raise
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        reader.join(timeout=1)
        ticks.close()
        ticks.join_thread()


def _fill(pool: ProcessPoolExecutor, specs: Iterator[RunSpec], pending: dict, limit: int) -> None:
    """Keep at most ``limit`` runs queued, so an interrupt cancels little."""
    while len(pending) < limit:
        spec = next(specs, None)
        if spec is None:
            return
        pending[pool.submit(execute_run, spec)] = spec


def dask_workers(scheduler: str) -> int | None:
    """How many workers the Dask scheduler at ``scheduler`` has now (None when it cannot say)."""
    try:
        from distributed import Client
    except Exception:  # no distributed: the sweep itself says so in one line
        return None
    try:
        with Client(scheduler, timeout="10s") as client:
            return len(client.scheduler_info().get("workers", {})) or None
    except Exception as err:  # not reachable: the sweep itself says so in one line
        _release_half_built(err, Client)
        return None


def _release_half_built(err: BaseException, kind: type) -> None:
    """Stop the Client a failed constructor left behind (found in the traceback's frames): its
    ``__del__`` would close it at exit, wait 20 s on a loop that never connected and print a
    ``Client.__del__`` traceback after our line. Its loop is stopped and it is marked as failed before
    it had one (its own ``__del__`` then does nothing)."""
    tb = err.__traceback__
    while tb is not None:
        client = tb.tb_frame.f_locals.get("self")
        if isinstance(client, kind):
            try:
                client._loop_runner.stop()
            except Exception:
                pass
            client._Client__loop = None
        tb = tb.tb_next


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
    except Exception as err:  # OSError, TimeoutError, ValueError for a malformed address, ...
        reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        _release_half_built(err, Client)
        raise RankCollapseError(f"cannot reach Dask scheduler {quote(scheduler)}: {reason}") from None
    futures = {}
    lost = (f"lost the Dask scheduler {quote(scheduler)} mid-sweep ({{}}); the finished runs are kept and "
            "the next call resumes")
    try:
        try:
            for spec in todo:
                fut = client.submit(execute_run, spec, key=f"rankcollapse-{spec.run_id}", pure=False)
                futures[fut.key] = (fut, spec)
            arrived = as_completed([f for f, _ in futures.values()])
        except Exception as err:  # the connection went: one line of ours, not distributed's text
            raise RankCollapseError(lost.format(error_line(err))) from None
        while True:
            try:
                fut = next(arrived)
            except StopIteration:
                break
            except Exception as err:
                raise RankCollapseError(lost.format(error_line(err))) from None
            spec = futures[fut.key][1]
            store_result(spec, _dask_result(fut, spec), False)
    except BaseException:
        client.cancel([f for f, _ in futures.values()])
        raise
    finally:
        client.close()


def _dask_result(fut: Any, spec: RunSpec) -> RunResult:
    """A Dask future's run, or a failed run whose reason is one line (a worker that died, ``KilledWorker``;
    a result that did not come back; a cancelled run) and whose record keeps Dask's whole text."""
    try:
        return fut.result()
    except Exception as err:
        detail = "".join(traceback.format_exception_only(type(err), err)).strip()
        reason = f"Dask did not return it ({error_line(err)})"
        return RunResult(spec.run_id, "failed", [], {}, 0.0, reason, detail)
