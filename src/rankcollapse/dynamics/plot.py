"""The figure of a simulation (``rankcollapse simulate --plot``): ``mu`` and ``mu_rel`` against the depth.

:func:`plot_mu` draws the batch mean of each per layer t >= 1 on log-log axes with its min-max band over
samples, the layers where every sample sits at the precision floor (``32 eps`` of the dtype), the floor
itself, and Theorem 1's bound (the paper's) where its check applies.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rankcollapse.core.names import label as name_label
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.figures import new_figure, save_figure

if TYPE_CHECKING:
    from rankcollapse.dynamics.theory import TheoryCheck


def plot_mu(
    rows: Sequence[dict[str, float]],
    path: str | os.PathLike[str],
    *,
    dtype: str,
    theory: TheoryCheck | None = None,
    title: str = "",
) -> Path:
    """``mu`` and ``mu_rel`` of ``rows`` (a :class:`~rankcollapse.dynamics.SimulationResult`'s) against
    the depth t >= 1 on log-log axes, saved at ``path`` (the format its suffix names); return the path.

    Layers where the mean of ``at_floor`` is >= 1 are marked grey, the floor of ``dtype`` is a line, and
    the Theorem 1 bound ``theory.bound(t)`` is overlaid when ``theory.applicable``. ``title``: drawn
    literally. One line (RankCollapseError) when no layer t >= 1 was run.
    """
    import torch

    from rankcollapse.core.precision import floor_rel

    pick = [r for r in rows if r["layer"] >= 1]
    t = [int(r["layer"]) for r in pick]
    if not t:
        raise RankCollapseError("nothing to plot: run at least one layer")
    floor = floor_rel(dtype)
    fig = new_figure(10, 4, title=title)
    axes = fig.subplots(1, 2)
    for ax, key in ((axes[0], "mu"), (axes[1], "mu_rel")):
        label = name_label(key)
        vals = [max(r[key], 1e-300) if math.isfinite(r[key]) else math.nan for r in pick]
        at = [r.get("at_floor", 0.0) >= 1.0 for r in pick]
        ax.loglog(t, vals, "-", color="C0", label=f"{label} (mean over {name_label('samples')})")
        ax.fill_between(t, [max(r[f"{key}_min"], 1e-300) for r in pick],
                        [max(r[f"{key}_max"], 1e-300) for r in pick], color="C0", alpha=0.2, lw=0)
        if any(at):
            floor_t = [x for x, a in zip(t, at, strict=True) if a]
            floor_v = [v for v, a in zip(vals, at, strict=True) if a]
            ax.loglog(floor_t, floor_v, ".", color="0.5", label="samples at precision floor (mean >= 1)")
        ax.set_xlabel(name_label("layer"))
        ax.set_title(label)
    axes[1].axhline(floor, color="C3", ls="--", lw=1, label=f"precision floor {floor:.1e} ({dtype})")
    if theory is not None and theory.applicable:
        bound = theory.bound(torch.tensor(t, dtype=torch.float64)).tolist()
        label = f"Thm 1 bound, eps={theory.epsilon:.1e}, r={theory.radius}"
        axes[0].loglog(t, bound, "--", color="C2", label=label)
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path, what="plot")[0]
