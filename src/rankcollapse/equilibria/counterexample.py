"""The N = 2, d = 2 counterexample (paper Fig. 1 and Fig. 5), computed rather than only simulated.

System (ours, a surrogate of the paper's §4.3.1): causal mask, sphere LayerNorm, row convention x -> x W_V,
``A = softmax_M(X W_QK X^T / sqrt(d_qk))``. Token 0 attends only to itself, so it runs the power
iteration ``x -> x W_V / ||x W_V||`` and converges to ``±u``, ``u`` the dominant left eigenvector of
``W_V`` (``(0, 1)`` for the default ``W_V = [[0.95, 1], [0, 1]]``). With token 0 at ``u``, token 1
follows a map of the circle, written in angles as ``theta(t+1) = f(theta(t))``:

    x = (cos θ, sin θ),  α = softmax([s(x, u), s(x, x)])[0],  s(p, q) = p W_QK q^T / sqrt(d_qk)
    f(θ) = angle of (α u + (1 - α) x) W_V.

Fixed points of token 1 are the roots of ``f(θ) - θ`` (mod 2π) on the circle, stable where
``|f'(θ)| < 1``. When ``f' > 0`` everywhere, ``f`` is an orientation-preserving circle homeomorphism:
every orbit converges monotonically to a fixed point, and the basin of a stable fixed point ``B`` is
the open arc between the two unstable fixed points around it (the paper's "red segment").
``basin_arc`` also finds the arc end points independently, by bisection on the eventual limit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from scipy.optimize import brentq

from rankcollapse.edge.errors import RankCollapseError

TWO_PI = 2.0 * math.pi
DEFAULT_W_V = ((0.95, 1.0), (0.0, 1.0))


def _wrap(angle: np.ndarray | float) -> np.ndarray:
    """Angles to (-π, π]."""
    return -((-np.asarray(angle) + math.pi) % TWO_PI - math.pi)


@dataclass(frozen=True)
class Counterexample:
    """The 2-token, 2-feature system. ``w_v`` and ``w_qk`` are 2x2 (row convention), ``sink`` is the
    point token 0 sits at (default: the dominant left eigenvector of ``w_v`` with a non-negative
    last coordinate)."""

    w_v: np.ndarray
    w_qk: np.ndarray
    d_qk: float
    sink: np.ndarray

    def torch_w_v(self) -> torch.Tensor:
        return torch.as_tensor(self.w_v, dtype=torch.float64)

    def torch_w_qk(self) -> torch.Tensor:
        return torch.as_tensor(self.w_qk, dtype=torch.float64)


def dominant_left_eigenvector(w_v: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(u, λ1, |λ2| / λ1): the unit left eigenvector of the real, positive, strictly dominant
    eigenvalue ``λ1`` of ``w_v``. Sign fixed so that the last non-zero coordinate is positive."""
    vals, vecs = np.linalg.eig(np.asarray(w_v, dtype=np.float64).T)
    order = np.argsort(-np.abs(vals))
    lam1 = vals[order[0]]
    if abs(lam1.imag) > 1e-12 or lam1.real <= 0 or (
            len(vals) > 1 and abs(vals[order[1]]) >= abs(lam1) * (1 - 1e-12)):
        raise RankCollapseError(
            f"value matrix needs a real positive strictly dominant eigenvalue for token 0 to converge; "
            f"eigenvalues are {np.round(vals, 6).tolist()}")
    u = np.real(vecs[:, order[0]])
    u = u / np.linalg.norm(u)
    nz = np.flatnonzero(np.abs(u) > 1e-12)
    if u[nz[-1]] < 0:
        u = -u
    ratio = float(abs(vals[order[1]]) / lam1.real) if len(vals) > 1 else 0.0
    return u, float(lam1.real), ratio


def counterexample_2d(w_v: np.ndarray | list | None = None, w_qk: np.ndarray | list | None = None,
                      d_qk: float = 1.0) -> Counterexample:
    """The counterexample system; defaults: ``W_V = [[0.95, 1], [0, 1]]``, ``W_QK = I``, ``d_qk = 1``."""
    w_v_arr = np.array(DEFAULT_W_V if w_v is None else w_v, dtype=np.float64)
    w_qk_arr = np.eye(2) if w_qk is None else np.array(w_qk, dtype=np.float64)
    if w_v_arr.shape != (2, 2) or w_qk_arr.shape != (2, 2):
        raise RankCollapseError(f"counterexample matrices must be 2x2, got {w_v_arr.shape}, {w_qk_arr.shape}")
    if not (np.isfinite(w_v_arr).all() and np.isfinite(w_qk_arr).all()):
        raise RankCollapseError("counterexample matrices must be finite")
    if not (d_qk > 0 and math.isfinite(d_qk)):
        raise RankCollapseError(f"d_qk must be positive and finite, got {d_qk}")
    u, _, _ = dominant_left_eigenvector(w_v_arr)
    return Counterexample(w_v=w_v_arr, w_qk=w_qk_arr, d_qk=float(d_qk), sink=u)


def angle_map(theta: np.ndarray | float, cx: Counterexample) -> np.ndarray:
    """``f(θ)``: token 1's angle after one layer, token 0 at ``cx.sink``; vectorised, in (-π, π]."""
    th = np.asarray(theta, dtype=np.float64)
    x = np.stack([np.cos(th), np.sin(th)], axis=-1)
    u = cx.sink
    scale = 1.0 / math.sqrt(cx.d_qk)
    s_u = (x @ cx.w_qk @ u) * scale
    s_x = np.einsum("...e,ef,...f->...", x, cx.w_qk, x) * scale
    m = np.maximum(s_u, s_x)
    e_u, e_x = np.exp(s_u - m), np.exp(s_x - m)
    alpha = e_u / (e_u + e_x)
    y = (alpha[..., None] * u + (1.0 - alpha)[..., None] * x) @ cx.w_v
    return np.arctan2(y[..., 1], y[..., 0])


def angle_map_derivative(theta: np.ndarray | float, cx: Counterexample, h: float = 1e-6) -> np.ndarray:
    """``f'(θ)`` by a central difference (error ~1e-10)."""
    th = np.asarray(theta, dtype=np.float64)
    return _wrap(angle_map(th + h, cx) - angle_map(th - h, cx)) / (2 * h)


def _residual(theta: np.ndarray | float, cx: Counterexample) -> np.ndarray:
    return _wrap(angle_map(theta, cx) - np.asarray(theta))


@dataclass(frozen=True)
class CircleFixedPoint:
    """A fixed point of token 1 on the circle: angle in [0, 2π), point, ``f'``, stability."""

    theta: float
    point: tuple[float, float]
    derivative: float
    stable: bool

    def to_dict(self) -> dict:
        return asdict(self)


def fixed_points_on_circle(cx: Counterexample, grid: int = 20_000) -> list[CircleFixedPoint]:
    """All roots of ``f(θ) - θ`` (mod 2π): sign changes on a dense shifted grid, refined by brentq
    to 1e-14. Tangential (double) roots without a sign change are not found; they are non-generic."""
    th = (np.arange(grid + 1) + 0.5 / math.pi) * (TWO_PI / grid)
    g = _residual(th, cx)
    roots: list[float] = []
    for a, b, ga, gb in zip(th[:-1], th[1:], g[:-1], g[1:], strict=True):
        if ga == 0.0:
            roots.append(float(a))
        elif ga * gb < 0 and abs(ga - gb) < math.pi:  # not the ±π wrap of the residual
            roots.append(brentq(lambda t: float(_residual(t, cx)), a, b, xtol=1e-15, rtol=1e-15))
    out: list[CircleFixedPoint] = []
    for r in sorted(t % TWO_PI for t in roots):
        if out and min(abs(r - out[-1].theta), TWO_PI - abs(r - out[-1].theta)) < 1e-9:
            continue
        der = float(angle_map_derivative(r, cx))
        out.append(CircleFixedPoint(theta=float(r), point=(math.cos(r), math.sin(r)), derivative=der,
                                    stable=abs(der) < 1.0))
    if len(out) > 1 and TWO_PI - out[-1].theta + out[0].theta < 1e-9:
        out.pop()
    return out


def eventual_angle(theta: np.ndarray, cx: Counterexample, steps: int = 4000) -> np.ndarray:
    """Iterate ``f`` ``steps`` times (vectorised)."""
    th = np.asarray(theta, dtype=np.float64)
    for _ in range(steps):
        th = angle_map(th, cx)
    return th


def _nearest(theta: np.ndarray, targets: list[float], tol: float = 1e-4) -> np.ndarray:
    """Index of the target angle each θ is within ``tol`` of, or -1."""
    th = np.asarray(theta)[..., None]
    dist = np.abs(_wrap(th - np.asarray(targets)))
    idx = np.argmin(dist, axis=-1)
    return np.where(np.min(dist, axis=-1) < tol, idx, -1)


@dataclass(frozen=True)
class BasinArc:
    """The open arc ``(start, end)`` of token-1 initial angles converging to the stable point ``target``
    (counter-clockwise from start to end; ``end`` may exceed 2π). ``start_fixed_point``/``end_fixed_point``:
    the unstable fixed point each end coincides with (None if the end is a preimage instead)."""

    target_theta: float
    target_point: tuple[float, float]
    start: float
    end: float
    length: float
    start_fixed_point: float | None
    end_fixed_point: float | None
    method: str

    def to_dict(self) -> dict:
        return asdict(self)


def _multisect(inside: float, outside: float, converges_inside, tol: float) -> float:
    """Boundary between ``inside`` (predicate True) and ``outside`` by 64-way vectorised bisection."""
    lo, hi = inside, outside
    while abs(hi - lo) > tol:
        pts = np.linspace(lo, hi, 65)
        ok = converges_inside(pts)
        first_bad = int(np.argmin(ok)) if not ok.all() else 64
        if first_bad == 0:
            raise RuntimeError("bisection bracket lost")
        lo, hi = pts[first_bad - 1], pts[first_bad]
    return 0.5 * (lo + hi)


def basin_arc(cx: Counterexample, target: CircleFixedPoint | None = None, grid: int = 4096,
              steps: int = 4000, tol: float = 1e-10) -> BasinArc:
    """The arc of initial angles of token 1 (token 0 held at the sink) whose orbit converges to the stable
    fixed point ``target`` (default: the stable fixed point farthest from ``±sink``).

    End points are found by bisection on the eventual limit, to ``tol``, and then matched with the
    unstable fixed points (the end points are not in the basin: they are fixed or land on one).
    """
    fps = fixed_points_on_circle(cx)
    stable = [p for p in fps if p.stable]
    if target is None:
        sink_angle = math.atan2(cx.sink[1], cx.sink[0])
        off = [p for p in stable if abs(abs(_wrap(p.theta - sink_angle)) - math.pi / 2) < math.pi / 2 - 1e-6]
        if not off:
            raise RankCollapseError("no stable fixed point other than ±sink: token 1 always collapses")
        target = max(off, key=lambda p: min(abs(_wrap(p.theta - sink_angle)),
                                            math.pi - abs(_wrap(p.theta - sink_angle))))
    targets = [p.theta for p in stable]
    t_idx = targets.index(target.theta)

    def converges(th: np.ndarray) -> np.ndarray:
        return _nearest(eventual_angle(th, cx, steps), targets) == t_idx

    th = (np.arange(grid) + 0.5) * (TWO_PI / grid)
    ok = converges(th)
    if not ok.any():
        raise RankCollapseError("no grid angle converges to the target fixed point")
    if ok.all():
        return BasinArc(target.theta, target.point, 0.0, TWO_PI, TWO_PI, None, None, "whole circle")
    # rotate so that the grid starts outside the basin; the arc containing the target is the one we want
    k_target = int(np.argmin(np.abs(_wrap(th - target.theta))))
    i = k_target
    while ok[(i - 1) % grid]:
        i -= 1
    j = k_target
    while ok[(j + 1) % grid]:
        j += 1
    step = TWO_PI / grid
    first, last = (i + 0.5) * step, (j + 0.5) * step  # first and last grid angles inside the basin
    start = _multisect(first, first - step, converges, tol)
    end = _multisect(last, last + step, converges, tol)
    start %= TWO_PI
    end = end % TWO_PI
    if end <= start:
        end += TWO_PI

    def match(angle: float) -> float | None:
        for p in fps:
            if not p.stable and abs(_wrap(angle - p.theta)) < 1e-7:
                return p.theta
        return None

    return BasinArc(target_theta=target.theta, target_point=target.point, start=float(start), end=float(end),
                    length=float(end - start), start_fixed_point=match(start), end_fixed_point=match(end),
                    method="bisection on the eventual limit")


def simulate_pair(token0: np.ndarray, theta1: np.ndarray, cx: Counterexample, steps: int = 4000,
                  layer_norm: bool = True, keep_trajectory: bool = False) -> np.ndarray:
    """Both tokens evolving (causal mask), token 0 from ``token0`` [2] (normalised when ``layer_norm``),
    token 1 from the unit vectors at angles ``theta1`` [b]. Returns X(steps) [b, 2, 2]
    (or the trajectory [steps + 1, b, 2, 2]) as NumPy, by ``lnmap.iterate`` (causal, ``cx``'s W_QK, d_qk)."""
    from rankcollapse.equilibria.lnmap import causal_mask, iterate

    th = torch.as_tensor(np.atleast_1d(np.asarray(theta1, dtype=np.float64)))
    t0 = torch.as_tensor(np.asarray(token0, dtype=np.float64))
    if layer_norm:
        t0 = t0 / torch.linalg.vector_norm(t0)
    x0 = torch.stack([t0.expand(th.numel(), 2), torch.stack([torch.cos(th), torch.sin(th)], dim=-1)], dim=1)
    out = iterate(x0, cx.torch_w_v(), steps, causal_mask(2), cx.torch_w_qk(), cx.d_qk, layer_norm=layer_norm,
                  keep_trajectory=keep_trajectory)
    return out.numpy()


@dataclass(frozen=True)
class MovingSinkArc:
    """Arcs of token-1 initial angles reaching the off-axis point ``±B`` when token 0 starts at ``token0``
    and moves too (both tokens iterate). ``arcs``: list of (start, end, limit point of token 1)."""

    token0: tuple[float, float]
    token0_limit: tuple[float, float]
    arcs: list[tuple[float, float, tuple[float, float]]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def basin_arc_moving_sink(cx: Counterexample, token0: tuple[float, float] = (0.6, 0.8), grid: int = 256,
                          steps: int = 2000, tol: float = 1e-6) -> MovingSinkArc:
    """The arcs of initial angles of token 1 that keep full rank (token 1 ends at an off-axis point)
    when token 0 starts at ``token0`` rather than at its limit. End points by bisection to ``tol``."""
    fps = fixed_points_on_circle(cx)
    end0 = simulate_pair(np.asarray(token0), np.zeros(1), cx, steps)[0, 0]
    sign = 1.0 if float(end0 @ cx.sink) > 0 else -1.0
    # token 1's possible limits with token 0 at sign*sink: the stable fixed points, sign-flipped (f is odd)
    limits = [sign * np.asarray(p.point) for p in fps if p.stable]
    off = [k for k, p in enumerate(limits) if abs(abs(float(p @ cx.sink)) - 1.0) > 1e-6]

    def label(th: np.ndarray) -> np.ndarray:
        x1 = simulate_pair(np.asarray(token0), th, cx, steps)[:, 1]
        d = np.linalg.norm(x1[:, None, :] - np.asarray(limits)[None], axis=-1)
        return np.where(d.min(axis=1) < 1e-4, d.argmin(axis=1), -1)

    step = TWO_PI / grid
    th = (np.arange(grid) + 0.5) * step
    lab = label(th)
    arcs: list[tuple[float, float, tuple[float, float]]] = []
    for k in off:
        ok = lab == k
        if not ok.any() or ok.all():
            continue
        # runs of consecutive True (circular)
        starts = [i for i in range(grid) if ok[i] and not ok[i - 1]]
        for i in starts:
            j = i
            while ok[(j + 1) % grid]:
                j += 1

            def inside(t: np.ndarray, k: int = k) -> np.ndarray:
                return label(t) == k

            first, last = (i + 0.5) * step, (j + 0.5) * step
            a = _multisect(first, first - step, inside, tol) % TWO_PI
            b = _multisect(last, last + step, inside, tol) % TWO_PI
            if b <= a:
                b += TWO_PI
            arcs.append((float(a), float(b), (float(limits[k][0]), float(limits[k][1]))))
    return MovingSinkArc(token0=(float(token0[0]), float(token0[1])),
                         token0_limit=(float(end0[0]), float(end0[1])), arcs=arcs)


@dataclass(frozen=True)
class FamilyPoint:
    """One value matrix ``[[a, s], [0, 1]]`` of the scanned family: does a stable off-axis point exist?"""

    a: float
    s: float
    works: bool
    b_point: tuple[float, float] | None
    b_derivative: float | None
    arc_length: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def scan_value_family(a_values: np.ndarray, s_values: np.ndarray, w_qk: np.ndarray | None = None,
                      d_qk: float = 1.0, grid: int = 4000) -> list[FamilyPoint]:
    """Scan ``W_V = [[a, s], [0, 1]]`` (0 < a < 1, token 0 -> ±(0, 1)): ``works`` iff token 1 has a stable
    fixed point off ``±(0, 1)``. ``arc_length``: length of the arc between the two unstable fixed points
    around it (its basin when ``f' > 0`` everywhere, which the scan checks; else None)."""
    out: list[FamilyPoint] = []
    probe = (np.arange(grid) + 0.5) * (TWO_PI / grid)
    for a in np.asarray(a_values, dtype=np.float64):
        for s in np.asarray(s_values, dtype=np.float64):
            cx = counterexample_2d([[a, s], [0.0, 1.0]], w_qk, d_qk)
            fps = fixed_points_on_circle(cx, grid=grid)
            off = [p for p in fps if p.stable and abs(p.point[0]) > 1e-6]
            if not off:
                out.append(FamilyPoint(float(a), float(s), False, None, None, None))
                continue
            b = min(off, key=lambda p: abs(p.point[0]))
            monotone = bool((angle_map_derivative(probe, cx) > 0).all())
            arc = None
            if monotone:
                thetas = [p.theta for p in fps]
            k = thetas.index(b.theta) if monotone else -1
            if monotone and len(fps) > 1:
                lo = fps[k - 1].theta
                hi = fps[(k + 1) % len(fps)].theta
                arc = float((hi - lo) % TWO_PI)
            out.append(FamilyPoint(float(a), float(s), True, b.point, b.derivative, arc))
    return out


def antipode_threshold(cx: Counterexample) -> float:
    """``a*``: with token 0 at ``u`` and token 1 at ``-u``, the tangential factor of the map is
    ``a (1 - α) / (1 - 2α)`` (``a`` the second eigenvalue of ``W_V``, ``α`` the attention on token 0).
    ``-u`` is unstable, the precondition for an off-axis ``B``, iff ``a > a* = (1 - 2α) / (1 - α)``."""
    u = cx.sink
    scale = 1.0 / math.sqrt(cx.d_qk)
    s_u = float(-u @ cx.w_qk @ u) * scale
    s_x = float(u @ cx.w_qk @ u) * scale
    alpha = 1.0 / (1.0 + math.exp(s_x - s_u))
    return (1.0 - 2.0 * alpha) / (1.0 - alpha)


def surrogate_measurements(
    w_v: Any,
    w_qk: Any,
    d_qk: float,
    *,
    token0: tuple[float, float],
    angles: int,
    steps: int,
    rank_tol: float,
    arc_grid: int,
    arc_steps: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Our surrogate counterexample (:func:`counterexample_2d`) measured: token 1 from ``angles`` starts
    evenly spaced on the circle (token 0 at ``token0``), ``steps`` layers with and without LayerNorm.

    Rows: one per start angle with token 1's limit, the final numerical rank (``metrics.num_rank``,
    ``s_k > rank_tol s_1``) and |det| with LayerNorm, the final mu_rel without it (``metrics.mu_rel``) and
    the last layer's attention of token 1 on token 0 (~0: token 1 no longer moves). Summary: the fixed
    points, point B and its basin arc (:func:`basin_arc`; length 0 where there is no off-axis stable
    point)."""
    from rankcollapse.equilibria.lnmap import attention_matrix, causal_mask
    from rankcollapse.metrics import mu_rel, num_rank

    cx = counterexample_2d(w_v, w_qk, d_qk)
    start = np.asarray(token0, dtype=np.float64)
    theta = (np.arange(angles) + 0.5) * (2 * math.pi / angles)
    with_ln = simulate_pair(start, theta, cx, steps=steps, layer_norm=True)  # [b, 2, 2]
    without = simulate_pair(start, theta, cx, steps=steps, layer_norm=False)
    ranks = num_rank(torch.as_tensor(with_ln), rtol=rank_tol).numpy()
    rel = mu_rel(torch.as_tensor(without)).numpy()
    attn = attention_matrix(torch.as_tensor(without), causal_mask(2), cx.torch_w_qk(), cx.d_qk)[:, 1, 0]
    rows = [
        {
            "theta": float(th),
            "ln_x": float(x[1, 0]),
            "ln_y": float(x[1, 1]),
            "ln_token0_x": float(x[0, 0]),
            "ln_token0_y": float(x[0, 1]),
            "ln_rank": int(r),
            "ln_abs_det": float(abs(np.linalg.det(x))),
            "noln_mu_rel": float(m),
            "noln_attn_10": float(a),
        }
        for th, x, r, m, a in zip(theta, with_ln, ranks, rel, attn.tolist(), strict=True)
    ]
    fps = fixed_points_on_circle(cx)
    summary: dict[str, Any] = {
        "sink_x": float(cx.sink[0]),
        "sink_y": float(cx.sink[1]),
        "fixed_points": len(fps),
        "stable_fixed_points": sum(p.stable for p in fps),
    }
    try:
        arc = basin_arc(cx, grid=arc_grid, steps=arc_steps)
        summary.update(
            {
                "B_x": arc.target_point[0],
                "B_y": arc.target_point[1],
                "arc_start": arc.start,
                "arc_end": arc.end,
                "arc_length": arc.length,
            }
        )
    except RankCollapseError as err:  # no off-axis stable point: token 1 always collapses
        summary.update({"arc_length": 0.0, "arc_error": str(err)})
    return rows, summary
