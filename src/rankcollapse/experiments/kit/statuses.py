"""Curve statuses: what one :class:`~rankcollapse.experiments.kit.curves.Curve` does, in one word.

All on per-sample log drops with ``Z`` standard errors (``kit.curves``); thresholds by name from the
story's YAML (``kit.thresholds``):

- collapse (all layers): ``collapsing`` if the per-layer log rate over layers 0..L and over the last
  half are both below ``-rate_tol`` for sure (a steady, exponential decay); ``at floor`` if half the
  samples sit at the clamp (μ_rel: the precision floor; raw μ: an underflow to 0); ``not collapsing``
  if the rate over the last half is above ``-rate_tol`` for sure (no decay, or an early drop that
  levels off); else ``unclear``;
- level (the last half of the layers): ``kept`` (flat within ±``rate_tol`` for sure, and at least
  ``keep_min`` where a keep level applies), ``falling``, ``growing``, ``low``, ``at floor``;
- trend (the whole curve from ``trend_from``, and its last half): ``kept`` only if neither rate leaves
  ±``rate_tol`` and the curve never reaches the floor; ``falling`` / ``growing`` if either rate does for
  sure; ``at floor`` wherever half the samples reach the floor (on raw μ as on μ_rel: a curve at the
  floor has collapsed to rounding noise, it is never "kept");
- stability: ``I(t) = |mean log change since X(0)| + its std``; ``unstable`` if ``I(L) >= unstable_min``
  or a sample turned non-finite, ``stable`` if ``I(L) < unstable_min / 2``, else ``unclear``.

Every rate here is :meth:`~rankcollapse.experiments.kit.curves.Curve.rate`, measured before the floor: where
samples (fewer than half) reach the floor with fewer than 2 layers above it, no rate is measured and the
curve is ``at floor`` (a rate through the floor would be the floor's own); where they reach it inside the
last half, the collapse's last-half rate is the one above the floor.

Fewer than ``min_samples`` samples: ``too few samples``. Each status comes with its words and the
comparisons (:class:`~rankcollapse.experiments.kit.judgement.Margin`) it turned on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from rankcollapse.experiments.kit.curves import Curve, Rate
from rankcollapse.experiments.kit.judgement import Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


class StatusName(str, Enum):
    """The one word a status gives a curve (a ``str``: ``StatusName.KEPT == "kept"``); the glossary
    (``kit.glossary``) defines each."""

    COLLAPSING = "collapsing"
    NOT_COLLAPSING = "not collapsing"
    AT_FLOOR = "at floor"
    KEPT = "kept"
    FALLING = "falling"
    GROWING = "growing"
    LOW = "low"
    STABLE = "stable"
    UNSTABLE = "unstable"
    UNCLEAR = "unclear"
    TOO_FEW = "too few samples"
    NON_FINITE = "non-finite"

    def __str__(self) -> str:
        return self.value


#: The collapse statuses that count as collapsed: a steady decay, or the precision floor reached.
COLLAPSED = (StatusName.COLLAPSING, StatusName.AT_FLOOR)


@dataclass(frozen=True)
class Status:
    """One word for a curve, its evidence, the comparisons it turned on, and where it hit the clamp."""

    name: StatusName
    words: str
    margins: tuple[Margin, ...] = field(default_factory=tuple)
    floor_t: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", StatusName(self.name))


def few(c: Curve, th: Thresholds) -> bool:
    return c.n < th.count("min_samples")


def _m(what: str, r: Rate, threshold: float) -> Margin:
    return Margin(what, r.mean, r.se, threshold, r.n, r.unit, r.tests)


def underflow_note(c: Curve) -> str:
    """``"; raw mu underflows to 0 in float32 from t=64"`` where some sample's raw mu rounds to 0; for
    mu_rel, ``"; ||X||_F underflows to 0 in float32 from t=17 (mu_rel = 0/0, counted at the floor)"`` where
    some sample's whole X does (``kit.curves``: one treatment of an underflow, at the floor)."""
    t = c.first_underflow()
    if t is not None:
        return f"; raw mu underflows to 0 in {c.dtype} from t={t} (counted at {c.clamp:.1e})"
    t = c.first_zero() if c.quantity == "mu_rel" else None
    if t is not None:
        return f"; ||X||_F underflows to 0 in {c.dtype} from t={t} (mu_rel = 0/0, counted at the floor)"
    return ""


def floor_words(c: Curve) -> str:
    """Where a curve sits when it is at the floor: the precision floor of its dtype (raw mu: the same
    floor, ``mu <= 32 eps ||X||_F``, or an underflow to 0)."""
    if c.quantity == "mu_rel":
        return f"at the {c.dtype} floor"
    return f"at the {c.dtype} floor (raw mu <= 32 eps ||X||_F, or 0)"


def collapse_status(c: Curve, th: Thresholds) -> Status:
    """The collapse of ``c`` over all its layers (see the module docstring)."""
    s = _collapse_status(c, th)
    return Status(s.name, s.words + underflow_note(c), s.margins, s.floor_t)


def _collapse_status(c: Curve, th: Thresholds) -> Status:
    bad = c.first_nonfinite()
    if bad is not None:
        share = 1 - c.finite[-1]
        words = f"{c.nonfinite_cause()} from t={bad} ({share:.0%} of samples at the end)"
        return Status(StatusName.NON_FINITE, words)
    floor = c.first_at_floor()
    r = c.rate(0, c.layers)
    if floor is not None:
        until = _until(c, 0, floor)
        until = f" ({until})" if until else ""
        return Status(StatusName.AT_FLOOR, f"{floor_words(c)} from t={floor}{until}", floor_t=floor)
    if not r.measured:
        return _some_at_floor(c, r, "")
    if few(c, th):
        return Status(StatusName.TOO_FEW, f"{r.text()}, too few samples")
    tol = th["rate_tol"]
    tail = c.rate(c.layers // 2, c.layers) if c.layers >= 2 else r
    if not tail.measured:  # samples reach the floor before the last half: its rate is the one above it
        tail = r
    margins = (_m("log rate", r, -tol), _m("last-half log rate", tail, -tol))
    if r.hi < -tol and tail.hi < -tol:
        return Status(StatusName.COLLAPSING, f"falls {r.text()}, last half x{tail.factor:.3g}/layer", margins)
    if tail.lo > -tol:
        what = "levels off" if r.hi < -tol else "no collapse"
        return Status(StatusName.NOT_COLLAPSING, f"{what}: {r.text()}, last half {tail.text()}", margins)
    return Status(StatusName.UNCLEAR, f"unclear: {r.text()}, last half {tail.text()}", margins)


def _until(c: Curve, start: int, floor: int) -> str:
    """``x0.3/layer (log rate ...; t=0..4, before the floor at t=5) until then``: the rate a curve had above
    the floor before it reached it (``""`` where none can be measured)."""
    r = c.rate(start, floor) if floor > start else None
    return f"{r.text()} until then" if r is not None and r.measured else ""


def _some_at_floor(c: Curve, r: Rate, lvl: str) -> Status:
    """``at floor``: a curve whose rate ``r`` cannot be measured because samples reach the floor with fewer
    than 2 layers above it (fewer than half of them, else :meth:`Curve.first_at_floor` said so): a rate
    through the floor would be the floor's own (``kit.curves``), so the curve is judged at the floor."""
    share = float(c.floor_share[r.floor_t]) if r.floor_t is not None else math.nan
    words = f"{floor_words(c)} for {share:.0%} of samples from t={r.floor_t}{lvl}: {r.floor_words()}"
    return Status(StatusName.AT_FLOOR, words, floor_t=r.floor_t)


def level_status(c: Curve, th: Thresholds, keep_min: float | None) -> Status:
    """The level of ``c`` over the last half of its layers; ``keep_min``: the level it must keep (μ_rel)."""
    bad = c.first_nonfinite()
    if bad is not None:
        return Status(StatusName.NON_FINITE, f"non-finite from t={bad}")
    lvl = f"level {c.mean[-1]:.2g} at t={c.layers}"
    if c.floor_share[-1] >= 0.5:
        return Status(StatusName.AT_FLOOR, f"{floor_words(c)} ({lvl})", floor_t=c.first_at_floor())
    if c.layers < 2:
        return Status(StatusName.UNCLEAR, f"{lvl}, too few layers")
    r = c.rate(c.layers // 2, c.layers)
    if not r.measured:
        return _some_at_floor(c, r, f" ({lvl})")
    words = f"{lvl}, last half {r.text()}; x{math.exp(r.mean * (r.end - r.start)):.3g} over it"
    if few(c, th):
        return Status(StatusName.TOO_FEW, words)
    tol = th["rate_tol"]
    margins = (_m("last-half log rate", r, -tol), _m("last-half log rate", r, tol))
    if r.hi < -tol:
        return Status(StatusName.FALLING, words, margins[:1])
    if r.lo > tol:
        return Status(StatusName.GROWING, words, margins[1:])
    if r.lo > -tol and r.hi < tol:
        if keep_min is not None and c.mean[-1] < keep_min:
            return Status(StatusName.LOW, f"{words} (below {keep_min:g})", margins)
        return Status(StatusName.KEPT, words, margins)
    return Status(StatusName.UNCLEAR, words, tuple(m for m in margins if not m.decided))


def trend_status(c: Curve, th: Thresholds, keep_min: float | None) -> Status:
    """ "No decreasing trend", judged on the whole curve from layer ``trend_from`` (the output of the first
    block, so that the embeddings' own scale does not count) and on its last half (module docstring);
    ``keep_min``: the level the curve must keep at every layer (μ_rel), None for raw μ."""
    bad = c.first_nonfinite()
    if bad is not None:
        return Status(StatusName.NON_FINITE, f"{c.nonfinite_cause()} from t={bad}")
    start = min(th.count("trend_from"), max(c.layers - 1, 0))
    lvl = f"level {c.mean[start]:.3g} at t={start} -> {c.mean[-1]:.3g} at t={c.layers}"
    floor = c.first_at_floor()
    if floor is not None:
        until = _until(c, start, floor)
        until = f", {until}" if until else ""
        return Status(StatusName.AT_FLOOR, f"{floor_words(c)} from t={floor} ({lvl}{until})", floor_t=floor)
    if c.layers - start < 2:
        return Status(StatusName.UNCLEAR, f"{lvl}, too few layers")
    whole, tail = c.rate(start, c.layers), c.rate(c.layers // 2, c.layers)
    for r in (whole, tail):
        if not r.measured:
            return _some_at_floor(c, r, f" ({lvl})")
    words = f"{lvl}; from t={start} {whole.text()}, last half x{tail.factor:.3g}/layer"
    if few(c, th):
        return Status(StatusName.TOO_FEW, words)
    tol = th["rate_tol"]
    down = (_m(f"log rate from t={start}", whole, -tol), _m("last-half log rate", tail, -tol))
    up = (_m(f"log rate from t={start}", whole, tol), _m("last-half log rate", tail, tol))
    falls = [m for m, r in zip(down, (whole, tail), strict=True) if r.hi < -tol]
    if falls:
        return Status(StatusName.FALLING, words, tuple(falls))
    grows = [m for m, r in zip(up, (whole, tail), strict=True) if r.lo > tol]
    if grows:
        return Status(StatusName.GROWING, words, tuple(grows))
    if all(r.lo > -tol and r.hi < tol for r in (whole, tail)):
        low = float(np.nanmin(c.mean[start:]))
        if keep_min is not None and low < keep_min:
            return Status(StatusName.LOW, f"{words} (down to {low:.2g}, below {keep_min:g})", down + up)
        return Status(StatusName.KEPT, words, down + up)
    return Status(StatusName.UNCLEAR, words, tuple(m for m in down + up if not m.decided))


def instability(c: Curve, t: int) -> float:
    """``I(t) = |mean log drop(t)| + std``: the typical log change of a sample since layer 0."""
    return abs(float(c.drop[t])) + float(c.drop_std[t])


def stability_status(c: Curve, th: Thresholds) -> Status:
    """``unstable``, ``stable`` or ``unclear`` (see the module docstring)."""
    bad = c.first_nonfinite()
    if bad is not None:
        return Status(StatusName.UNSTABLE, f"non-finite from t={bad}")
    i_end = instability(c, c.layers)
    words = f"I(t={c.layers}) = {i_end:.2g} (x{math.exp(min(i_end, 700)):.3g} change)"
    if few(c, th):
        return Status(StatusName.TOO_FEW, words)
    limit = th["unstable_min"]
    if i_end >= limit:
        return Status(StatusName.UNSTABLE, words)
    if i_end < limit / 2:
        return Status(StatusName.STABLE, words)
    return Status(StatusName.UNCLEAR, words)
