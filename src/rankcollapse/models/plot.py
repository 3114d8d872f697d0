"""Token-geometry panels of paper Figure 4: full-rank share, smallest singular value and mean
absolute cosine similarity against depth, from analysis rows (``metrics.csv`` or
:attr:`AnalyzeResult.rows`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

PANELS: tuple[tuple[str, str, bool], ...] = (
    ("full_rank", "full-rank share", False),
    ("sigma_min", "smallest singular value", True),
    ("mean_abs_cos", "mean |cosine| (anisotropy)", False),
)


def plot_token_geometry(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Draw the three panels (x: layer t, row 0 = embeddings) into ``path`` (PNG/PDF/SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = [int(r["layer"]) for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), constrained_layout=True)
    for ax, (key, label, logy) in zip(axes, PANELS, strict=True):
        values = [float(r[key]) for r in rows]
        ax.plot(layers, values, marker="o", ms=3)
        lo, hi = f"{key}_min", f"{key}_max"
        if rows and lo in rows[0] and hi in rows[0]:
            ax.fill_between(layers, [float(r[lo]) for r in rows], [float(r[hi]) for r in rows], alpha=0.2)
        if logy and all(v > 0 for v in values):
            ax.set_yscale("log")
        ax.set_xlabel("layer t (0 = embeddings)")
        ax.set_title(label)
    if title:
        fig.suptitle(title)
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
