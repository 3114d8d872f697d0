"""Figures of analysis rows (``metrics.csv`` or :attr:`AnalyzeResult.rows`), and finished runs overlaid.

- :func:`plot_collapse`: one run. Top: ``mu`` and ``mu_rel`` against the layer t (log y), the
  batch mean with its min-max band, ``mu_rel``'s precision floor (``32 eps`` of the run's dtype)
  and the layers where every sample is at it; bottom: the token-geometry panels of paper
  Figure 4 (:func:`plot_token_geometry`: full-rank share, smallest singular value, mean
  ``|cosine|``). What ``rankcollapse analyze --plot`` draws (``DIR/mu.png``).
- :func:`plot`: finished runs (folders with ``config.json`` and ``metrics.csv`` from ``analyze``
  or ``simulate``) overlaid on one figure, one curve per run labelled by ``by`` (``mask``,
  ``mode``, ``model`` or ``dtype``); ``rankcollapse plot DIR DIR ... --by mask`` is this function.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankcollapse.errors import RankCollapseError
from rankcollapse.validate import quote

PANELS: tuple[tuple[str, str, bool], ...] = (
    ("full_rank", "full-rank share", False),
    ("sigma_min", "smallest singular value", True),
    ("mean_abs_cos", "mean |cosine| (anisotropy)", False),
)
COLLAPSE: tuple[tuple[str, str], ...] = (
    ("mu", "mu = ||X - 1 mean(X)||_F"),
    ("mu_rel", "mu_rel = mu / ||X||_F"),
)
#: What :func:`plot` can label its curves by.
BY: tuple[str, ...] = ("mask", "mode", "model", "dtype")
#: Every fact of a run a label or a title may name (``BY`` and the run's d_qk and depth).
FACTS: tuple[str, ...] = (*BY, "d_qk", "layers")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _value(row: dict[str, Any], key: str) -> float:
    try:
        v = float(row.get(key, math.nan))
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def _positive(v: float) -> float:
    """A value a log axis can show (NaN for 0, negative or non-finite: a gap in the curve)."""
    return v if v > 0 else math.nan


def _draw_collapse(ax_mu: Any, ax_rel: Any, rows: Sequence[dict[str, Any]], label: str, color: str,
                   band: bool = True) -> None:
    layers = [int(float(r["layer"])) for r in rows]
    for ax, (key, _) in ((ax_mu, COLLAPSE[0]), (ax_rel, COLLAPSE[1])):
        ax.plot(layers, [_positive(_value(r, key)) for r in rows], "-", color=color, label=label, lw=1.4)
        if band and rows and f"{key}_min" in rows[0]:
            ax.fill_between(layers, [_positive(_value(r, f"{key}_min")) for r in rows],
                            [_positive(_value(r, f"{key}_max")) for r in rows], color=color, alpha=0.15, lw=0)
    at = [(t, _value(r, "mu_rel")) for t, r in zip(layers, rows, strict=True) if _value(r, "at_floor") >= 1.0]
    if at:
        ax_rel.plot([t for t, _ in at], [_positive(v) for _, v in at], ".", color="0.45", ms=5)


def _draw_floors(ax_rel: Any, dtypes: Sequence[str]) -> None:
    from rankcollapse.core.precision import floor_rel

    for dtype in dict.fromkeys(dtypes):
        ax_rel.axhline(floor_rel(dtype), color="C3", ls="--" if dtype == "float32" else ":", lw=1,
                       label=f"precision floor {floor_rel(dtype):.1e} ({dtype})")


def _finish_collapse(ax_mu: Any, ax_rel: Any, any_at_floor: bool) -> None:
    for ax, (_, title) in ((ax_mu, COLLAPSE[0]), (ax_rel, COLLAPSE[1])):
        ax.set_yscale("log")
        ax.set_xlabel("layer t (0 = embeddings)")
        ax.set_title(title)
    if any_at_floor:
        ax_rel.plot([], [], ".", color="0.45", label="every sample at the floor")
    for ax in (ax_mu, ax_rel):
        ax.legend(fontsize=7)


def _draw_geometry(axes: Sequence[Any], rows: Sequence[dict[str, Any]]) -> None:
    layers = [int(float(r["layer"])) for r in rows]
    for ax, (key, label, logy) in zip(axes, PANELS, strict=True):
        values = [_value(r, key) for r in rows]
        ax.plot(layers, values, marker="o", ms=3)
        lo, hi = f"{key}_min", f"{key}_max"
        if rows and lo in rows[0] and hi in rows[0]:
            ax.fill_between(layers, [_value(r, lo) for r in rows], [_value(r, hi) for r in rows], alpha=0.2)
        if logy and all(v > 0 for v in values):
            ax.set_yscale("log")
        ax.set_xlabel("layer t (0 = embeddings)")
        ax.set_title(label)


def _save(fig: Any, path: str | Path) -> Path:
    from rankcollapse.io import atomic_path

    plt = _pyplot()
    out = Path(path)
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, dpi=120, format=out.suffix.lstrip(".") or "png")
    except OSError as err:
        raise RankCollapseError(f"cannot write plot {quote(str(out))}: {err.strerror}") from None
    finally:
        plt.close(fig)
    return out


def plot_token_geometry(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Draw the three geometry panels (x: layer t, row 0 = embeddings) into ``path`` (PNG/PDF/SVG)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), constrained_layout=True)
    _draw_geometry(axes, rows)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_collapse(rows: Sequence[dict[str, Any]], path: str | Path, *, dtype: str, title: str = "") -> Path:
    """``mu`` and ``mu_rel`` per layer with ``mu_rel``'s precision floor, the geometry panels below
    (module docstring) into ``path`` (PNG/PDF/SVG). ``dtype``: the run's (``float32`` / ``float64``)."""
    if not rows:
        raise RankCollapseError("nothing to plot: the run has no rows")
    plt = _pyplot()
    fig = plt.figure(figsize=(12, 7), constrained_layout=True)
    grid = fig.add_gridspec(2, 6)
    ax_mu, ax_rel = fig.add_subplot(grid[0, :3]), fig.add_subplot(grid[0, 3:])
    _draw_collapse(ax_mu, ax_rel, rows, "batch mean (band: min-max over samples)", "C0")
    _draw_floors(ax_rel, [dtype])
    _finish_collapse(ax_mu, ax_rel, any(_value(r, "at_floor") >= 1.0 for r in rows))
    if all(k in rows[0] for k, _, _ in PANELS):
        _draw_geometry([fig.add_subplot(grid[1, 2 * i : 2 * i + 2]) for i in range(3)], rows)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


@dataclass(frozen=True)
class FinishedRun:
    """A run folder read back: its facts (``mask``, ``mode``, ``model``, ``dtype``) and its rows."""

    folder: Path
    facts: dict[str, str]
    rows: list[dict[str, str]]


def read_run(folder: str | Path) -> FinishedRun:
    """Read ``folder/config.json`` and ``folder/metrics.csv`` of a finished ``analyze`` or ``simulate``
    run through the one input opener (regular files only, never blocking, a size cap); RankCollapseError
    (one line) when it is not one: a folder whose marker (``.rankcollapse.json``) does not say
    ``complete: true`` is refused (a folder from before markers is read as it is). ``facts``: mask,
    mode, model, dtype, d_qk and depth (layers)."""
    from rankcollapse.inputs import quote_path, read_json, read_text
    from rankcollapse.io import MARKER_NAME, read_marker

    path = Path(folder)
    marker = read_marker(path)
    if marker is not None and marker.get("complete") is not True:
        raise RankCollapseError(f"{quote_path(path)} is not a finished run: its {MARKER_NAME} says the run "
                                "did not complete (interrupted or failed); run it again")
    for name in ("config.json", "metrics.csv"):
        if not (path / name).exists():
            raise RankCollapseError(f"{quote_path(path)} is not a finished run: no {name}; "
                                    "allowed: a folder written by analyze or simulate")
    record = read_json(path / "config.json", "run record")
    try:
        rows = list(csv.DictReader(read_text(path / "metrics.csv", "metrics table").splitlines()))
    except csv.Error as err:
        raise RankCollapseError(f"{quote_path(path / 'metrics.csv')} is not a CSV table: {err}") from None
    cfg = record.get("config", {}) if isinstance(record, dict) else {}
    cfg = cfg if isinstance(cfg, dict) else {}
    if isinstance(cfg.get("analyze"), dict):
        a, m = cfg["analyze"], cfg.get("model", {}) if isinstance(cfg.get("model"), dict) else {}
        d_qk = m.get("d_qk", a.get("d_qk"))
        facts = {"mask": str(m.get("mask") or a.get("mask") or "own"), "mode": str(a.get("mode", "")),
                 "model": str(m.get("label") or a.get("model", "")), "dtype": str(a.get("dtype", "")),
                 "d_qk": f"d_qk {d_qk}" if d_qk is not None else "", "layers": f"{len(rows) - 1} layers"}
    elif isinstance(cfg.get("simulate"), dict):
        s = cfg["simulate"]
        facts = {"mask": str(s.get("mask", "")), "mode": str(s.get("preset", "")),
                 "model": f"simulate n={s.get('n')}, d={s.get('d')}", "dtype": str(s.get("dtype", "")),
                 "d_qk": f"d_qk {s.get('d_qk')}", "layers": f"{len(rows) - 1} layers"}
    else:
        raise RankCollapseError(f"{quote_path(path / 'config.json')} is not from analyze or simulate")
    if not rows or "mu_rel" not in rows[0] or "layer" not in rows[0]:
        raise RankCollapseError(f"{quote_path(path / 'metrics.csv')} has no rows with layer and mu_rel")
    return FinishedRun(path, facts, rows)


def _labels(runs: Sequence[FinishedRun], by: str) -> list[str]:
    """Each run's value of ``by``, followed by every other fact in which the runs differ (mode, mask,
    d_qk, depth, ...): two curves never carry the same label while their runs differ; the folder's
    name is added where even that leaves two alike."""
    differ = [k for k in FACTS if k != by and len({r.facts[k] for r in runs}) > 1]
    labels = [", ".join(v for v in [r.facts[by], *(r.facts[k] for k in differ)] if v) for r in runs]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} ({r.folder.name})" for lab, r in zip(labels, runs, strict=True)]
    return labels


def plot(runs: Sequence[str | Path], out: str | Path, *, by: str = "mask", title: str = "") -> Path:
    """Overlay finished runs (``analyze`` or ``simulate`` folders) on one figure: ``mu`` and ``mu_rel``
    against the layer t, one curve per run labelled by its ``by`` (``mask``, ``mode``, ``model`` or
    ``dtype``), the precision floor of each dtype present. The title names what the runs share.
    Returns ``out`` (PNG/PDF/SVG by its suffix)."""
    if by not in BY:
        raise RankCollapseError(f"unknown --by {quote(str(by), 30)}; allowed: {', '.join(BY)}")
    if not runs:
        raise RankCollapseError("give at least one run folder")
    finished = [read_run(r) for r in runs]
    labels = _labels(finished, by)
    plt = _pyplot()
    fig, (ax_mu, ax_rel) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for i, (run, label) in enumerate(zip(finished, labels, strict=True)):
        _draw_collapse(ax_mu, ax_rel, run.rows, label, f"C{i % 10}", band=len(finished) <= 3)
    _draw_floors(ax_rel, [r.facts["dtype"] for r in finished if r.facts["dtype"] in ("float32", "float64")])
    _finish_collapse(ax_mu, ax_rel, any(_value(row, "at_floor") >= 1.0 for r in finished for row in r.rows))
    shared = [f"{k} {finished[0].facts[k]}" if k in BY else finished[0].facts[k] for k in FACTS
              if k != by and len({r.facts[k] for r in finished}) == 1 and finished[0].facts[k]]
    fig.suptitle(title or (f"by {by}" + (" — " + ", ".join(shared) if shared else "")))
    return _save(fig, out)
