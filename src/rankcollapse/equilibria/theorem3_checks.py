"""Checks of Theorem 3's equilibria: tangent spectrum, convergence, App. F.2 and F.3 (Lemma 13).

- **Tangent spectrum on the product of spheres**: the Jacobian of the LN map restricted to the tangent space
  ``T_x (S^{d-1})^N`` (``N (d - 1)`` directions; :func:`rankcollapse.equilibria.finder.tangent_jacobian`).
  With a causal mask it is block lower-triangular in the tokens, so the spectrum is the union of the
  ``(d - 1) x (d - 1)`` diagonal blocks' spectra. A Jordan block of size ``m`` splits under rounding into
  ``m`` eigenvalues ``~ eps^{1/m}`` apart, but their mean is accurate: eigenvalues within ``CLUSTER`` of each
  other are replaced by their mean, and a direction is **neutral** when ``| |lambda| - 1 | <= NEUTRAL_TOL``,
  **unstable** above, **stable** below.
- **Convergence from nearby starts**: starts ``radius`` away along random tangent directions, the distance to
  the equilibrium over the layers, fitted as exponential (``d ~ q^t``) or algebraic (``d ~ t^-p``). Two
  protocols: every token perturbed (``hold = 0``), or the first ``hold`` tokens held at the equilibrium
  (``hold = 1``: token 1 at ``e_d``, the paper's §4.3.2 assumption that earlier tokens have converged).
- **Directional starts**: one start ``radius`` away along each stable eigendirection of the tangent map;
  it *returns* when its distance falls to half the start's within the layers the eigenvalue needs for
  that (twice over): the nonlinear map contracts where the spectrum says it does ("stable in certain
  directions", the paper's §4.4, judged direction by direction).
- **App. F.2**: ``SRank(X*) <= N / (N - (N - 1) / w^2)`` for a full-rank equilibrium.
- **App. F.3, Lemma 13**: token 1 at ``e_d``, token 2 with negative leading coordinates and
  ``X_{2, d-1} <= -1/w``: the coordinate stays ``<= -1/w`` and the pair never reaches rank one.
- **App. F.4** (conjecture: no such equilibria for undirected masks) is searched in
  :mod:`rankcollapse.equilibria.complete_mask` (the complete mask, the same ``W_V``, ``W_QK`` free).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.draws import gaussian
from rankcollapse.core.norms import sphere_normalize
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria.finder import tangent_jacobian
from rankcollapse.equilibria.lnmap import causal_mask, iterate, ln_attention_map, tangent_basis
from rankcollapse.equilibria.theorem3 import PaperEquilibrium, zero_qk
from rankcollapse.metrics import num_rank, stable_rank

NEUTRAL_TOL = 1e-9
CLUSTER = 1e-3


def _cluster_moduli(ev: np.ndarray) -> np.ndarray:
    """|eigenvalue| after replacing each cluster (within CLUSTER of each other) by its mean."""
    ev = np.asarray(ev, dtype=complex)
    out = np.empty(len(ev))
    done = np.zeros(len(ev), dtype=bool)
    for i in range(len(ev)):
        if done[i]:
            continue
        group = (~done) & (np.abs(ev - ev[i]) < CLUSTER)
        out[group] = abs(ev[group].mean())
        done |= group
    return out


def tangent_moduli(
    x: Tensor, w_v: Tensor, mask: Tensor | None, w_qk: Tensor | None, block_triangular: bool
) -> np.ndarray:
    """Moduli of the tangent map's eigenvalues at x [n, d] (clustered), sorted descending."""
    n, d = x.shape
    jac = tangent_jacobian(x, w_v, mask, w_qk)
    if block_triangular:
        parts = [
            _cluster_moduli(
                torch.linalg.eigvals(
                    jac[i * (d - 1) : (i + 1) * (d - 1), i * (d - 1) : (i + 1) * (d - 1)]
                ).numpy()
            )
            for i in range(n)
        ]
        mods = np.concatenate(parts)
    else:
        mods = _cluster_moduli(torch.linalg.eigvals(jac).numpy())
    return np.sort(mods)[::-1]


def direction_counts(moduli: np.ndarray, tol: float = NEUTRAL_TOL) -> dict[str, int]:
    """``unstable`` (> 1 + tol), ``neutral`` (within tol of 1), ``stable`` (< 1 - tol)."""
    return {
        "unstable": int((moduli > 1 + tol).sum()),
        "neutral": int((np.abs(moduli - 1) <= tol).sum()),
        "stable": int((moduli < 1 - tol).sum()),
    }


def _fit(t: np.ndarray, dist: np.ndarray) -> dict[str, Any]:
    """Exponential vs algebraic fit of a decaying distance curve (second half of the checkpoints)."""
    keep = dist > 1e-14
    t, dist = t[keep], dist[keep]
    if len(t) < 4:
        return {"kind": "exponential", "rate": 0.0, "note": "reached the precision floor"}
    h = len(t) // 2
    t, y = t[h:], np.log(dist[h:])

    def r2(xv: np.ndarray) -> tuple[float, float]:
        a, b = np.polyfit(xv, y, 1)
        res = y - (a * xv + b)
        tot = float(((y - y.mean()) ** 2).sum()) or 1e-300
        return float(a), 1.0 - float((res**2).sum()) / tot

    a_exp, r_exp = r2(t)
    a_alg, r_alg = r2(np.log(t))
    if r_exp >= r_alg:
        return {"kind": "exponential", "rate": math.exp(a_exp), "r2": r_exp}
    return {"kind": "algebraic", "exponent": -a_alg, "r2": r_alg}


def convergence_from_nearby(
    eqs: list[PaperEquilibrium],
    w_v: Tensor,
    *,
    starts: int = 4,
    radius: float = 1e-3,
    steps: int = 2000,
    seed: int = 0,
    hold: int = 0,
) -> list[dict[str, Any]]:
    """Per equilibrium: the share of ``starts`` nearby starts (``radius`` away, random tangent directions)
    back within ``radius`` after ``steps`` layers, and the fit of their median distance (max over tokens);
    ``kind = "leaves"`` when none comes back. ``hold``: the first ``hold`` tokens start exactly at the
    equilibrium (0: every token perturbed; 1: token 1 held, the paper's "earlier tokens converged")."""
    if not eqs:
        return []
    n, d = eqs[0].x.shape
    if not 0 <= hold < n:
        raise RankCollapseError(f"hold must be in 0..{n - 1} (tokens held at the equilibrium), got {hold}")
    g = torch.Generator().manual_seed(seed)
    base = torch.stack([e.x for e in eqs]).repeat_interleave(starts, 0)  # [E*s, n, d]
    noise = gaussian(base.shape, g)
    noise[:, :hold] = 0.0
    noise = noise - (noise * base).sum(-1, keepdim=True) * base
    noise = noise / torch.linalg.vector_norm(noise, dim=(-2, -1), keepdim=True)
    x = base + radius * noise
    x = sphere_normalize(x)
    marks = np.unique(np.geomspace(1, steps, 40).astype(int))
    dists, t_done = [], 0
    for t in marks:
        x = iterate(x, w_v, int(t) - t_done, causal_mask(n), zero_qk(d))
        t_done = int(t)
        dists.append(torch.linalg.vector_norm(x - base, dim=-1).amax(-1).reshape(len(eqs), starts))
    alld = torch.stack(dists).numpy()  # [marks, E, starts]
    out = []
    for k in range(len(eqs)):
        back = alld[-1, k] < radius
        row: dict[str, Any] = {
            "share_returning": float(back.mean()),
            "starts": starts,
            "radius": radius,
            "layers": steps,
        }
        if back.any():
            row.update(_fit(marks.astype(float), np.median(alld[:, k, back], axis=-1)))
        else:
            row["kind"] = "leaves"
        row["final_distance_median"] = float(np.median(alld[-1, k]))
        out.append(row)
    return out


def stable_directions(
    x: Tensor, w_v: Tensor, mask: Tensor | None, w_qk: Tensor | None, tol: float = NEUTRAL_TOL
) -> tuple[np.ndarray, list[Tensor]]:
    """The stable eigendirections of the tangent map at x [n, d]: (their clustered moduli, one ambient
    direction [n, d] each, unit largest token norm). A complex pair gives its real part (or imaginary
    part where the real one vanishes): a real direction in the same invariant plane."""
    n, d = x.shape
    jac = tangent_jacobian(x, w_v, mask, w_qk)
    ev, vec = torch.linalg.eig(jac)
    mods = _cluster_moduli(ev.numpy())
    basis = tangent_basis(x)
    out_m, out_v = [], []
    for i in np.nonzero(mods < 1 - tol)[0]:
        v = vec[:, int(i)]
        p = v.real if float(v.real.abs().max()) > 1e-8 else v.imag
        amb = (basis @ p.to(x.dtype)).reshape(n, d)
        amb = amb / torch.linalg.vector_norm(amb, dim=-1).max()
        out_m.append(float(mods[i]))
        out_v.append(amb)
    return np.asarray(out_m), out_v


def directional_starts(
    x: Tensor, w_v: Tensor, *, radius: float = 1e-4, max_steps: int = 4000
) -> dict[str, Any]:
    """Starts ``radius`` away from x [n, d] along each stable eigendirection (:func:`stable_directions`,
    causal mask, W_Q = W_K = 0): ``stable`` (their number), ``returning`` (how many come within half the
    start's distance in ``2 ceil(log 0.5 / log |lambda|)`` layers, at most ``max_steps``), ``worst_ratio``
    (the largest smallest-distance / start-distance over them; < 0.5 = every one returned)."""
    n, d = x.shape
    mask, qk = causal_mask(n), zero_qk(d)
    mods, dirs = stable_directions(x, w_v, mask, qk)
    if not dirs:
        return {"stable": 0, "returning": 0, "worst_ratio": float("nan")}
    start = x.unsqueeze(0) + radius * torch.stack(dirs)
    start = sphere_normalize(start)
    d0 = torch.linalg.vector_norm(start - x, dim=-1).amax(-1)  # [k]
    need = [
        min(max_steps, 2 * math.ceil(math.log(0.5) / math.log(max(m, 1e-300)))) if m > 0 else 2 for m in mods
    ]
    best = d0.clone()
    z = start
    for t in range(1, max(need) + 1):
        z = iterate(z, w_v, 1, mask, qk)
        dist = torch.linalg.vector_norm(z - x, dim=-1).amax(-1)
        live = torch.tensor([t <= k for k in need])
        best = torch.where(live, torch.minimum(best, dist), best)
    ratio = (best / d0).numpy()
    return {"stable": len(dirs), "returning": int((ratio <= 0.5).sum()), "worst_ratio": float(ratio.max())}


def srank_bound(n: int, w: float) -> float:
    """App. F.2: ``N / (N - (N - 1) / w^2)``."""
    return n / (n - (n - 1) / w**2)


def check_f2(eqs: list[PaperEquilibrium], w: float) -> list[dict[str, Any]]:
    """Stable rank of every full-rank equilibrium against the App. F.2 bound."""
    n = eqs[0].x.shape[0] if eqs else 0
    bound = srank_bound(n, w) if n else math.nan
    return [
        {
            "signs": e.signs,
            "family": e.family,
            "stable_rank": float(stable_rank(e.x)),
            "bound": bound,
            "holds": bool(float(stable_rank(e.x)) <= bound * (1 + 1e-12)),
        }
        for e in eqs
        if e.rank == min(e.x.shape)
    ]


def lemma13_sum(r: Tensor, w: float) -> Tensor:
    """The left side of Lemma 13's ratio condition, for ratios ``r`` [b, d-2] = ``r_2 .. r_{d-1}``:
    ``sum_{k=1}^{d-3} w^{-2k} (r_{d-1-k} / r_{d-1})^2 + w^{-2(d-2)} (1 / r_{d-1})^2`` (App. F.3); the
    condition is that it is at most ``sqrt(w^2 - 1)``."""
    d = r.shape[-1] + 2
    if d == 2:  # no ratios: the condition is only X_{2,1} <= -1/w (the N = d = 2 counterexample)
        return torch.zeros(r.shape[:-1], dtype=torch.float64)
    last = r[..., -1]
    total = (w ** (-2 * (d - 2))) * (1.0 / last) ** 2
    for k in range(1, d - 2):
        total = total + (w ** (-2 * k)) * (r[..., d - 2 - k - 1] / last) ** 2  # r_{d-1-k} is r[..., d-3-k]
    return total


def lemma13_starts(d: int, w: float, samples: int, g: torch.Generator) -> tuple[Tensor, Tensor]:
    """Second-token starts inside ALL of Lemma 13's hypotheses (App. F.3), by rejection: ratios
    ``X_{2,i} / X_{2,1} = r_i w^{i-1}`` with ``r_i = exp(N(0, 1)) > 0`` (i = 2..d-1), ``X_{2,1} < 0`` (so
    every leading coordinate is < 0), a Gaussian last coordinate, then normalised; kept when
    ``X_{2,d-1} <= -1/w`` and :func:`lemma13_sum` ``<= sqrt(w^2 - 1)``. Returns (starts [b, d], sums [b])."""
    if d < 2 or not w > 1:
        raise RankCollapseError(f"Lemma 13 needs d >= 2 and w > 1, got d = {d}, w = {w}")
    out, sums, tries = [], [], 0
    while sum(len(o) for o in out) < samples and tries < 200:
        tries += 1
        m = 4 * samples
        r = torch.exp(gaussian((m, d - 2), g))
        v = torch.empty(m, d, dtype=torch.float64)
        v[:, 0] = -1.0
        v[:, 1 : d - 1] = -r * w ** torch.arange(1, d - 1, dtype=torch.float64)
        v[:, d - 1] = gaussian((m,), g) * torch.linalg.vector_norm(v[:, : d - 1], dim=-1)
        u = sphere_normalize(v)
        total = lemma13_sum(r, w)
        keep = (u[:, d - 2] <= -1 / w) & (total <= math.sqrt(w * w - 1))
        out.append(u[keep])
        sums.append(total[keep])
    starts, totals = torch.cat(out)[:samples], torch.cat(sums)[:samples]
    if starts.shape[0] == 0:
        raise RankCollapseError(f"no start meets Lemma 13's hypotheses for d = {d}, w = {w}")
    return starts, totals


def lemma13(
    d: int, w: float, *, samples: int = 256, steps: int = 3000, seed: int = 0, token1: str = "fixed"
) -> dict[str, Any]:
    """Sample N = 2 starts inside every hypothesis of Lemma 13 (:func:`lemma13_starts`; token 1 at ``e_d``
    (``token1="fixed"``) or within 0.05 of it with a positive leading coordinate (``"near"``)), iterate,
    and report the share whose ``X_{2,d-1}`` stays ``<= -1/w`` at every layer (the lemma's conclusion) and
    whose pair keeps rank 2 (smallest singular value above 1e-6), the smallest singular value reached,
    and the largest left side of the ratio condition among the starts (at most ``sqrt(w^2 - 1)``)."""
    from rankcollapse.equilibria.theorem3 import bidiagonal_value

    w_v = bidiagonal_value(d, w)
    g = torch.Generator().manual_seed(seed)
    tok2, sums = lemma13_starts(d, w, samples, g)
    b = tok2.shape[0]
    tok1 = torch.zeros(b, d, dtype=torch.float64)
    tok1[:, -1] = 1.0
    if token1 == "near":  # a cap around e_d with a positive leading coordinate: token 1 -> +e_d
        tok1 = tok1 + 0.05 * gaussian((b, d), g) / math.sqrt(d)
        tok1[:, 0] = tok1[:, 0].abs()
        tok1 = sphere_normalize(tok1)
    x = torch.stack([tok1, tok2], 1)
    stays = torch.ones(b, dtype=torch.bool)
    smin = torch.full((b,), math.inf, dtype=torch.float64)
    for _ in range(steps):
        x = ln_attention_map(x, w_v, causal_mask(2), zero_qk(d))
        stays &= x[:, 1, d - 2] <= -1 / w + 1e-12
        smin = torch.minimum(smin, torch.linalg.svdvals(x)[:, -1])
    return {
        "d": d,
        "w": w,
        "token1": token1,
        "samples": b,
        "layers": steps,
        "share_stays": float(stays.double().mean()),
        "share_rank2": float((smin > 1e-6).double().mean()),
        "min_singular_value": float(smin.min()),
        "final_rank": [int(v) for v in num_rank(x).unique()],
        "max_condition": float(sums.max()),
        "condition_limit": math.sqrt(w * w - 1),
        "source": "paper (App. F.3, Lemma 13, every hypothesis)",
    }


def directional_convergence(
    eqs: list[PaperEquilibrium], w_v: Tensor, *, radius: float = 1e-4, steps: int = 2000
) -> list[dict[str, Any]]:
    """ "Stable in certain directions", measured: per equilibrium, a start ``radius`` along each eigenvector
    (real part) of the tangent map, both signs; each start is classified ``exponential`` / ``algebraic``
    (fit of its distance curve, when it comes back within ``radius``) or ``leaves``. Returns per equilibrium
    the counts of each kind over the ``2 N (d - 1)`` starts (``stays``: still more than half the start
    distance away but not farther than it). Rounding (~1e-16) excites any unstable direction, so at an
    equilibrium with one, every start eventually leaves."""
    from rankcollapse.equilibria.lnmap import tangent_basis

    if not eqs:
        return []
    n, d = eqs[0].x.shape
    starts, owners = [], []
    for k, e in enumerate(eqs):
        basis = tangent_basis(e.x)
        jac = tangent_jacobian(e.x, w_v, causal_mask(n), zero_qk(d))
        _, vecs = torch.linalg.eig(jac)
        for j in range(vecs.shape[1]):
            v = vecs[:, j].real
            v = v if float(v.norm()) > 1e-8 else vecs[:, j].imag
            amb = (basis @ (v / v.norm())).reshape(n, d)
            for sgn in (1.0, -1.0):
                y = e.x + sgn * radius * amb / float(torch.linalg.vector_norm(amb, dim=-1).max())
                starts.append(sphere_normalize(y))
                owners.append(k)
    x = torch.stack(starts)
    base = torch.stack([eqs[k].x for k in owners])
    marks = np.unique(np.geomspace(1, steps, 30).astype(int))
    curves, t_done = [], 0
    for t in marks:
        x = iterate(x, w_v, int(t) - t_done, causal_mask(n), zero_qk(d))
        t_done = int(t)
        curves.append(torch.linalg.vector_norm(x - base, dim=-1).amax(-1))
    dist = torch.stack(curves).numpy()  # [marks, starts]
    out = [{"exponential": 0, "algebraic": 0, "stays": 0, "leaves": 0} for _ in eqs]
    for s, k in enumerate(owners):
        if dist[-1, s] > radius:
            kind = "leaves"
        elif dist[-1, s] > 0.5 * radius:
            kind = "stays"  # no measurable decay within the horizon (a neutral direction)
        else:
            kind = _fit(marks.astype(float), dist[:, s])["kind"]
        out[k][kind] += 1
    return out


#: Where the paper's Theorem 3 measurements come from (the summary's ``source``).
THEOREM3_SOURCE = "paper (bidiagonal W_V, W_Q = W_K = 0, causal)"


def _flag(value: Any) -> bool | None:
    """A stored yes/no that may be missing (None, or NaN once in a table) -> bool or None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


@dataclass(frozen=True)
class Theorem3Summary:
    """Theorem 3 measured for one (N = d = ``n``, ``w``), summed over its equilibria, typed.

    ``paper_ranks[k - 1]`` / ``other_ranks[k - 1]``: equilibria of rank ``k`` in the paper's family / on
    other branches (k = 1..n); ``max_residual``: the largest ``max_i ||F(X*)_i - X*_i||``;
    ``min_neutral``: the fewest neutral tangent directions of any equilibrium. App. F.2: ``f2_holds``
    (every full-rank equilibrium has ``SRank <= srank_bound``; None: none is full-rank),
    ``f2_max_srank``. Lemma 13 (App. F.3): the shares of its ``lemma13_samples`` starts that keep
    ``X_(2,d-1) <= -1/w`` and rank 2, the largest ratio condition and its limit ``sqrt(w^2 - 1)``.
    (App. F.4, the complete mask, is its own run: :mod:`rankcollapse.equilibria.complete_mask`.)

    A run stores it flat (:meth:`to_summary`: ``paper_rank1``, ``other_rank1``, ...);
    :meth:`from_summary` reads those columns back once, typed."""

    n: int
    w: float
    equilibria: int
    paper_ranks: tuple[int, ...]
    other_ranks: tuple[int, ...]
    max_residual: float
    min_neutral: int
    srank_bound: float
    f2_holds: bool | None
    f2_max_srank: float
    lemma13_share_stays: float
    lemma13_share_rank2: float
    lemma13_samples: int
    lemma13_max_condition: float
    lemma13_condition_limit: float

    def __post_init__(self) -> None:
        if len(self.paper_ranks) != self.n or len(self.other_ranks) != self.n:
            raise ValueError(f"Theorem3Summary: counts for ranks 1..{self.n} needed")

    @property
    def w_at_least_n(self) -> bool:
        """The paper's sufficient condition ``w >= N`` for its family of ``2^k`` equilibria of rank ``k``."""
        return self.w >= self.n

    def to_summary(self) -> dict[str, Any]:
        """The flat summary a run stores (``index.csv``'s ``summary.*`` columns)."""
        summary: dict[str, Any] = {
            "w_at_least_n": self.w_at_least_n,
            "equilibria": self.equilibria,
            "max_residual": self.max_residual,
            "srank_bound": self.srank_bound,
            "f2_holds": self.f2_holds,
            "f2_max_srank": self.f2_max_srank,
            "lemma13_share_stays": self.lemma13_share_stays,
            "lemma13_share_rank2": self.lemma13_share_rank2,
            "lemma13_samples": self.lemma13_samples,
            "lemma13_max_condition": self.lemma13_max_condition,
            "lemma13_condition_limit": self.lemma13_condition_limit,
            "min_neutral": self.min_neutral,
            "source": THEOREM3_SOURCE,
        }
        for k in range(1, self.n + 1):
            summary[f"paper_rank{k}"] = self.paper_ranks[k - 1]
            summary[f"other_rank{k}"] = self.other_ranks[k - 1]
        return summary

    @classmethod
    def from_summary(cls, n: int, w: float, summary: Mapping[str, Any]) -> Theorem3Summary:
        """The record of a stored run of parameters ``n``, ``w`` from its flat ``summary``."""
        return cls(
            n=int(n),
            w=float(w),
            equilibria=int(summary["equilibria"]),
            paper_ranks=tuple(int(summary[f"paper_rank{k}"]) for k in range(1, int(n) + 1)),
            other_ranks=tuple(int(summary[f"other_rank{k}"]) for k in range(1, int(n) + 1)),
            max_residual=float(summary["max_residual"]),
            min_neutral=int(summary["min_neutral"]),
            srank_bound=float(summary["srank_bound"]),
            f2_holds=_flag(summary["f2_holds"]),
            f2_max_srank=float(summary["f2_max_srank"]),
            lemma13_share_stays=float(summary["lemma13_share_stays"]),
            lemma13_share_rank2=float(summary["lemma13_share_rank2"]),
            lemma13_samples=int(summary["lemma13_samples"]),
            lemma13_max_condition=float(summary["lemma13_max_condition"]),
            lemma13_condition_limit=float(summary["lemma13_condition_limit"]),
        )


def theorem3_measurements(
    n: int,
    w: float,
    *,
    starts: int,
    steps: int,
    lemma13_samples: int,
    lemma13_steps: int,
    seed: int,
) -> tuple[list[dict[str, Any]], Theorem3Summary]:
    """Theorem 3 measured for one (N = d = ``n``, ``w``): every equilibrium of the bidiagonal ``W_V``
    (:func:`~rankcollapse.equilibria.theorem3.enumerate_equilibria`), each with its residual, tangent
    directions (unstable / neutral / stable), directional starts along its stable directions, the share of
    ``starts`` nearby starts back after ``steps`` layers under both protocols (every token perturbed;
    token 1 held at ``e_d``) and its stable rank; then App. F.2 (:func:`check_f2`) and Lemma 13
    (:func:`lemma13`). Returns (rows, one per equilibrium; their
    :class:`Theorem3Summary`)."""
    from rankcollapse.equilibria.finder import residual
    from rankcollapse.equilibria.theorem3 import bidiagonal_value, enumerate_equilibria
    from rankcollapse.metrics import stable_rank

    w_v = bidiagonal_value(n, w)
    eqs = enumerate_equilibria(w_v, n)
    # two basin protocols: every token perturbed; token 1 held at e_d (the paper's §4.3.2 assumption)
    conv = convergence_from_nearby(eqs, w_v, starts=starts, steps=steps, seed=seed, hold=0)
    held = convergence_from_nearby(eqs, w_v, starts=starts, steps=steps, seed=seed, hold=1)
    mask, qk = causal_mask(n), zero_qk(n)
    rows = []
    for e, c, h in zip(eqs, conv, held, strict=True):
        counts = direction_counts(tangent_moduli(e.x, w_v, mask, qk, block_triangular=True))
        along = directional_starts(e.x, w_v)
        rows.append(
            {
                "rank": e.rank,
                "family": e.family,
                "signs": str(e.signs),
                "residual": residual(e.x, w_v, mask, qk),
                **counts,
                "stable_returning": along["returning"],
                "convergence": c["kind"],
                "share_returning": c["share_returning"],
                "exponent": c.get("exponent", np.nan),
                "convergence_held": h["kind"],
                "share_returning_held": h["share_returning"],
                "stable_rank": float(stable_rank(e.x)),
            }
        )
    f2 = check_f2(eqs, w)
    l13 = lemma13(n, w, samples=lemma13_samples, steps=lemma13_steps, seed=seed)
    ranks = range(1, n + 1)
    summary = Theorem3Summary(
        n=n,
        w=w,
        equilibria=len(eqs),
        paper_ranks=tuple(sum(r["rank"] == k and r["family"] == "paper" for r in rows) for k in ranks),
        other_ranks=tuple(sum(r["rank"] == k and r["family"] == "other" for r in rows) for k in ranks),
        max_residual=max(r["residual"] for r in rows),
        min_neutral=min(r["neutral"] for r in rows),
        srank_bound=srank_bound(n, w),
        f2_holds=all(r["holds"] for r in f2) if f2 else None,
        f2_max_srank=max((r["stable_rank"] for r in f2), default=np.nan),
        lemma13_share_stays=l13["share_stays"],
        lemma13_share_rank2=l13["share_rank2"],
        lemma13_samples=l13["samples"],
        lemma13_max_condition=l13["max_condition"],
        lemma13_condition_limit=l13["condition_limit"],
    )
    return rows, summary
