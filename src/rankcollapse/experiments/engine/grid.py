"""Grid expansion and run identity: one :class:`RunSpec` per point of an experiment's grid.

A *run* is one point of a grid: a task name and a flat dict of JSON parameters, seed included.
Its identity is the first 12 hex digits of SHA-256 of the canonical JSON of
``(experiment, task, params)`` (plus the task's ``identity_facts`` when it has them: what a
parameter resolves to on this machine), so the same command finds the same runs again (resume).
The identity hashes the params as the config stores them (``n``, ``batch``, ``preset``, ...); the task
reads them under the names table's names (:attr:`RunSpec.named_params`, ``engine.tasks``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rankcollapse.core.names import from_stored
from rankcollapse.edge.atomic import to_jsonable
from rankcollapse.edge.errors import RankCollapseError

#: The most runs one experiment's grid may name (its product is checked before it is expanded).
MAX_GRID_RUNS = 100_000


def expand_grid(base: dict[str, Any], grid: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of ``grid`` axes over ``base``: one flat params dict per point.

    Axis order is the order of ``grid``'s keys; the last axis varies fastest. An axis with one
    value behaves like a base setting. An empty grid gives ``[base]``.

    >>> expand_grid({"d": 2}, {"mask": ["causal", "complete"], "seed": [0, 1]})[1]
    {'d': 2, 'mask': 'causal', 'seed': 1}
    """
    for axis, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or len(values) == 0:
            raise RankCollapseError(f"grid axis {axis!r} must be a non-empty list, got {values!r}"[:200])
    size = math.prod(len(v) for v in grid.values())
    if size > MAX_GRID_RUNS:  # checked before expanding: a 3 KB YAML can name 1.6e9 runs
        axes = " x ".join(f"{len(v)} {k}" for k, v in grid.items())
        raise RankCollapseError(
            f"the grid names {size:.3g} runs ({axes}); allowed: at most {MAX_GRID_RUNS} runs per experiment"
        )
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


def run_identity(
    experiment: str, task: str, params: dict[str, Any], facts: dict[str, Any] | None = None
) -> str:
    """12 hex digits of SHA-256 of the canonical ``(experiment, task, params)``, plus ``facts`` when
    there are any (what a parameter resolves to on this machine, e.g. which weights a model name
    loads: a changed fact is a new run, not a stale result reused)."""
    key: dict[str, Any] = {"experiment": experiment, "task": task, "params": params}
    if facts:
        key["facts"] = facts
    blob = canonical_json(key)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


#: Execution settings a run may carry (``RunSpec.execution``): where it runs and in how many pieces.
EXECUTION_KEYS: tuple[str, ...] = ("device", "batch_size")


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep.

    ``task``: the task's name (part of the identity). ``target``: ``"module:function"`` where a
    worker finds the task callable (not part of the identity; empty = the engine's toy task
    registry, see ``engine.tasks``). ``axes``: the params that vary in its experiment's grid.
    ``facts``: what the params resolve to here (the task's ``identity_facts(params)``; part of the
    identity when not empty). ``execution``: how the run is computed, not what it computes
    (:data:`EXECUTION_KEYS`: ``device``, ``batch_size``); not part of the identity, so a run computed
    on another device or in other batches is the same run, found again on resume. ``params`` are as
    stored (the identity hashes them); ``names``: the quantities whose stored keys they may use
    (``Task.names``), read under the table's names by :attr:`named_params` (not part of the identity).
    """

    experiment: str
    task: str
    params: dict[str, Any]
    axes: tuple[str, ...] = ()
    run_id: str = ""
    target: str = field(default="", compare=False)
    facts: dict[str, Any] = field(default_factory=dict)
    execution: dict[str, Any] = field(default_factory=dict, compare=False)
    names: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.run_id:
            object.__setattr__(
                self, "run_id", run_identity(self.experiment, self.task, self.params, self.facts)
            )

    @property
    def named_params(self) -> dict[str, Any]:
        """The params under the names table's names (``core.names.from_stored`` of :attr:`names`): what
        the task reads."""
        return from_stored(self.params, self.names)

    @property
    def seed(self) -> int | None:
        seed = self.params.get("seed")
        return None if seed is None else int(seed)

    @property
    def expected_layers(self) -> int | None:
        """Layer ticks the run will send (depth + 1 for X(0)): the ``layers`` param, else a depth written
        in the model's name (``random:bert-base-uncased,layers=128``); None when the depth is the
        model's own (known only once it is loaded)."""
        layers = self.params.get("layers")
        if isinstance(layers, int) and not isinstance(layers, bool):
            return layers + 1
        named = named_depth(self.params.get("model"))
        return None if named is None else named + 1


def named_depth(model: object) -> int | None:
    """The depth a model name sets (``random:bert-base-uncased,layers=128`` -> 128), else None."""
    found = re.search(r",layers=(\d+)$", model) if isinstance(model, str) else None
    return int(found.group(1)) if found else None


def make_runs(
    experiment: str,
    task: str,
    base: dict[str, Any],
    grid: dict[str, Sequence[Any]],
    target: str = "",
    facts: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    execution: dict[str, Any] | None = None,
    names: tuple[str, ...] = (),
    stored: dict[str, str] | None = None,
) -> list[RunSpec]:
    """The runs of one experiment; duplicate points (same identity) are kept once. ``facts``: the
    task's ``identity_facts`` (see :class:`RunSpec`), called once per run. ``execution``: every run's
    execution settings (not part of the identity). ``base`` and ``grid`` under the table's names, with
    ``stored`` (table name -> the key the config wrote) mapping them back for the identity, each key in
    its place; ``names``: the quantities the task reads by name (:attr:`RunSpec.names`)."""
    back = stored or {}
    axes = tuple(back.get(k, k) for k in grid)
    seen: dict[str, RunSpec] = {}
    for named in expand_grid(base, grid):
        params = {back.get(k, k): v for k, v in named.items()}
        spec = RunSpec(
            experiment,
            task,
            params,
            axes,
            target=target,
            facts=dict(facts(named)) if facts is not None else {},
            execution=dict(execution or {}),
            names=names,
        )
        seen.setdefault(spec.run_id, spec)
    return list(seen.values())
