"""Figures 1 and 5 of the paper for the N = 2, d = 2 counterexample, and the ``portrait`` bundle.

Each function returns a Figure (``rankcollapse.edge.figures.new_figure``) to save or embed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rankcollapse.core.names import label as name_label
from rankcollapse.edge.atomic import atomic_write
from rankcollapse.edge.figures import new_figure, save_figure
from rankcollapse.equilibria.counterexample import (
    TWO_PI,
    BasinArc,
    Counterexample,
    angle_map,
    antipode_threshold,
    basin_arc,
    basin_arc_moving_sink,
    counterexample_2d,
    fixed_points_on_circle,
    simulate_pair,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_figure1(cx: Counterexample | None = None, token0: tuple[float, float] = (0.6, 0.8),
                 starts: tuple[float, ...] = (0.3, 1.2, 2.2, 2.6, 3.3, 4.3, 5.2), steps: int = 60,
                 no_ln_starts: tuple[float, ...] = (0.3, 1.2, 2.2, 5.5),
                 arc: BasinArc | None = None) -> Figure:
    """Fig. 1: left, without LayerNorm both tokens meet at one point; right, with LayerNorm token 1
    converges to B from the red arc (token 0 held at A = sink) and to A otherwise."""
    cx = cx or counterexample_2d()
    fig = new_figure(11, 4.8)
    ax0, ax1 = fig.subplots(1, 2)
    # left: pure attention, both tokens move, no normalisation
    for k, th in enumerate(no_ln_starts):
        traj = simulate_pair(np.asarray(token0), np.asarray([th]), cx, steps=steps, layer_norm=False,
                             keep_trajectory=True)[:, 0]
        ax0.plot(traj[:, 0, 0], traj[:, 0, 1], "-", color="tab:blue", lw=1, alpha=0.7,
                 label="token 0" if k == 0 else None)
        ax0.plot(traj[:, 1, 0], traj[:, 1, 1], "-", color="tab:orange", lw=1, alpha=0.8,
                 label="token 1" if k == 0 else None)
        ax0.plot(traj[0, 1, 0], traj[0, 1, 1], "o", color="tab:orange", ms=4)
        ax0.plot(traj[-1, 1, 0], traj[-1, 1, 1], "k*", ms=9)
    ax0.plot(token0[0], token0[1], "o", color="tab:blue", ms=5)
    ax0.set_title("without LayerNorm: both tokens meet", fontsize=10)
    ax0.legend(loc="lower right", fontsize=8)
    ax0.grid(alpha=0.3)
    # right: with LayerNorm on the circle
    circ = np.linspace(0, TWO_PI, 400)
    ax1.plot(np.cos(circ), np.sin(circ), color="0.7", lw=1)
    arc = arc or basin_arc(cx)
    seg = np.linspace(arc.start, arc.end, 300)
    ax1.plot(np.cos(seg), np.sin(seg), color="red", lw=4, label="basin of B (red segment)")
    for k, th in enumerate(starts):
        traj = simulate_pair(cx.sink, np.asarray([th]), cx, steps=steps * 5, keep_trajectory=True)[:, 0, 1]
        ax1.plot(traj[:, 0], traj[:, 1], ".-", color="tab:orange", ms=2, lw=0.6, alpha=0.8,
                 label="token 1 trajectories" if k == 0 else None)
        ax1.plot(traj[0, 0], traj[0, 1], "o", color="tab:orange", ms=4)
    traj0 = simulate_pair(np.asarray(token0), np.zeros(1), cx, steps=steps, keep_trajectory=True)[:, 0, 0]
    ax1.plot(traj0[:, 0], traj0[:, 1], ".-", color="tab:blue", ms=2, lw=0.8, label="token 0 from (0.6, 0.8)")
    a = cx.sink
    b = np.asarray(arc.target_point)
    ax1.plot(*a, "ks", ms=7)
    ax1.annotate("A", a, textcoords="offset points", xytext=(6, 4))
    ax1.plot(*b, "k*", ms=11)
    ax1.annotate(f"B ({b[0]:.3f}, {b[1]:.3f})", b, textcoords="offset points", xytext=(6, -12))
    ax1.set_title("with LayerNorm: token 1 reaches B from the red arc", fontsize=10)
    ax1.set_aspect("equal")
    ax1.set_xlim(-1.35, 1.35)
    ax1.set_ylim(-1.35, 1.35)
    ax1.legend(loc="upper right", fontsize=7)
    fig.suptitle(f"Fig. 1, ours (surrogate): N = 2, d = 2, causal mask, W_QK = I, W_V = {cx.w_v.tolist()}")
    fig.tight_layout()
    return fig


def plot_figure5(cx: Counterexample | None = None, starts: tuple[float, ...] = (0.5, 2.3, 2.5, 3.5, 4.7, 5.5),
                 steps: int = 120) -> Figure:
    """Fig. 5: the angle map ``f`` of token 1 (token 0 at A) against the identity, fixed points marked
    (filled = stable, open = unstable), and ``θ(t)`` against ``t`` for several starts."""
    cx = cx or counterexample_2d()
    fps = fixed_points_on_circle(cx)
    fig = new_figure(10, 4.5)
    ax0, ax1 = fig.subplots(1, 2)
    th = np.linspace(0, TWO_PI, 2000)
    f = angle_map(th, cx) % TWO_PI
    jumps = np.flatnonzero(np.abs(np.diff(f)) > math.pi) + 1
    f_plot = f.copy()
    f_plot[jumps] = np.nan
    ax0.plot(th, f_plot, color="tab:blue", label="f(θ)")
    ax0.plot(th, th, "k--", lw=0.8, label="identity")
    last = -10.0
    for p in sorted(fps, key=lambda q: q.theta):
        ax0.plot(p.theta, p.theta, "o", ms=8, color="tab:green" if p.stable else "white",
                 markeredgecolor="tab:green" if p.stable else "tab:red",
                 label=None)
        # fixed points closer than 0.4 rad: the second label goes above-left, so no two labels overlap
        close = p.theta - last < 0.4
        ax0.annotate(f"{p.theta:.4f}\nf'={p.derivative:.3f}", (p.theta, p.theta), fontsize=7,
                     textcoords="offset points", xytext=(-52, 8) if close else (6, -22))
        last = p.theta
    ax0.plot([], [], "o", color="tab:green", label="stable fixed point")
    ax0.plot([], [], "o", color="white", markeredgecolor="tab:red", label="unstable fixed point")
    ax0.set_xlabel(f"{name_label('theta')}(t)")
    ax0.set_ylabel(f"{name_label('theta')}(t+1)")
    ax0.set_xlim(0, TWO_PI)
    ax0.set_ylim(0, TWO_PI)
    ax0.legend(fontsize=7, loc="upper left")
    ax0.set_title("angle map of token 1 (token 0 at A)")
    for th0 in starts:
        traj = [th0]
        for _ in range(steps):
            nxt = float(angle_map(traj[-1], cx))
            traj.append(traj[-1] + float((nxt - traj[-1] + math.pi) % TWO_PI - math.pi))
        ax1.plot(np.arange(steps + 1), traj, lw=1, label=f"θ(0) = {th0}")
    for p in fps:
        for shift in (-TWO_PI, 0.0, TWO_PI):
            ax1.axhline(p.theta + shift, color="tab:green" if p.stable else "tab:red", lw=0.6, ls=":")
    ax1.set_ylim(-0.5, 8.3)
    ax1.set_xlabel(name_label("layer"))
    ax1.set_ylabel(f"{name_label('theta')}(t) (unwrapped)")
    ax1.legend(fontsize=7)
    ax1.set_title("convergence of the second token")
    fig.suptitle(f"Fig. 5, ours (surrogate): W_QK = I, W_V = {cx.w_v.tolist()}", fontsize=10)
    fig.tight_layout()
    return fig


def portrait_numbers(cx: Counterexample | None = None, arc: BasinArc | None = None) -> dict:
    """The computed numbers behind Figs. 1 and 5, JSON-ready."""
    cx = cx or counterexample_2d()
    fps = fixed_points_on_circle(cx)
    arc = arc or basin_arc(cx)
    moving = basin_arc_moving_sink(cx)
    return {
        "system": {"n": 2, "d": 2, "mask": "causal", "normalisation": "sphere", "w_v": cx.w_v.tolist(),
                   "w_qk": cx.w_qk.tolist(), "d_qk": cx.d_qk, "convention": "row vectors, x -> x W_V"},
        "token0_fixed_points": [cx.sink.tolist(), (-cx.sink).tolist()],
        "token1_fixed_points": [p.to_dict() for p in fps],
        "basin_arc": arc.to_dict(),
        "basin_arc_token0_moving": moving.to_dict(),
        "antipode_threshold_a": antipode_threshold(cx),
    }


def write_portrait(out_dir: str | Path, cx: Counterexample | None = None) -> dict[str, str]:
    """Write figure1.{png,pdf}, figure5.{png,pdf} and portrait.json into ``out_dir``; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cx = cx or counterexample_2d()
    paths: dict[str, str] = {}
    arc = basin_arc(cx)
    for name, fig in (("figure1", plot_figure1(cx, arc=arc)), ("figure5", plot_figure5(cx))):
        for p in save_figure(fig, out / f"{name}.png", out / f"{name}.pdf"):
            paths[f"{name}_{p.suffix[1:]}"] = str(p)
    p = out / "portrait.json"
    atomic_write(p, json.dumps(portrait_numbers(cx, arc), indent=2))
    paths["numbers"] = str(p)
    return paths
