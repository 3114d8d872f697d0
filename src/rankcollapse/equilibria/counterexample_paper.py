"""The paper's counterexample (§4.3.1, App. E, Figs. 1 and 5): N = d = 2, causal, ``W_Q = W_K = 0``.

``W_V = [[1, w], [0, 1]]`` with ``w > 1`` (row convention ``x -> x W_V``), sphere LayerNorm. With
``W_Q = W_K = 0`` the causal attention is uniform: ``A = [[1, 0], [1/2, 1/2]]`` at every layer.

- **Token 1** runs ``x -> x W_V / ||x W_V||``: ``(x1, x2) W_V = (x1, w x1 + x2)``, so ``X12/X11`` grows by
  ``w`` per layer (algebraic convergence, angle ~ ``1/(w t)``) to ``(0, 1)`` if ``X11(0) > 0`` and to
  ``(0, -1)`` if ``X11(0) < 0``; ``X11(0) = 0`` is already fixed.
- **Token 2**, token 1 at ``(0, 1)``: ``(a, b) -> (a, w a + 1 + b) / ||.||`` (the factor 1/2 drops out
  under the normalisation). The first coordinate keeps its sign; the ratio ``y = b / a`` follows
  ``g(y) = y + w + 1/a`` (``1/a = -sqrt(1 + y^2)`` on the left half ``a < 0``, ``+sqrt(1 + y^2)`` on the
  right half). ``g'(y) = 1 - y / sqrt(1 + y^2) > 0`` on the left half: ``g`` is increasing (Lemma 11).
  Fixed points where ``w + 1/a = 0``: ``A = (-1/w, +sqrt(1 - 1/w^2))`` (``g' = 1 + s > 1``, unstable) and
  ``B = (-1/w, -sqrt(1 - 1/w^2))`` (``g' = 1 - s < 1``, stable), ``s = sqrt(1 - 1/w^2)``; ``(0, 1)`` is fixed;
  at ``(0, -1)`` the map is undefined (token 2 cancels token 1: a zero token).
- **The four arcs** cut by ``(0, 1)``, ``A``, ``B``, ``(0, -1)`` (angles ``pi/2 < theta_a < theta_b < 3pi/2``)
  are invariant, and ``y`` moves monotonically on each, so each converges to one end:

  ======================= =========================== =============================================
  arc                     sign of ``X21 + 1/w``       limit
  ======================= =========================== =============================================
  ``(pi/2, theta_a)``     ``> 0`` (``g(y) < y``)       ``(0, 1)``: rank one, collapse
  ``(theta_a, theta_b)``  ``< 0`` (``g(y) > y``)       ``B``
  ``(theta_b, 3pi/2)``    ``> 0`` (``g(y) < y``)       ``B``
  ``(3pi/2, 5pi/2)``      right half, ``g(y) > y``      ``(0, 1)``: rank one, collapse
  ======================= =========================== =============================================

  The **red segment** of Fig. 1 = the starts that converge to ``B`` = ``(theta_a, 3pi/2)``; ``[(0, 1); B]``
  has rank 2, so a set of starts of positive measure does not collapse. With token 1 at ``(0, -1)``
  everything is mirrored (the map is odd).

Every number here is a closed form; :func:`arc_limits_by_iteration` and :func:`moving_token1` measure them
from the iterated map (:func:`rankcollapse.equilibria.lnmap.iterate`, float64).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.norms import sphere_normalize
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.equilibria.lnmap import causal_mask, iterate

DEFAULT_W = 2.0
TWO_PI = 2.0 * math.pi
SOURCE = "paper (§4.3.1, App. E: W_V = [[1, w], [0, 1]], W_Q = W_K = 0)"


def check_w(w: object, needs: str = "the counterexample") -> float:
    """``w`` as a float, or RankCollapseError unless it is finite and ``> 1`` (what ``needs`` it: the
    counterexample's ``W_V = [[1, w], [0, 1]]``, Theorem 3's construction ``I + w J``)."""
    try:
        value = float(w)
    except (TypeError, ValueError):
        raise RankCollapseError(f"w must be a number > 1, got {quote(str(w), 40)}") from None
    if not math.isfinite(value) or value <= 1.0:
        raise RankCollapseError(f"w must be finite and > 1 ({needs} needs w > 1), got {value!r}")
    return value


def paper_value_matrix(w: float = DEFAULT_W) -> Tensor:
    """``W_V = [[1, w], [0, 1]]`` (float64, row convention)."""
    w = check_w(w)
    return torch.tensor([[1.0, w], [0.0, 1.0]], dtype=torch.float64)


def zero_qk(d: int = 2) -> Tensor:
    """``W_QK = W_Q W_K^T = 0``: uniform attention over each token's context."""
    return torch.zeros(d, d, dtype=torch.float64)


@dataclass(frozen=True)
class Arc:
    """An open arc ``(start, end)`` of token 2's angle (radians, counter-clockwise; ``end`` may exceed 2pi),
    token 1 at ``(0, 1)``, and the point ``limit`` every start in it converges to (``limit_name``)."""

    start: float
    end: float
    limit: tuple[float, float]
    limit_name: str
    sign: str

    @property
    def red(self) -> bool:
        """Part of Fig. 1's red segment (converges to ``B``)."""
        return self.limit_name == "B"

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "limit": list(self.limit),
            "limit_name": self.limit_name,
            "sign_x21_plus_1_over_w": self.sign,
            "red": self.red,
        }


@dataclass(frozen=True)
class PaperCounterexample:
    """Closed forms of the counterexample for one ``w`` (module docstring)."""

    w: float
    A: tuple[float, float]
    B: tuple[float, float]
    theta_a: float
    theta_b: float
    arcs: list[Arc] = field(default_factory=list)

    @property
    def red_segment(self) -> tuple[float, float]:
        """``(theta_a, 3pi/2)``: the union of the arcs converging to ``B``."""
        red = [a for a in self.arcs if a.red]
        return (red[0].start, red[-1].end)

    def w_v(self) -> Tensor:
        return paper_value_matrix(self.w)

    def to_dict(self) -> dict[str, Any]:
        s = math.sqrt(1 - (1 / self.w) ** 2)
        return {
            "w": self.w,
            "A": list(self.A),
            "B": list(self.B),
            "arcs": [a.to_dict() for a in self.arcs],
            "theta_a": self.theta_a,
            "theta_b": self.theta_b,
            "red_segment": list(self.red_segment),
            "token1": [0.0, 1.0],
            "undefined_at": [0.0, -1.0],
            "g_derivative": {"A": 1 + s, "B": 1 - s},
            "w_v": [[1.0, self.w], [0.0, 1.0]],
            "w_qk": [[0.0, 0.0], [0.0, 0.0]],
            "mask": "causal",
            "normalisation": "sphere (post-LN)",
            "convention": "row vectors, x -> x W_V; angles on token 2's circle",
            "source": SOURCE,
        }


def ratio_map(y: Tensor | float, w: float, left: bool = True) -> Tensor:
    """``g(y) = y + w + 1/X21``, ``1/X21 = -/+ sqrt(1 + y^2)`` on the left / right half."""
    yy = torch.as_tensor(y, dtype=torch.float64)
    root = torch.sqrt(1 + yy * yy)
    return yy + w + (-root if left else root)


def _limit_of(
    theta: float, w: float, a_pt: tuple[float, float], b_pt: tuple[float, float]
) -> tuple[str, str]:
    """Lemma 11's rule: from a point inside an arc, the direction ``y`` moves (sign of ``X21 + 1/w``) and the
    fixed point it moves to. Returns (limit name, sign)."""
    a, b = math.cos(theta), math.sin(theta)
    if a > 0:
        return "token1", "> 0 (right half)"  # g(y) > y without bound: y -> +inf, i.e. towards (0, 1)
    y = b / a
    step = float(ratio_map(y, w)) - y  # = w + 1/a: its sign is that of X21 + 1/w (a < 0)
    y_a, y_b = a_pt[1] / a_pt[0], b_pt[1] / b_pt[0]  # -w s and +w s
    if step < 0:  # y decreases: to the next fixed point below, or -inf = (0, 1)
        return ("B", "> 0") if y > y_b else ("token1", "> 0")
    return ("B", "< 0") if y_a < y < y_b else ("token1", "< 0")


def paper_counterexample(w: float = DEFAULT_W) -> PaperCounterexample:
    """A, B, their angles and the four arcs with their limits, all closed forms (module docstring)."""
    w = check_w(w)
    s = math.sqrt(1.0 - 1.0 / (w * w))
    a_pt, b_pt = (-1.0 / w, s), (-1.0 / w, -s)
    th_a = math.atan2(s, -1.0 / w)
    th_b = math.atan2(-s, -1.0 / w) % TWO_PI
    cuts = [math.pi / 2, th_a, th_b, 1.5 * math.pi, 2.5 * math.pi]
    points = {"token1": (0.0, 1.0), "B": b_pt}
    arcs = []
    for lo, hi in itertools.pairwise(cuts):
        name, sign = _limit_of(0.5 * (lo + hi), w, a_pt, b_pt)
        arcs.append(Arc(lo, hi, points[name], name, sign))
    return PaperCounterexample(w, a_pt, b_pt, th_a, th_b, arcs)


def token1_limit(x11: float) -> tuple[float, float]:
    """Token 1's limit: ``(0, 1)`` if ``X11(0) > 0``, ``(0, -1)`` if ``< 0`` (``X11(0) = 0``: fixed)."""
    if x11 == 0:
        raise RankCollapseError("X11(0) = 0: token 1 is already at (0, +-1), its limit is its start")
    return (0.0, 1.0 if x11 > 0 else -1.0)


def pair_inputs(token1: Tensor | list, theta2: Tensor | list) -> Tensor:
    """X(0) [b, 2, 2]: token 1 [2] or [b, 2] (normalised), token 2 at the angles ``theta2`` [b]."""
    th = torch.as_tensor(theta2, dtype=torch.float64).reshape(-1)
    t1 = torch.as_tensor(token1, dtype=torch.float64)
    t1 = sphere_normalize(t1).expand(th.numel(), 2)
    return torch.stack([t1, torch.stack([torch.cos(th), torch.sin(th)], dim=-1)], dim=1)


def run_pair(
    x0: Tensor, w: float, steps: int, keep_trajectory: bool = False, layer_norm: bool = True
) -> Tensor:
    """Iterate the counterexample's map (lnmap, causal, ``W_QK = 0``) from x0 [b, 2, 2]."""
    return iterate(
        x0,
        paper_value_matrix(w),
        steps,
        causal_mask(2),
        zero_qk(),
        1.0,
        layer_norm=layer_norm,
        keep_trajectory=keep_trajectory,
    )


def arc_limits_by_iteration(
    w: float = DEFAULT_W, per_arc: int = 64, inset: float = 1e-3, steps: int = 3000
) -> list[dict[str, Any]]:
    """Measure each arc's limit: ``per_arc`` starts spread over each arc (``inset`` rad inside its ends),
    token 1 held at ``(0, 1)`` (it is a fixed point), iterated ``steps`` layers. Per arc: the share of
    starts ending within 1e-6 of the closed-form limit, and the largest distance."""
    cx = paper_counterexample(w)
    out = []
    for arc in cx.arcs:
        th = torch.linspace(arc.start + inset, arc.end - inset, per_arc, dtype=torch.float64)
        final = run_pair(pair_inputs([0.0, 1.0], th), w, steps)
        dist = torch.linalg.vector_norm(final[:, 1] - torch.tensor(arc.limit, dtype=torch.float64), dim=-1)
        out.append(
            {
                "start": arc.start,
                "end": arc.end,
                "limit_name": arc.limit_name,
                "share_at_limit": float((dist < 1e-6).double().mean()),
                "max_distance": float(dist.max()),
                "token1_stays": float(
                    torch.linalg.vector_norm(
                        final[:, 0] - torch.tensor([0.0, 1.0], dtype=torch.float64), dim=-1
                    ).max()
                ),
            }
        )
    return out


def moving_token1(
    w: float = DEFAULT_W,
    token1: tuple[float, float] = (0.6, 0.8),
    grid: int = 720,
    steps: int = 4000,
    tol: float = 1e-3,
) -> dict[str, Any]:
    """Token 1 not converged yet: both tokens iterate from ``token1`` and token 2 on ``grid`` angles.

    Token 1 approaches ``(0, sign X11)`` only algebraically, so token 2's basin of ``+-B`` differs from the
    red segment. Reports the share of the circle ending within ``tol`` of ``+-B`` (rank 2 kept), the
    closed-form share with token 1 at its limit, the measured arcs (grid resolution) and token 1's
    distance from its limit after ``steps`` layers (measured ~ ``1 / (w t)``).
    """
    cx = paper_counterexample(w)
    lim = token1_limit(token1[0])
    sign = lim[1]
    b_pt = torch.tensor(cx.B, dtype=torch.float64) * sign
    th = (torch.arange(grid, dtype=torch.float64) + 0.5) * (TWO_PI / grid)
    final = run_pair(pair_inputs(list(token1), th), w, steps)
    at_b = torch.linalg.vector_norm(final[:, 1] - b_pt, dim=-1) < tol
    runs: list[list[float]] = []
    step = TWO_PI / grid
    for i in range(grid):
        if bool(at_b[i]) and not bool(at_b[i - 1]):
            j = i
            while bool(at_b[(j + 1) % grid]) and (j + 1) % grid != i:
                j += 1
            runs.append(
                [float(th[i] - step / 2), float(th[j % grid] + step / 2) + (TWO_PI if j >= grid else 0.0)]
            )
    red = cx.red_segment
    t1_dist = float(torch.linalg.vector_norm(final[0, 0] - torch.tensor(lim, dtype=torch.float64)))
    return {
        "w": cx.w,
        "token1_start": list(token1),
        "token1_limit": list(lim),
        "layers": steps,
        "token1_distance_after_layers": t1_dist,
        "share_to_B_measured": float(at_b.double().mean()),
        "share_to_B_if_token1_converged": (red[1] - red[0]) / TWO_PI,
        "arcs_to_B_measured": runs,
        "grid": grid,
        "source": SOURCE,
    }


def paper_measurements(
    w: float,
    *,
    per_arc: int,
    steps: int,
    token1: tuple[float, float],
    moving_grid: int,
    noln_steps: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Figs. 1 and 5 measured: the closed forms of :func:`paper_counterexample` against the iterated map.

    Rows: one per arc (its start, end, closed-form limit, and the share of ``per_arc`` starts inside it
    that end there after ``steps`` layers, with the largest distance). Summary: A, B, the red segment,
    the residuals of A and B after one layer, token 1's limits from ``X11 = ±0.3``, the token distance
    without LayerNorm (``X / ||X||_F``, 8 starts, ``noln_steps`` layers), and the basin of B while token 1
    starts at ``token1`` and moves too (:func:`moving_token1`)."""
    cx = paper_counterexample(w)
    measured = arc_limits_by_iteration(w, per_arc=per_arc, steps=steps)
    rows = []
    for k, (a, m) in enumerate(zip(cx.arcs, measured, strict=True)):
        row = {
            **a.to_dict(),
            "limit_x": a.limit[0],
            "limit_y": a.limit[1],
            "arc": k + 1,
            "share_at_limit": m["share_at_limit"],
            "max_distance": m["max_distance"],
        }
        row.pop("limit")
        rows.append(row)
    north = torch.tensor([0.0, 1.0], dtype=torch.float64)
    pts = torch.tensor([cx.A, cx.B], dtype=torch.float64)
    one = run_pair(torch.stack([torch.stack([north, north]), pts], dim=1), w, 1)  # [2 starts, 2 tokens, 2]
    residual = (one[:, 1] - pts).abs().amax(-1)
    limits = torch.tensor([[0.0, 1.0], [0.0, -1.0]], dtype=torch.float64)
    t1 = run_pair(pair_inputs([[0.3, 0.5], [-0.3, 0.5]], [0.0, 0.0]), w, steps)[:, 0]
    t1_dist = float(torch.linalg.vector_norm(t1 - limits, dim=-1).max())
    starts = torch.linspace(0.3, 5.9, 8, dtype=torch.float64)
    noln = run_pair(pair_inputs(list(token1), starts), w, noln_steps, layer_norm=False)
    noln = noln / torch.linalg.vector_norm(noln, dim=(-2, -1), keepdim=True)
    moving = moving_token1(w, tuple(token1), grid=moving_grid, steps=steps)
    red = cx.red_segment
    summary = {
        "A_x": cx.A[0],
        "A_y": cx.A[1],
        "B_x": cx.B[0],
        "B_y": cx.B[1],
        "theta_a": cx.theta_a,
        "theta_b": cx.theta_b,
        "red_start": red[0],
        "red_end": red[1],
        "red_share": (red[1] - red[0]) / (2 * math.pi),
        "A_residual": float(residual[0]),
        "B_residual": float(residual[1]),
        "token1_limit_pos_y": float(t1[0, 1]),
        "token1_limit_neg_y": float(t1[1, 1]),
        "token1_limit_distance": t1_dist,
        "token1_distance_times_wt": t1_dist * w * steps,
        "noln_token_distance": float(torch.linalg.vector_norm(noln[:, 0] - noln[:, 1], dim=-1).max()),
        "moving_share_to_B": moving["share_to_B_measured"],
        "moving_arcs": str(moving["arcs_to_B_measured"]),
        "moving_token1_distance": moving["token1_distance_after_layers"],
        "source": "paper (W_V = [[1, w], [0, 1]], W_Q = W_K = 0)",
    }
    return rows, summary
