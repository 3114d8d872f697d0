"""Figs. 1 and 5 of the paper for its own counterexample (``W_V = [[1, w], [0, 1]]``, ``W_Q = W_K = 0``).

Drawn from the closed forms of :mod:`rankcollapse.equilibria.counterexample_paper` and from the iterated map.
Every title names the source: "the paper's construction". Figures: ``rankcollapse.edge.figures``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rankcollapse.core.names import label as name_label
from rankcollapse.edge.atomic import write_json
from rankcollapse.edge.figures import new_figure, save_figure
from rankcollapse.equilibria.counterexample_paper import (
    DEFAULT_W,
    TWO_PI,
    pair_inputs,
    paper_counterexample,
    ratio_map,
    run_pair,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TITLE = "the paper's construction: N = d = 2, causal, W_Q = W_K = 0, W_V = [[1, w], [0, 1]], w = {w:g}"


def _circle(ax: Any) -> None:
    c = np.linspace(0, TWO_PI, 400)
    ax.plot(np.cos(c), np.sin(c), color="0.8", lw=1)
    ax.set_aspect("equal")
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)
    ax.grid(alpha=0.3)


def plot_paper_figure1(
    w: float = DEFAULT_W,
    token1: tuple[float, float] = (0.6, 0.8),
    starts: tuple[float, ...] = (0.4, 1.9, 2.6, 3.4, 4.4, 5.6),
    steps: int = 40,
) -> Figure:
    """Fig. 1. Left: without LayerNorm, ``X(t) / ||X(t)||_F`` (one global scale: ``W_V^t`` grows like ``t``,
    violating A3, so raw tokens diverge); both tokens meet. Right: with LayerNorm, token 2 reaches ``B``
    from the red segment ``(theta_a, 3pi/2)`` (token 1 at ``(0, 1)``) and ``(0, 1)`` otherwise."""
    cx = paper_counterexample(w)
    fig = new_figure(11, 5)
    ax0, ax1 = fig.subplots(1, 2)
    _circle(ax0)
    for k, th in enumerate(starts):
        traj = run_pair(
            pair_inputs(list(token1), [th]),
            w,
            steps,
            keep_trajectory=True,
            layer_norm=False,
        )[:, 0]
        traj = traj / torch.linalg.vector_norm(traj, dim=(-2, -1), keepdim=True)
        ax0.plot(
            traj[:, 1, 0],
            traj[:, 1, 1],
            ".-",
            color="tab:orange",
            ms=2,
            lw=0.7,
            label="token 2" if k == 0 else None,
        )
        ax0.plot(
            traj[:, 0, 0],
            traj[:, 0, 1],
            ".-",
            color="tab:blue",
            ms=2,
            lw=0.7,
            label="token 1" if k == 0 else None,
        )
        ax0.plot(float(traj[-1, 1, 0]), float(traj[-1, 1, 1]), "k*", ms=8)
    ax0.set_title(
        "without LayerNorm: X(t) / ||X(t)||_F drawn\n(W_V^t grows like t, violating A3): both tokens meet",
        fontsize=9,
    )
    ax0.legend(loc="lower right", fontsize=7)
    _circle(ax1)
    lo, hi = cx.red_segment
    seg = np.linspace(lo, hi, 300)
    ax1.plot(np.cos(seg), np.sin(seg), color="red", lw=4, label=f"red segment ({lo:.4f}, {hi:.4f}) -> B")
    for k, th in enumerate(starts):
        traj = run_pair(pair_inputs([0.0, 1.0], [th]), w, steps, keep_trajectory=True)[:, 0, 1]
        ax1.plot(
            traj[:, 0],
            traj[:, 1],
            ".-",
            color="tab:orange",
            ms=2,
            lw=0.6,
            label="token 2 (token 1 at (0, 1))" if k == 0 else None,
        )
    traj0 = run_pair(pair_inputs(list(token1), [0.0]), w, steps, keep_trajectory=True)[:, 0, 0]
    ax1.plot(
        traj0[:, 0],
        traj0[:, 1],
        ".-",
        color="tab:blue",
        ms=2,
        lw=0.8,
        label=f"token 1 from {token1} (algebraic)",
    )
    for name, pt in (("A", cx.A), ("B", cx.B)):
        ax1.plot(*pt, "ks" if name == "A" else "k*", ms=8)
        ax1.annotate(
            f"{name} ({pt[0]:.3f}, {pt[1]:.3f})", pt, textcoords="offset points", xytext=(6, 4), fontsize=8
        )
    ax1.set_title("with LayerNorm: token 2 reaches B from the red segment (rank 2 kept)", fontsize=9)
    ax1.legend(loc="upper right", fontsize=6)
    fig.suptitle("Fig. 1, " + TITLE.format(w=cx.w), fontsize=10)
    fig.tight_layout()
    return fig


def plot_paper_figure5(w: float = DEFAULT_W) -> Figure:
    """Fig. 5: the four invariant arcs coloured by limit (token 1 at ``(0, 1)``), and ``g(y)`` on the left
    half with its fixed points ``y_A = -w s`` (unstable) and ``y_B = +w s`` (stable)."""
    cx = paper_counterexample(w)
    fig = new_figure(11, 5)
    ax0, ax1 = fig.subplots(1, 2)
    _circle(ax0)
    colours = {"token1": "tab:blue", "B": "red"}
    styles = ["-", "-", "--", "--"]
    for k, arc in enumerate(cx.arcs):
        seg = np.linspace(arc.start, arc.end, 200)
        ax0.plot(
            np.cos(seg),
            np.sin(seg),
            styles[k],
            color=colours[arc.limit_name],
            lw=5 - k % 2 * 2,
            label=f"arc {k + 1} ({arc.start:.3f}, {arc.end:.3f}) -> "
            f"{'(0, 1), token 1' if arc.limit_name == 'token1' else 'B'}",
        )
    for name, pt in (("(0, 1)", (0.0, 1.0)), ("A", cx.A), ("B", cx.B), ("(0, -1): undefined", (0.0, -1.0))):
        ax0.plot(*pt, "ko", ms=5)
        ax0.annotate(name, pt, textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax0.legend(loc="center", fontsize=6)
    ax0.set_title("four invariant arcs of token 2, coloured by limit (Lemma 11)", fontsize=9)
    s = math.sqrt(1 - 1 / cx.w**2)
    y = np.linspace(-3 * cx.w, 3 * cx.w, 600)
    ax1.plot(
        y,
        ratio_map(torch.as_tensor(y, dtype=torch.float64), cx.w).numpy(),
        label="g(y) = y + w - sqrt(1 + y^2)",
    )
    ax1.plot(y, y, "k--", lw=0.8, label="identity")
    ax1.plot(
        [-cx.w * s],
        [-cx.w * s],
        "o",
        mfc="white",
        mec="tab:red",
        ms=8,
        label=f"y_A = {-cx.w * s:.4f} (g' = 1 + s)",
    )
    ax1.plot([cx.w * s], [cx.w * s], "o", color="tab:green", ms=8, label=f"y_B = {cx.w * s:.4f} (g' = 1 - s)")
    ax1.set_xlabel(f"{name_label('ratio_y')}(t) = X22 / X21 (left half)")
    ax1.set_ylabel(f"{name_label('ratio_y')}(t+1)")
    ax1.legend(fontsize=7)
    ax1.set_title("ratio map on the left half: increasing (Lemma 11)", fontsize=9)
    fig.suptitle("Fig. 5, " + TITLE.format(w=cx.w), fontsize=10)
    fig.tight_layout()
    return fig


def write_paper_portrait(out_dir: str | Path, w: float = DEFAULT_W) -> dict[str, str]:
    """Write paper_figure1/5 (.png, .pdf) and paper_counterexample.json into ``out_dir``; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    for name, fig in (("paper_figure1", plot_paper_figure1(w)), ("paper_figure5", plot_paper_figure5(w))):
        for p in save_figure(fig, out / f"{name}.png", out / f"{name}.pdf"):
            paths[f"{name}_{p.suffix[1:]}"] = str(p)
    p = out / "paper_counterexample.json"
    write_json(p, paper_counterexample(w).to_dict())
    paths["paper_numbers"] = str(p)
    return paths
