"""Task functions: one kind of run each, ``task(params, on_layer) -> RunOutput``.

A task receives the flat parameter dict of one grid point (seed included) and a callback it calls
once per layer measured (for the progress bar). It returns rows for the tidy table and a
``summary`` of scalars for the run index. Tasks are thin adapters over the package's public APIs
(``dynamics.simulate``, ``models.analyze``, ``equilibria``); they must be importable top-level
functions so that process pools and Dask workers can call them.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.sweep import RunOutput

OnLayer = Callable[[int], None]


def toy(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """A deterministic, dependency-free task for testing the sweep engine.

    ``x(t) = x0 * rate**t`` for ``t = 0..layers``; ``sleep_s`` seconds per layer simulate work.
    Params: ``layers`` (int), ``rate`` (float), ``x0`` (float, default 1), ``sleep_s`` (default 0),
    ``seed`` (recorded only), ``fail`` (raise when true, to test failure handling).
    """
    if params.get("fail"):
        raise RankCollapseError(f"toy task asked to fail (seed={params.get('seed')})")
    rows = []
    x = float(params.get("x0", 1.0))
    for t in range(int(params["layers"]) + 1):
        if params.get("sleep_s"):
            time.sleep(float(params["sleep_s"]))
        rows.append({"layer": t, "mu": x, "log_mu": math.log(x) if x > 0 else float("-inf")})
        on_layer(t)
        x *= float(params["rate"])
    return RunOutput(rows, {"final_mu": rows[-1]["mu"]})


def _config_from(cls: type, params: dict[str, Any], extra: tuple[str, ...] = ()) -> Any:
    """Build dataclass ``cls`` from params; unknown keys (not in ``extra``) are an error."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - names - set(extra))
    if unknown:
        raise RankCollapseError(
            f"unknown {cls.__name__} setting(s) {unknown}; allowed: {', '.join(sorted(names))}"
        )
    return cls(**{k: v for k, v in params.items() if k in names})


_TASKS: dict[str, Callable[[dict[str, Any], OnLayer], RunOutput]] = {"toy": toy}


def register(name: str) -> Callable:
    """Decorator: register a task function under ``name``."""

    def deco(fn: Callable[[dict[str, Any], OnLayer], RunOutput]) -> Callable:
        _TASKS[name] = fn
        return fn

    return deco


def get_task(name: str) -> Callable[[dict[str, Any], OnLayer], RunOutput]:
    """The task registered under ``name`` (RankCollapseError naming the allowed ones otherwise)."""
    if name not in _TASKS:
        raise RankCollapseError(f"unknown task {name!r}; allowed: {', '.join(sorted(_TASKS))}")
    return _TASKS[name]
