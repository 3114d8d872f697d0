"""What a figure needs of a run (:class:`FigureRun`: its rows, dtype and title, the sink threshold, N
tokens and width d), from an :class:`~rankcollapse.models.analyze.AnalyzeResult` or a finished run read
back (:class:`~rankcollapse.models.finished.FinishedRun`): :func:`figure_run`. The title names the model,
mode, mask, d_qk, dtype and the sample size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rankcollapse.core.names import read as read_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.metrics.diagnostics import SINK_THRESHOLD
from rankcollapse.models.finished import FinishedRun, recorded_size
from rankcollapse.models.plots.style import wrap_title

__all__ = ["FigureRun", "figure_run", "run_title"]

@dataclass(frozen=True)
class FigureRun:
    """What a figure needs of a run: its rows, dtype and title, the sink threshold, N tokens and width d."""

    rows: Sequence[dict[str, Any]]
    dtype: str
    title: str = ""
    sink_threshold: float = SINK_THRESHOLD
    tokens: int | None = None
    width: int | None = None


def run_title(label: str, mode: str, mask: str, d_qk: Any, dtype: str, samples: Any, tokens: Any) -> str:
    """Two lines: the model, mode and mask; the dtype, d_qk and the sample size."""
    try:
        dq = f", d_qk {float(d_qk):g}"
    except (TypeError, ValueError):
        dq = ""
    size = f", {samples} excerpts × {tokens} tokens" if samples and tokens else ""
    return wrap_title(f"{label} — {mode}, mask {mask}\n{dtype}{dq}{size}")


def figure_run(result: Any) -> FigureRun:
    """An :class:`AnalyzeResult` or a :class:`FinishedRun` as what the figures read (one-line refusal
    of anything else); a FigureRun as it is."""
    if isinstance(result, FigureRun):
        return result
    if isinstance(result, FinishedRun):
        cfg = result.config
        a, m = cfg.get("analyze"), cfg.get("model")
        if isinstance(a, dict):
            m = m if isinstance(m, dict) else {}
            f = result.facts
            return FigureRun(
                result.rows,
                f["dtype"],
                run_title(
                    f["model"],
                    f["mode"],
                    f["mask"],
                    m.get("d_qk"),
                    f["dtype"],
                    *recorded_size(cfg),
                ),
                float(a.get("sink_threshold", SINK_THRESHOLD)),
                _int(recorded_size(cfg)[1]),
                _int(m.get("d_model")),
            )
        s = cfg.get("simulate", {})
        f = result.facts
        title = wrap_title(f"{f['model']} — {f['mode']}, mask {f['mask']}\n{f['dtype']}, {f['d_qk']}")
        tokens = _int(read_name(s, "tokens"))
        return FigureRun(result.rows, f["dtype"], title, tokens=tokens, width=_int(s.get("d")))
    rows, config, info = (getattr(result, k, None) for k in ("rows", "config", "model_info"))
    if not isinstance(rows, list) or config is None or not isinstance(info, dict):
        raise RankCollapseError(
            f"cannot draw {quote(type(result).__name__, 40)}; allowed: an AnalyzeResult "
            "(analyze(...)) or a finished run (read_run(folder))"
        )
    label = read_name(info, "model_label") or config.model
    ids = getattr(result, "ids", None)  # the tokens read: [b, n] (the config's sizes when none are kept)
    samples, tokens = (
        tuple(ids.shape) if ids is not None and ids.ndim == 2 else (config.samples, config.tokens)
    )
    title = run_title(label, config.mode, info.get("mask", ""), info.get("d_qk"), config.dtype, samples,
                      tokens)
    return FigureRun(
        rows, config.dtype, title, float(config.sink_threshold), _int(tokens), _int(info.get("d_model"))
    )


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
