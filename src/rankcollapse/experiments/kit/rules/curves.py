"""Rules on collapse curves by their status (Figs. 2, 3, 6, 7): each labelled curve gets a status word
(``kit.statuses``), the word decides the curve's part, the parts combine (``kit.combine``).

``curves``: ``Mapping[label, Curve]``, the label naming the condition (``"causal, float32"``); one part
per curve, Bonferroni over the curves (any condition can decide).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts, few_part, floor_part, sample_part
from rankcollapse.experiments.kit.curves import NETWORK, SAMPLE, Curve, conditions, n_words, sample_std
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.statuses import (
    COLLAPSED,
    Status,
    StatusName,
    collapse_status,
    instability,
    level_status,
    stability_status,
    trend_status,
)
from rankcollapse.experiments.kit.thresholds import Thresholds


def _each(
    curves: Mapping[str, Curve],
    th: Thresholds,
    status: Callable[[Curve, Thresholds], Status],
    decide: Callable[[str, Curve, Status], Judgement],
) -> Judgement:
    """A curve status for every labelled curve, then ``decide`` its part (too few samples: inconclusive);
    every interval at level ``ALPHA / m`` over the ``m`` curves (Bonferroni: any condition can decide)."""
    parts = []
    with conditions(len(curves)):
        for label, c in curves.items():
            st = status(c, th)
            few = st.name is StatusName.TOO_FEW
            part = few_part(label, c.n, th, st.words) if few else decide(label, c, st)
            if part.verdict is INCONCLUSIVE and st.name is StatusName.NON_FINITE and not part.cause_kind:
                part = replace(part, cause_kind="non-finite", cause=causes.non_finite(label, st.words))
            parts.append((label, part))
    return combine_parts(parts)


def san_collapse(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """SANs collapse exponentially: every curve ``collapsing`` or ``at floor`` (reproduced); any ``not
    collapsing`` (not reproduced); else inconclusive."""

    def decide(label: str, c: Curve, st: Status) -> Judgement:
        v = {
            StatusName.COLLAPSING: REPRODUCED,
            StatusName.AT_FLOOR: REPRODUCED,
            StatusName.NOT_COLLAPSING: NOT_REPRODUCED,
        }.get(st.name, INCONCLUSIVE)
        return sample_part(
            v, f"{st.name}: {st.words}" if v is not REPRODUCED else st.words, st.margins, c.units, c.unit
        )

    return _each(curves, th, collapse_status, decide)


def ln_stops(
    san: Mapping[str, Curve], ln: Mapping[str, Curve], th: Thresholds, keep_min: float | None
) -> Judgement:
    """Adding LN stops the collapse at a stable level well above 0, with no decreasing trend: per
    condition the LN curve's trend (``statuses.trend_status``: the whole curve from ``trend_from`` and its
    last half) is ``kept`` while the curve without LN collapses (reproduced); LN ``falling``, ``low`` or
    ``at floor`` anywhere (a curve at the floor is never kept), or ``kept`` with the curve without LN not
    collapsing either (not reproduced). ``keep_min``: the level LN must keep (μ_rel), None for raw μ.
    Bonferroni over the conditions. A "not reproduced" is decided by a curve that moves as plotted (falls,
    then perhaps reaches the floor), not by one flat at the floor from the start (``trend_from``, fewer than
    2 layers above the floor: it decides nothing by itself); the evidence says which curves are flat there
    (:func:`_decided_by_moving`)."""
    parts = []
    flat: list[str] = []
    labels = [label for label in ln if label in san]
    with conditions(len(labels)):
        for label in labels:
            c_ln, c_san = ln[label], san[label]
            s_ln, s_san = trend_status(c_ln, th, keep_min), collapse_status(c_san, th)
            if _flat_at_floor(c_ln, s_ln, th):
                flat.append(label)
            words = f"with LN {s_ln.name} ({s_ln.words}); without LN {s_san.name} ({s_san.words})"
            n, unit = c_ln.units, c_ln.unit
            if StatusName.TOO_FEW in (s_ln.name, s_san.name):
                parts.append((label, few_part(label, min(c_ln.n, c_san.n), th, words)))
            elif s_ln.name is StatusName.KEPT and s_san.name in COLLAPSED:
                parts.append((label, Judgement(REPRODUCED, words, n=n, margins=s_ln.margins, unit=unit)))
            elif s_ln.name is StatusName.KEPT and s_san.name is StatusName.NOT_COLLAPSING:
                same = causes.measured_otherwise(f"{label}: LN makes no difference")
                words += "; without LN it does not collapse either"
                kind = "measured otherwise"
                part = Judgement(NOT_REPRODUCED, words, same, kind, n, s_san.margins, unit=unit)
                parts.append((label, part))
            elif s_ln.name is StatusName.AT_FLOOR:
                parts.append((label, floor_part(NOT_REPRODUCED, f"{label}, with LN", c_ln, s_ln, words)))
            elif s_ln.name in (StatusName.FALLING, StatusName.LOW):
                parts.append((label, Judgement(NOT_REPRODUCED, words, n=n, margins=s_ln.margins, unit=unit)))
            else:
                parts.append((label, sample_part(INCONCLUSIVE, words, s_ln.margins, n, unit)))
    return _decided_by_moving(combine_parts(parts), parts, flat, ln)


def _flat_at_floor(c: Curve, st: Status, th: Thresholds) -> bool:
    """At the floor as plotted from the start: ``at floor``, with fewer than 2 layers above it from
    ``trend_from`` on (no rate to measure there, ``Curve.rate``)."""
    start = min(th.count("trend_from"), max(c.layers - 1, 0))
    return st.name is StatusName.AT_FLOOR and (c.layers <= start or not c.rate(start, c.layers).measured)


def _decided_by_moving(
    j: Judgement, parts: list[tuple[str, Judgement]], flat: list[str], curves: Mapping[str, Curve]
) -> Judgement:
    """``j`` (of ``combine_parts``) decided by the first failing condition whose curve moves as plotted, where
    the first failing one is a curve flat at the floor from the start (``flat``): such a curve shows the
    floor, not the statement (Fig. 6: complete at the float32 floor from t = 2; causal falls 5.6 decades
    and then reaches it). One line of the evidence names the flat curves."""
    if not flat:
        return j
    where = "; ".join(f"{label} (from t={curves[label].first_at_floor()})" for label in flat)
    j = j.amended(after=f" || flat at the floor from the start, deciding nothing by itself: {where}")
    if j.verdict is not NOT_REPRODUCED:
        return j
    failing = [(label, p) for label, p in parts if p.verdict is NOT_REPRODUCED]
    moving = [(label, p) for label, p in failing if label not in flat]
    if not moving or failing[0][0] not in flat:
        return j
    label, part = moving[0]
    key = next((m for m in j.margins if m.what.startswith(f"{label}:") and m.decided), None)
    kind, sentence = part.cause_kind, part.cause
    if not kind:
        kind, sentence = "measured otherwise", causes.measured_otherwise(f"{label}: {part.evidence}")
    return replace(j, cause=sentence, cause_kind=kind, decided_by=f"{label}: {part.evidence}", key=key)


def kept_stable(curves: Mapping[str, Curve], th: Thresholds, keep_min: float | None) -> Judgement:
    """No collapse and a stable level: overall ``not collapsing`` and last half ``kept`` (reproduced);
    collapsing, at the floor, falling, low or growing (not reproduced)."""
    parts = []
    for label, c in curves.items():
        s_c, s_l = collapse_status(c, th), level_status(c, th, keep_min)
        words = f"{s_c.name}, {s_l.name}: {s_c.words}; {s_l.words}"
        if StatusName.TOO_FEW in (s_c.name, s_l.name):
            parts.append((label, few_part(label, c.n, th, words)))
        elif s_c.name is StatusName.NOT_COLLAPSING and s_l.name is StatusName.KEPT:
            parts.append((label, Judgement(REPRODUCED, f"{s_c.words}; {s_l.words}", n=c.units, unit=c.unit)))
        elif StatusName.AT_FLOOR in (s_c.name, s_l.name):
            at = s_l if s_l.name is StatusName.AT_FLOOR else s_c
            parts.append((label, floor_part(NOT_REPRODUCED, label, c, at, words)))
        elif s_c.name is StatusName.COLLAPSING or s_l.name in (
            StatusName.FALLING,
            StatusName.LOW,
            StatusName.GROWING,
        ):
            parts.append((label, Judgement(NOT_REPRODUCED, words, n=c.units, unit=c.unit)))
        else:
            margins = s_c.margins + s_l.margins
            parts.append((label, sample_part(INCONCLUSIVE, words, margins, c.units, c.unit)))
    return combine_parts(parts)


def _unclear_stability(label: str, status: StatusName, words: str, n: int, unit: str = SAMPLE) -> Judgement:
    """A curve whose I(L) lies between unstable_min / 2 and unstable_min: neither stable nor unstable."""
    why = f"{label}: I(L) between unstable_min / 2 and unstable_min"
    return Judgement(INCONCLUSIVE, f"{status}: {words}", why, "sample too small", n, unit=unit)


def skip_unstable(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """Skip alone makes μ unstable, more so deeper: ``unstable`` at the last layer with ``I`` larger
    there than at the middle layer for sure, or non-finite values (reproduced); ``stable`` (not)."""

    def decide(label: str, c: Curve, st: Status) -> Judgement:
        words = st.words
        if c.layers > 12 and c.first_nonfinite() is None:
            words += f"; I(t=12) = {instability(c, 12):.2g}"
        if st.name is StatusName.STABLE:
            return Judgement(NOT_REPRODUCED, f"stable: {words}", n=c.units, unit=c.unit)
        if st.name is not StatusName.UNSTABLE:
            return _unclear_stability(label, st.name, words, c.units, c.unit)
        if c.first_nonfinite() is not None:
            return Judgement(REPRODUCED, words, n=c.units, unit=c.unit)
        mid, end = c.layers // 2, c.layers
        grow = instability(c, end) - instability(c, mid)
        if c.unit == NETWORK and c.net_drop is not None:  # per network: the change of |mean log drop|
            per = np.abs(c.net_drop[:, end]) - np.abs(c.net_drop[:, mid])
            per = per[np.isfinite(per)]
            se = float(sample_std(per)) / math.sqrt(per.size) if per.size >= 2 else math.nan
            units = int(per.size)
        else:
            se, units = float(c.drop_std[end]) / math.sqrt(max(c.n_at(end), 1)), c.n
        margin = Margin(f"growth of I from t={mid} to t={end}", grow, se, 0.0, units, c.unit)
        lo, hi = margin.bounds()
        words += f"; I grows by {grow:.2g} from t={mid} (± {(hi - lo) / 2:.2g}, {n_words(units, c.unit)})"
        v = REPRODUCED if margin.decided and grow > 0 else INCONCLUSIVE
        return sample_part(v, words, [margin], units, c.unit)

    return _each(curves, th, stability_status, decide)


def full_stable(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """The full transformer keeps μ stable: ``stable`` (and, for μ_rel, never at the floor)."""

    def decide(label: str, c: Curve, st: Status) -> Judgement:
        floor = c.first_at_floor() if c.quantity == "mu_rel" else None
        if floor is not None:
            at = Status(StatusName.AT_FLOOR, "", floor_t=floor)
            return floor_part(NOT_REPRODUCED, label, c, at, f"at the {c.dtype} floor from t={floor}")
        if st.name is StatusName.STABLE:
            return Judgement(REPRODUCED, st.words, n=c.units, unit=c.unit)
        if st.name is StatusName.UNSTABLE:
            return Judgement(NOT_REPRODUCED, f"unstable: {st.words}", n=c.units, unit=c.unit)
        return _unclear_stability(label, st.name, st.words, c.units, c.unit)

    return _each(curves, th, stability_status, decide)
