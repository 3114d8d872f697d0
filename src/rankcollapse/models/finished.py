"""A finished run folder read back: :func:`read_run` reads ``config.json`` and ``metrics.csv`` of an
``analyze`` or ``simulate`` run (their declarations: ``rankcollapse.edge.runs``) into a
:class:`FinishedRun`, its rows and the facts its figures name (``mask``, ``mode``, ``model``, ``dtype``,
``d_qk``, ``layers``, ``size``). What ``rankcollapse plot`` and the figures of a finished folder read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rankcollapse.core.names import from_stored
from rankcollapse.core.names import read as read_name
from rankcollapse.edge.errors import RankCollapseError

__all__ = ["STORED_MODEL_KEYS", "FinishedRun", "read_run", "recorded_size", "size_fact"]

#: Keys of ``config.json``'s ``model`` record that an earlier release stored under another name, read
#: under the table's (``core.names.from_stored``: silently, as stored data): ``n_layers`` -> ``model_layers``.
STORED_MODEL_KEYS = ("model_layers",)


@dataclass(frozen=True)
class FinishedRun:
    """A run folder read back: its facts (``mask``, ``mode``, ``model``, ``dtype``, ``d_qk``, ``layers``),
    its rows and ``config`` (``config.json``'s ``config``: ``analyze`` and ``model``, or ``simulate``)."""

    folder: Path
    facts: dict[str, str]
    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)


def read_run(folder: str | Path) -> FinishedRun:
    """Read ``folder/config.json`` and ``folder/metrics.csv`` of a finished ``analyze`` or ``simulate``
    run through their declarations (``edge.runs.RUN_RECORD``, ``edge.runs.METRICS``: what the writer
    wrote them by; each cell parsed, numbers as floats, counts as ints, ``sink_heads`` as a tuple of
    ints) and the one input opener (regular files only, never blocking, a size cap); RankCollapseError
    (one line) when it is not one: a folder whose marker (``.rankcollapse.json``) does not say
    ``complete: true`` is refused (a folder from before markers is read as it is). ``facts``: mask,
    mode, model, dtype, d_qk and depth (layers)."""
    from rankcollapse.edge.folder import MARKER_NAME, read_marker
    from rankcollapse.edge.inputs import quote_path
    from rankcollapse.edge.runs import METRICS, RUN_RECORD

    path = Path(folder)
    marker = read_marker(path)
    if marker is not None and marker.get("complete") is not True:
        raise RankCollapseError(f"{quote_path(path)} is not a finished run: its {MARKER_NAME} says the run "
                                "did not complete (interrupted or failed); run it again")
    for name in ("config.json", "metrics.csv"):
        if not (path / name).exists():
            raise RankCollapseError(
                f"{quote_path(path)} is not a finished run: no {name}; "
                "allowed: a folder written by analyze or simulate"
            )
    record = RUN_RECORD.read(path / "config.json")
    rows = METRICS.read(path / "metrics.csv", required=("mu_rel",))
    cfg = record["config"]
    if isinstance(cfg.get("analyze"), dict):
        a, m = cfg["analyze"], cfg.get("model", {}) if isinstance(cfg.get("model"), dict) else {}
        m = cfg["model"] = from_stored(m, STORED_MODEL_KEYS)  # an earlier release's n_layers: model_layers
        d_qk = m.get("d_qk", a.get("d_qk"))
        facts = {
            "mask": str(m.get("mask") or a.get("mask") or "own"),
            "mode": str(a.get("mode", "")),
            "model": str(read_name(m, "model_label") or a.get("model", "")),
            "dtype": _analyze_dtype(a, m),
            "d_qk": f"d_qk {d_qk}" if d_qk is not None else "",
            "layers": f"{len(rows) - 1} layers",
            "size": size_fact(*recorded_size(cfg)),
        }
    elif isinstance(cfg.get("simulate"), dict):
        s = cfg["simulate"]
        facts = {
            "mask": str(s.get("mask", "")),
            "mode": str(read_name(s, "mode") or ""),
            "model": f"simulate N={read_name(s, 'tokens')}, d={s.get('d')}",
            "dtype": str(s.get("dtype", "")),
            "d_qk": f"d_qk {s.get('d_qk')}",
            "layers": f"{len(rows) - 1} layers",
            "size": "",  # the model fact names N and d
        }
    else:
        raise RankCollapseError(f"{quote_path(path / 'config.json')} is not from analyze or simulate")
    if not rows or "mu_rel" not in rows[0] or "layer" not in rows[0]:
        raise RankCollapseError(f"{quote_path(path / 'metrics.csv')} has no rows with layer and mu_rel")
    return FinishedRun(path, facts, rows, cfg)


def recorded_size(cfg: dict[str, Any]) -> tuple[Any, Any]:
    """What an analyze run read (``config.json``'s ``read``: excerpts, tokens), else its config's sizes (a
    folder written before ``read`` was recorded)."""
    read, a = cfg.get("read"), cfg.get("analyze", {})
    if isinstance(read, dict) and read.get("samples") and read.get("tokens"):
        return read["samples"], read["tokens"]
    return a.get("samples"), a.get("tokens")


def _analyze_dtype(analyze: dict[str, Any], model: dict[str, Any]) -> str:
    """An analyze run's dtype: its hidden states' (``model.dtype``, the model's own), else the config's. A
    run of an in-memory bfloat16 model written before results were labelled by the model's dtype says
    ``analyze.dtype: float32`` beside ``model.dtype: bfloat16``: read as bfloat16, its floor bfloat16's."""
    from rankcollapse.core.precision import ALL_DTYPE_NAMES

    own = model.get("dtype")
    return own if isinstance(own, str) and own in ALL_DTYPE_NAMES else str(analyze.get("dtype", ""))


def size_fact(samples: Any, tokens: Any) -> str:
    """A run's sample size as its label says it: ``2 × 512 tokens`` (excerpts × tokens)."""
    return f"{samples} × {tokens} tokens" if samples and tokens else ""
