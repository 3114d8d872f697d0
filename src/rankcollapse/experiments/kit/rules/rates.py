"""Rules on rates (slopes of log curves over layers): one rate against another, for sure at the row's level.

A rate is :meth:`~rankcollapse.experiments.kit.curves.Curve.rate` (the mean per-layer log change and its
standard error, per network where the weights are a random draw), measured before the floor: a curve that
reaches the precision floor with fewer than 2 layers above it has no rate, and its condition is inconclusive
with that cause (``causes.floor_too_early``), never compared at the floor's own rate. Two rates differ for
sure when their difference lies outside ``± z se`` (``kit.curves.z``, Bonferroni over the row's
conditions); a difference of two rates (the d_qk effect) is measured over their common layers. Used for
locality (a larger graph radius collapses more slowly), the d_qk rules (Fig. 3) and a polynomial decay
(:func:`power_law`: the rate in log t, Karagodin et al.'s pre-LN contraction).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts, few_part, sample_part
from rankcollapse.experiments.kit.curves import Curve, Rate, conditions, n_words, z
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.statuses import COLLAPSED, StatusName, collapse_status, few
from rankcollapse.experiments.kit.thresholds import Thresholds


def _compare(a: Rate, b: Rate) -> tuple[int, float, float]:
    """(+1 if b's rate is above a's for sure, -1 if below for sure, else 0; difference; its se), at the
    level of the row's conditions (``kit.curves.conditions``)."""
    diff = b.mean - a.mean
    se = math.sqrt(a.se**2 + b.se**2)
    if not (math.isfinite(diff) and math.isfinite(se)):
        return 0, diff, se
    crit = z(min(a.n, b.n)) * se
    return (1 if diff > crit else -1 if diff < -crit else 0), diff, se


def _no_rate(label: str, dtype: str, r: Rate) -> Judgement:
    """Inconclusive: the curve of ``label`` reaches the floor with fewer than 2 layers of the window above
    it, so it has no rate (``Curve.rate``); more samples would not change it."""
    cause = causes.floor_too_early(label, dtype, r.floor_t)
    return Judgement(INCONCLUSIVE, f"{label}: {r.text()}", cause, "precision floor", r.n, unit=r.unit)


def _factor(r: Rate) -> str:
    """``x0.31/layer``, or ``no rate (at the floor from t=1, ...)``."""
    return f"x{r.factor:.3g}/layer" if r.measured else r.text()


def local_slower(curves: Mapping[str, Curve], radius: Mapping[str, float], th: Thresholds) -> Judgement:
    """More local masks (larger graph radius) collapse more slowly: for every pair of masks with
    different radii (in the same dtype), the more local one has the higher (less negative) log rate over
    all layers for sure (reproduced); lower for sure (not reproduced). ``curves``: labels
    ``"<mask>, <dtype>"`` (or plain masks); ``radius``: by mask. Bonferroni over the pairs."""
    keyed = [(label.split(", ")[0], label, c) for label, c in curves.items()]
    keyed.sort(key=lambda k: radius[k[0]])
    pairs = [
        (a, ca, b, cb)
        for i, (a, _, ca) in enumerate(keyed)
        for b, _, cb in keyed[i + 1 :]
        if radius[a] != radius[b] and ca.dtype == cb.dtype
    ]
    parts: list[tuple[str, Judgement]] = []
    with conditions(len(pairs)):
        for a, ca, b, cb in pairs:
            label = f"{b} vs {a} ({ca.dtype})"
            if few(ca, th) or few(cb, th):
                parts.append((label, few_part(label, min(ca.n, cb.n), th, "too few samples")))
                continue
            ra, rb = ca.rate(0, ca.layers), cb.rate(0, cb.layers)
            gone = [(m, c.dtype, r) for m, c, r in ((a, ca, ra), (b, cb, rb)) if not r.measured]
            if gone:
                parts.append((label, _no_rate(*gone[0])))
                continue
            sign, diff, se = _compare(ra, rb)
            v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
            word = {1: "slower", -1: "faster", 0: "not distinguishable"}[sign]
            margin = Margin(f"log-rate difference {b} - {a}", diff, se, 0.0, min(ra.n, rb.n), ra.unit)
            words = f"{word} (log rate {diff:+.2g} ± {z(margin.n) * se:.2g}, {n_words(margin.n, ra.unit)})"
            parts.append((label, sample_part(v, words, [margin], margin.n, ra.unit)))
    if not parts:
        return Judgement(
            INCONCLUSIVE,
            "fewer than two masks with different radii",
            causes.not_testable("fewer than two masks with different graph radii"),
            "not testable",
        )
    rates = "; ".join(f"{label} (r={radius[m]:g}): {c.rate(0, c.layers).text()}" for m, label, c in keyed)
    j = combine_parts(parts)
    return j.amended(before=f"{rates} || ")


def _effect(curves: Mapping[float, Curve], start: int, end: int) -> Rate:
    """Rate at the smallest d_qk minus rate at the largest d_qk, over layers start..end, both measured over
    their common layers above the floor (not measured where either curve has fewer than 2 there)."""
    lo, hi = curves[min(curves)], curves[max(curves)]
    a, b = lo.rate(start, end), hi.rate(start, end)
    cuts = [r.floor_t for r in (a, b) if r.floor_t is not None]
    floor_t = min(cuts) if cuts else None
    common = min(a.end, b.end)
    if not (a.measured and b.measured):
        return Rate(math.nan, math.nan, min(a.n, b.n), a.unit, start=start, end=common, floor_t=floor_t)
    if common < max(a.end, b.end):  # the same layers for both: the effect of d_qk, not of the window
        a, b = lo.rate(start, common), hi.rate(start, common)
    return Rate(
        a.mean - b.mean, math.sqrt(a.se**2 + b.se**2), min(a.n, b.n), a.unit, start=start, end=common,
        floor_t=floor_t,
    )


def _dtype(curves: Mapping[float, Curve]) -> str:
    return next(iter(curves.values())).dtype


def dqk_testable(
    per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds
) -> tuple[dict[str, Mapping[float, Curve]], list[str]]:
    """The masks where a d_qk rate claim can be tested: the SAN at the largest d_qk (the model's own)
    collapses (``collapsing`` or ``at floor``). A SAN whose μ grows is not a collapse-rate experiment:
    those masks are left out, each with the reason."""
    kept: dict[str, Mapping[float, Curve]] = {}
    notes = []
    for mask, curves in per_mask.items():
        own = curves[max(curves)]
        st = collapse_status(own, th)
        if st.name in (*COLLAPSED, StatusName.TOO_FEW):
            kept[mask] = curves
        else:
            r = own.rate(0, own.layers)
            notes.append(
                f"{mask}: the SAN at d_qk = {max(curves):g} does not collapse ({st.name}, x{r.factor:.3g}/"
                "layer)"
            )
    return kept, notes


def dqk(kind: str, per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """One of the d_qk rules (``slows``, ``global``, ``shallow``) on the masks where it is testable
    (:func:`dqk_testable`); none testable: inconclusive, ``not testable``."""
    kept, notes = dqk_testable(per_mask, th)
    if not kept:
        why = "; ".join(notes) or "no mask with two d_qk values"
        return Judgement(INCONCLUSIVE, why, causes.not_testable(why), "not testable")
    fn = {"slows": dqk_slows, "global": dqk_global, "shallow": dqk_shallow}[kind]
    j = fn(kept, th)
    if not notes:
        return j
    left = "; ".join(notes)
    return Judgement(
        j.verdict, f"{j.evidence} || left out (not a collapse): {left}", j.cause, j.cause_kind, j.n, j.margins
    )


def dqk_slows(per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """A smaller d_qk slows the initial collapse (layers 0..k, k = initial_layers): per mask, the rate at
    the smallest d_qk is above the rate at the largest for sure (reproduced), below it for sure (not)."""
    parts = []
    k0 = th.count("initial_layers")
    with conditions(len(per_mask)):
        for mask, curves in per_mask.items():
            k = min(k0, min(c.layers for c in curves.values()))
            e = _effect(curves, 0, k)
            if not e.measured:
                parts.append((mask, _no_rate(mask, _dtype(curves), e)))
                continue
            shown = ", ".join(f"d_qk={d:g}: {_factor(c.rate(0, e.end))}" for d, c in sorted(curves.items()))
            if e.cut:
                shown += f" (t=0..{e.end}, before the floor at t={e.floor_t})"
            words = (
                f"{shown}; smallest minus largest d_qk {e.mean:+.2g} ± {e.half:.2g} ({n_words(e.n, e.unit)})"
            )
            if min(c.n for c in curves.values()) < th.count("min_samples"):
                parts.append((mask, few_part(mask, e.n, th, words)))
                continue
            margin = Margin("log-rate effect of d_qk", e.mean, e.se, 0.0, e.n, e.unit)
            v = REPRODUCED if e.lo > 0 else NOT_REPRODUCED if e.hi < 0 else INCONCLUSIVE
            parts.append((mask, sample_part(v, words, [margin], e.n, e.unit)))
    return combine_parts(parts).amended(before=f"first {k0} layers | ")


def dqk_global(per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """The d_qk effect (initial rate at the smallest minus the largest d_qk) is larger under global
    attention (``global_masks``) than under sparse masks (``sparse_masks``), for every pair."""
    k0 = th.count("initial_layers")
    eff = {m: _effect(c, 0, min(k0, min(x.layers for x in c.values()))) for m, c in per_mask.items()}
    pairs = [
        (g, s) for g in th.names("global_masks") for s in th.names("sparse_masks") if g in eff and s in eff
    ]
    parts = []
    with conditions(len(pairs)):
        for g, s in pairs:
            label = f"{g} minus {s}"
            gone = [m for m in (g, s) if not eff[m].measured]
            if gone:
                parts.append((label, _no_rate(gone[0], _dtype(per_mask[gone[0]]), eff[gone[0]])))
                continue
            if min(eff[g].n, eff[s].n) < th.count("min_samples"):
                parts.append((label, few_part(label, min(eff[g].n, eff[s].n), th, "too few samples")))
                continue
            sign, diff, se = _compare(eff[s], eff[g])
            v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
            unit = eff[g].unit
            margin = Margin("difference of d_qk effects", diff, se, 0.0, min(eff[g].n, eff[s].n), unit)
            words = f"{diff:+.2g} ± {z(margin.n) * se:.2g} ({n_words(margin.n, unit)})"
            parts.append((label, sample_part(v, words, [margin], margin.n, unit)))
    shown = "; ".join(
        f"{m}: effect {e.mean:+.2g} ± {e.half:.2g}" if e.measured else f"{m}: {e.text()}"
        for m, e in eff.items()
    )
    if not parts:
        why = "no (global, sparse) pair of masks measured"
        return Judgement(INCONCLUSIVE, f"{shown} || {why}", causes.not_testable(why), "not testable")
    return combine_parts(parts).amended(before=f"{shown} || ")


def dqk_shallow(per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """The d_qk effect is larger in the first k layers than in the last k layers, per mask."""
    parts = []
    k0 = th.count("initial_layers")
    with conditions(len(per_mask)):
        for mask, curves in per_mask.items():
            parts.append((mask, _shallow_part(mask, curves, k0, th)))
    return combine_parts(parts).amended(before=f"layers 0..k vs L-k..L, k <= {k0} | ")


def _shallow_part(mask: str, curves: Mapping[float, Curve], k0: int, th: Thresholds) -> Judgement:
    """One mask of :func:`dqk_shallow`."""
    depth = min(c.layers for c in curves.values())
    k = min(k0, depth // 2)
    if k < 1:
        why = causes.not_testable(f"{mask}: fewer than 2 layers")
        return Judgement(INCONCLUSIVE, "too few layers", why, "not testable")
    shallow, deep = _effect(curves, 0, k), _effect(curves, depth - k, depth)
    for what, e in (("shallow layers", shallow), ("deep layers", deep)):
        if not e.measured:
            return _no_rate(f"{mask}, {what}", _dtype(curves), e)
    if min(c.n for c in curves.values()) < th.count("min_samples"):
        return few_part(mask, shallow.n, th, "too few samples")
    sign, diff, se = _compare(deep, shallow)
    v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
    margin = Margin("shallow minus deep d_qk effect", diff, se, 0.0, shallow.n, shallow.unit)
    n = n_words(shallow.n, shallow.unit)
    words = f"shallow minus deep effect {diff:+.2g} ± {z(shallow.n) * se:.2g} ({n})"
    return sample_part(v, words, [margin], shallow.n, shallow.unit)


def power_law(curves: Mapping[str, Curve], exponent: float, th: Thresholds) -> Judgement:
    """A polynomial decay ``y ~ t^exponent``: per curve, its slope in log t over the last half (layers
    ``a = L // 2`` to ``b = L``), ``s = (log y(b) - log y(a)) / log(b / a)`` (:meth:`Curve.rate` over
    ``a..b`` times ``(b - a) / log(b / a)``, per network where the network is the unit), within
    ``exponent_tol`` of ``exponent`` for sure -> reproduced; outside it for sure -> not reproduced (an
    exponential decay's slope grows with L, a level's is 0); otherwise inconclusive; a curve at its precision
    floor in the last half, or with fewer than ``min_samples`` units, inconclusive. Bonferroni over the
    curves and the two sides of each."""
    tol = th["exponent_tol"]
    parts: list[tuple[str, Judgement]] = []
    with conditions(2 * len(curves)):
        for label, c in curves.items():
            if few(c, th):
                parts.append((label, few_part(label, c.units, th, "too few samples", c.unit)))
                continue
            a, b = c.layers // 2, c.layers
            st = collapse_status(c, th)
            if a < 1 or st.name is StatusName.AT_FLOOR:
                why = f"{label}: " + ("at the precision floor" if a >= 1 else f"only {c.layers} layer(s)")
                parts.append((label, Judgement(INCONCLUSIVE, why, causes.not_testable(why), "not testable")))
                continue
            r, k = c.rate(a, b), (b - a) / math.log(b / a)
            if not r.measured:
                parts.append((label, _no_rate(label, c.dtype, r)))
                continue
            if r.cut:  # the slope over the layers above the floor
                b = r.end
                k = (b - a) / math.log(b / a)
            slope, se = r.mean * k, r.se * k
            what = f"slope of log {c.quantity} in log t over layers {a}-{b}"
            hi = Margin(f"{what}, at most {exponent:g} + tol", slope, se, exponent + tol, r.n, r.unit)
            lo = Margin(f"{what}, at least {exponent:g} - tol", slope, se, exponent - tol, r.n, r.unit)
            words = (f"{c.quantity} ~ t^{slope:.3g} ± {z(r.n) * se:.2g} over layers {a}-{b} against "
                     f"t^{exponent:g} ± {tol:g} ({n_words(r.n, r.unit)})")
            if (hi.decided and slope > exponent + tol) or (lo.decided and slope < exponent - tol):
                how = "faster than" if slope < exponent else "slower than"
                cause = causes.measured_otherwise(f"{label}: decays {how} t^{exponent:g} ({words})")
                parts.append((label, Judgement(NOT_REPRODUCED, f"not t^{exponent:g}: {words}", cause,
                                               "measured otherwise", r.n, (hi, lo), unit=r.unit)))
            else:
                v = REPRODUCED if hi.decided and lo.decided else INCONCLUSIVE
                parts.append((label, sample_part(v, words, [hi, lo], r.n, r.unit)))
    return combine_parts(parts)
