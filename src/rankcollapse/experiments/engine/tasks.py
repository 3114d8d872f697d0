"""Tasks and their execution: ``task(params, on_layer) -> RunOutput``, run wherever a spec lands.

A task receives the flat parameter dict of one grid point (seed included) and a callback it calls
once per layer measured (for the progress bar). It returns rows for the tidy table and a
``summary`` of scalars for the run index. A task is a top-level function; workers find it by
``module:function`` (its *target*), so process pools and Dask workers need no registry. A task that
declares the keyword ``execution`` also gets the run's execution settings (``device``, ``batch_size``:
how it is computed, never what; see ``RunSpec.execution``).

A task reads its params under the names table's names (``core.names``): a story's YAML keeps the keys a
run's identity hashes (``n``, ``batch``, ``preset``, ``steps``), and the engine hands the task the params
with each stored key of the quantities its :class:`Task` declares (``Task.names``) renamed
(``RunSpec.named_params``). Which quantities a task names is its own: ``steps`` is the depth ``layers``
for a map iterated layer by layer, and the optimiser's steps for a training run (a task that names
nothing reads its params as written).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rankcollapse.edge.atomic import to_jsonable
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import error_line
from rankcollapse.edge.validate import check_param, param_float, param_int

OnLayer = Callable[[int], None]

#: The quantities a task names by default (``Task.names``): ``n`` is ``tokens``, ``batch`` ``samples``,
#: ``preset`` / ``variant`` ``mode`` in every task that stores them that way (the simulator's, the
#: measurements'); a task whose stored key means something else declares its own.
NAMED: tuple[str, ...] = ("tokens", "samples", "mode")


@dataclass
class RunOutput:
    """What a task returns: ``rows`` for the tidy table, ``summary`` scalars for the index."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    """A finished (or failed) run as sent back to the process that stores it."""

    run_id: str
    status: str  # "ok" or "failed"
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    wall_s: float
    error: str = ""  # one line: why it failed
    detail: str = ""  # the error's whole text (a library's tables included), for the record only


def toy(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """A deterministic, dependency-free task for testing the engine.

    ``x(t) = x0 * rate**t`` for ``t = 0..layers``; ``sleep_s`` seconds per layer simulate work.
    Params: ``layers`` (int), ``rate`` (float), ``x0`` (float, default 1), ``sleep_s`` (default 0),
    ``seed`` (recorded only), ``fail`` (raise when true, to test failure handling).
    """
    if params.get("fail"):
        raise RankCollapseError(f"toy task asked to fail (seed={params.get('seed')})")
    rows = []
    x = float(params.get("x0", 1.0))
    for t in range(param_int(params, "layers", low=0) + 1):
        if params.get("sleep_s"):
            time.sleep(param_float(params, "sleep_s"))
        rows.append({"layer": t, "mu": x, "log_mu": math.log(x) if x > 0 else float("-inf")})
        on_layer(t)
        x *= param_float(params, "rate")
    return RunOutput(rows, {"final_mu": rows[-1]["mu"]})


#: Tasks the engine itself provides (a spec with an empty target names one of these).
BUILTIN_TASKS: dict[str, Callable[[dict[str, Any], OnLayer], RunOutput]] = {"toy": toy}


def toy_cost(params: dict[str, Any]) -> float:
    """Seconds of one :func:`toy` run: ``sleep_s`` per layer."""
    return check_param(params, "sleep_s", 0.0, low=0, integer=False) * (check_param(params, "layers") + 1)


def task_target(fn: Callable[..., Any]) -> str:
    """``"module:function"`` of a top-level function (RankCollapseError for lambdas and closures)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not qualname or "<" in qualname or "." in qualname:
        raise RankCollapseError(f"a task must be a top-level function, got {fn!r}"[:200])
    return f"{module}:{qualname}"


TaskFn = Callable[[dict[str, Any], OnLayer], RunOutput]


@dataclass(frozen=True)
class Task:
    """A task and what the engine may ask of it besides running it (declared, never bolted on).

    ``fn``: ``(params, on_layer) -> RunOutput``, a top-level function (workers import it by
    ``module:function``; its ``__name__`` is the task name hashed into every run's identity).
    ``cost_s(params)``: estimated seconds of one run on one core (the estimate printed before a
    sweep and the order runs start in; None: unknown). ``identity_facts(params)``: what a parameter
    resolves to on this machine (e.g. the weights ``paper:<ckpt>`` loads); part of the run identity.
    ``names``: the quantities of ``core.names`` whose stored keys its params may use (module docstring;
    :data:`NAMED` unless given): ``fn``, ``cost_s`` and ``identity_facts`` read them under the table's
    names, the run's identity hashes them as stored.
    """

    fn: TaskFn
    cost_s: Callable[[dict[str, Any]], float] | None = None
    identity_facts: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    names: tuple[str, ...] = NAMED

    def __post_init__(self) -> None:
        task_target(self.fn)  # a top-level, importable function

    @property
    def name(self) -> str:
        return self.fn.__name__

    @property
    def target(self) -> str:
        return task_target(self.fn)


def resolve_target(target: str, task: str) -> Callable[[dict[str, Any], OnLayer], RunOutput]:
    """The task callable of a spec: its ``target`` if set, else the built-in task ``task``."""
    if not target:
        if task not in BUILTIN_TASKS:
            raise RankCollapseError(f"unknown task {task!r}; allowed: {', '.join(sorted(BUILTIN_TASKS))}")
        return BUILTIN_TASKS[task]
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise RankCollapseError(f"cannot find task {target!r}: {err}"[:200]) from err


def config_from(cls: type, params: dict[str, Any], extra: tuple[str, ...] = ()) -> Any:
    """Build dataclass ``cls`` from params; unknown keys (not in ``extra``) are an error."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - names - set(extra))
    if unknown:
        raise RankCollapseError(
            f"unknown {cls.__name__} setting(s) {unknown}; allowed: {', '.join(sorted(names))}"
        )
    return cls(**{k: v for k, v in params.items() if k in names})


def accepts_execution(fn: Callable[..., Any]) -> bool:
    """Whether a task takes the keyword ``execution`` (``{"device": ..., "batch_size": ...}``)."""
    try:
        return "execution" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def check_execution(fn: Callable[..., Any], task: str, execution: dict[str, Any]) -> None:
    """Refuse (one line) a device other than the CPU for a task that cannot take one: it would run on
    the CPU while the record says otherwise. A batch size a task cannot take is ignored (the task runs
    its samples at once, as its summary says)."""
    device = str(execution.get("device") or "cpu")
    if device != "cpu" and not accepts_execution(fn):
        raise RankCollapseError(f"task {task!r} runs on the CPU only; --device {device} does not apply to it")


def execute_run(spec: Any, on_layer: OnLayer | None = None) -> RunResult:
    """Run one :class:`RunSpec` wherever it is called (this process, a pool worker, a Dask worker).

    Exceptions become ``status="failed"`` with one line as the reason (``edge.errors.error_line``: a
    library's multi-line text stops at its first line; the whole text is the record's ``detail``), so
    one bad point never stops a sweep; KeyboardInterrupt propagates. ``on_layer`` defaults to the pool
    worker's tick queue (see ``engine.executors``), else to nothing. The spec's ``execution`` settings go
    to a task that takes them (:func:`accepts_execution`); :func:`check_execution` refuses the others'
    devices.
    """
    if on_layer is None:
        from rankcollapse.experiments.engine.workers import worker_tick

        def on_layer(t: int) -> None:
            worker_tick(t, spec.run_id)

    start = time.perf_counter()
    try:
        fn = resolve_target(spec.target, spec.task)
        execution = dict(getattr(spec, "execution", None) or {})
        check_execution(fn, spec.task, execution)
        params = spec.named_params  # the names table's names (module docstring)
        if execution and accepts_execution(fn):
            out = fn(params, on_layer, execution=execution)
        else:
            out = fn(params, on_layer)
        rows = [{k: to_jsonable(v) for k, v in row.items()} for row in out.rows]
        return RunResult(spec.run_id, "ok", rows, to_jsonable(out.summary), time.perf_counter() - start)
    except Exception as err:  # recorded as a failed run; the sweep goes on
        detail = "".join(traceback.format_exception_only(type(err), err)).strip()
        return RunResult(spec.run_id, "failed", [], {}, time.perf_counter() - start, error_line(err), detail)
