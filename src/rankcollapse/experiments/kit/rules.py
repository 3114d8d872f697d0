"""Every claim rule of every story, as pure functions of curves, arrays or per-run checks.

A rule maps measured data and the story's :class:`~rankcollapse.experiments.kit.thresholds.Thresholds`
to a :class:`~rankcollapse.experiments.kit.judgement.Judgement`: a verdict, the evidence in words, a
cause sentence (``kit.causes``) where it is not plainly reproduced, and the comparisons it turned on.
Partial verdicts (per mask, per dtype, per model, per run) are merged only by
:func:`~rankcollapse.experiments.engine.verdicts.combine_verdicts`, through :func:`combine_parts`.
Statuses of single curves are in ``kit.statuses``. A rule never reads its own evidence text.

Curve rules take ``Mapping[label, Curve]`` (the label says the condition: ``"causal, float32"``);
the stories call them once on the paper's plotted quantity and once on the mechanism (μ_rel with the
floor, float32 and float64) and put both in one row (``kit.claims``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Verdict,
    combine_verdicts,
)
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.curves import (
    NETWORK,
    RUN,
    SAMPLE,
    Curve,
    Rate,
    conditions,
    n_words,
    sample_std,
    z,
)
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.statuses import (
    Status,
    collapse_status,
    few,
    instability,
    level_status,
    stability_status,
    trend_status,
)
from rankcollapse.experiments.kit.thresholds import Thresholds


@dataclass(frozen=True)
class Part:
    """One partial verdict (one condition) of a rule, with its words, comparisons and cause."""

    verdict: Verdict
    words: str
    margins: tuple[Margin, ...] = field(default_factory=tuple)
    cause_kind: str = ""
    cause: str = ""
    n: int | None = None
    unit: str = SAMPLE


def _sample_part(
    verdict: Verdict, words: str, margins: Sequence[Margin], n: int | None, unit: str = SAMPLE
) -> Part:
    """An inconclusive part whose comparisons did not decide carries the 'sample too small' cause."""
    open_ = [m for m in margins if not m.decided]
    if verdict is INCONCLUSIVE and open_:
        return Part(
            verdict, words, tuple(margins), "sample too small", causes.sample_too_small(open_), n, unit
        )
    return Part(verdict, words, tuple(margins), n=n, unit=unit)


def _few_part(label: str, c_n: int, th: Thresholds, words: str) -> Part:
    need = th.count("min_samples")
    return Part(
        INCONCLUSIVE,
        words,
        (),
        "sample too small",
        causes.too_few(c_n, need, SAMPLE, label),
        c_n,
    )


def _floor_part(verdict: Verdict, label: str, c: Curve, st: Status, words: str) -> Part:
    return Part(
        verdict,
        words,
        (),
        "precision floor",
        causes.precision_floor(label, c.dtype, st.floor_t),
        c.units,
        c.unit,
    )


def _labelled(label: str, m: Margin) -> Margin:
    """``m`` with its condition named in front of its statistic (once)."""
    return m if not label or m.what.startswith(f"{label}:") else replace(m, what=f"{label}: {m.what}")


def combine_parts(parts: Sequence[tuple[str, Part]], empty: str = "no data") -> Judgement:
    """One judgement from labelled parts: verdicts by ``combine_verdicts``; the cause of the first part
    that decided the verdict (``not reproduced``: the first such part; ``inconclusive``: the first
    undecided one); the evidence lists every part.

    The deciding condition (``Judgement.decided_by``, ``Judgement.key``): for ``not reproduced`` the first
    failing part and its decided comparison; for ``inconclusive`` the first open part and its open
    comparison; for ``reproduced`` the part whose decided comparison sits closest to its threshold (the
    weakest link). Every comparison is named by its condition's label."""
    if not parts:
        return Judgement(INCONCLUSIVE, empty, causes.no_data(empty), "no data")
    parts = [(label, replace(p, margins=tuple(_labelled(label, m) for m in p.margins))) for label, p in parts]
    verdict = combine_verdicts(p.verdict for _, p in parts)
    evidence = " | ".join(f"{label}: {p.words}" for label, p in parts)
    margins = tuple(m for _, p in parts for m in p.margins)
    ns = [p.n for _, p in parts if p.n is not None]
    n = min(ns) if ns else None
    unit = NETWORK if any(p.unit == NETWORK for _, p in parts) else SAMPLE
    deciding = [(label, p) for label, p in parts if p.verdict is verdict]
    if verdict is REPRODUCED:
        decided = [(m.gap, label, p, m) for label, p in parts for m in p.margins if m.decided]
        if decided:
            _, label, part, key = min(decided, key=lambda x: x[0])
        else:
            (label, part), key = deciding[0], None
        return Judgement(
            verdict, evidence, n=n, margins=margins, decided_by=f"{label}: {part.words}", key=key, unit=unit
        )
    label, part = deciding[0]
    wanted = [m for m in part.margins if m.decided is (verdict is NOT_REPRODUCED)]
    key = wanted[0] if wanted else None
    kind, sentence = part.cause_kind, part.cause
    if not kind:
        kind = "measured otherwise" if verdict is NOT_REPRODUCED else "sample too small"
        sentence = (
            causes.measured_otherwise(f"{label}: {part.words}")
            if verdict is NOT_REPRODUCED
            else f"{label}: {part.words}: the evidence does not decide"
        )
    return Judgement(verdict, evidence, sentence, kind, n, margins, f"{label}: {part.words}", key, unit)


def as_part(j: Judgement) -> Part:
    """A judgement as one part of a larger one (e.g. one dtype of a statement judged per dtype)."""
    return Part(j.verdict, j.evidence, j.margins, j.cause_kind, j.cause, j.n, j.unit)


def per_group(groups: Mapping[str, Callable[[Thresholds], Judgement]], th: Thresholds) -> Judgement:
    """One judgement from a rule applied per group (e.g. per dtype), combined by ``combine_parts``; the
    groups are conditions of the row too (Bonferroni, multiplied into the rule's own)."""
    with conditions(len(groups)):
        return combine_parts([(label, as_part(fn(th))) for label, fn in groups.items()])


# --- collapse curves (Figs. 2, 3, 6, 7) -----------------------------------------------------------


def _each(
    curves: Mapping[str, Curve],
    th: Thresholds,
    status: Callable[[Curve, Thresholds], Status],
    decide: Callable[[str, Curve, Status], Part],
) -> Judgement:
    """A curve status for every labelled curve, then ``decide`` its part (too few samples: inconclusive);
    every interval at level ``ALPHA / m`` over the ``m`` curves (Bonferroni: any condition can decide)."""
    parts = []
    with conditions(len(curves)):
        for label, c in curves.items():
            st = status(c, th)
            part = (
                _few_part(label, c.n, th, st.words) if st.name == "too few samples" else decide(label, c, st)
            )
            if part.verdict is INCONCLUSIVE and st.name == "non-finite" and not part.cause_kind:
                part = replace(part, cause_kind="non-finite", cause=causes.non_finite(label, st.words))
            parts.append((label, part))
    return combine_parts(parts)


def _few_or_nonfinite(words: str, n: int, th: Thresholds) -> Judgement:
    """Inconclusive: fewer than ``min_samples`` samples (sample too small), else non-finite values."""
    need = th.count("min_samples")
    if n < need:
        return Judgement(INCONCLUSIVE, words, causes.too_few(n, need), "sample too small", n)
    nonfinite = causes.non_finite(f"{n} samples", "non-finite values")
    return Judgement(INCONCLUSIVE, words, nonfinite, "non-finite", n)


def san_collapse(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """SANs collapse exponentially: every curve ``collapsing`` or ``at floor`` (reproduced); any ``not
    collapsing`` (not reproduced); else inconclusive."""

    def decide(label: str, c: Curve, st: Status) -> Part:
        v = {"collapsing": REPRODUCED, "at floor": REPRODUCED, "not collapsing": NOT_REPRODUCED}.get(
            st.name, INCONCLUSIVE
        )
        return _sample_part(
            v, f"{st.name}: {st.words}" if v is not REPRODUCED else st.words, st.margins, c.units, c.unit
        )

    return _each(curves, th, collapse_status, decide)


def _compare(a: Rate, b: Rate) -> tuple[int, float, float]:
    """(+1 if b's rate is above a's for sure, -1 if below for sure, else 0; difference; its se), at the
    level of the row's conditions (``kit.curves.conditions``)."""
    diff = b.mean - a.mean
    se = math.sqrt(a.se**2 + b.se**2)
    if not (math.isfinite(diff) and math.isfinite(se)):
        return 0, diff, se
    crit = z(min(a.n, b.n)) * se
    return (1 if diff > crit else -1 if diff < -crit else 0), diff, se


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
    parts: list[tuple[str, Part]] = []
    with conditions(len(pairs)):
        for a, ca, b, cb in pairs:
            label = f"{b} vs {a} ({ca.dtype})"
            if few(ca, th) or few(cb, th):
                parts.append((label, _few_part(label, min(ca.n, cb.n), th, "too few samples")))
                continue
            ra, rb = ca.rate(0, ca.layers), cb.rate(0, cb.layers)
            sign, diff, se = _compare(ra, rb)
            v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
            word = {1: "slower", -1: "faster", 0: "not distinguishable"}[sign]
            margin = Margin(f"log-rate difference {b} - {a}", diff, se, 0.0, min(ra.n, rb.n), ra.unit)
            words = f"{word} (log rate {diff:+.2g} ± {z(margin.n) * se:.2g}, {n_words(margin.n, ra.unit)})"
            parts.append((label, _sample_part(v, words, [margin], margin.n, ra.unit)))
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


def ln_stops(
    san: Mapping[str, Curve], ln: Mapping[str, Curve], th: Thresholds, keep_min: float | None
) -> Judgement:
    """Adding LN stops the collapse at a stable level well above 0, with no decreasing trend: per
    condition the LN curve's trend (``statuses.trend_status``: the whole curve from ``trend_from`` and its
    last half) is ``kept`` while the curve without LN collapses (reproduced); LN ``falling``, ``low`` or
    ``at floor`` anywhere (a curve at the floor is never kept), or ``kept`` with the curve without LN not
    collapsing either (not reproduced). ``keep_min``: the level LN must keep (μ_rel), None for raw μ.
    Bonferroni over the conditions."""
    parts = []
    labels = [label for label in ln if label in san]
    with conditions(len(labels)):
        for label in labels:
            c_ln, c_san = ln[label], san[label]
            s_ln, s_san = trend_status(c_ln, th, keep_min), collapse_status(c_san, th)
            words = f"with LN {s_ln.name} ({s_ln.words}); without LN {s_san.name} ({s_san.words})"
            if "too few samples" in (s_ln.name, s_san.name):
                parts.append((label, _few_part(label, min(c_ln.n, c_san.n), th, words)))
            elif s_ln.name == "kept" and s_san.name in ("collapsing", "at floor"):
                parts.append((label, Part(REPRODUCED, words, s_ln.margins, n=c_ln.units, unit=c_ln.unit)))
            elif s_ln.name == "kept" and s_san.name == "not collapsing":
                parts.append(
                    (
                        label,
                        Part(
                            NOT_REPRODUCED,
                            words + "; without LN it does not collapse either",
                            s_san.margins,
                            "measured otherwise",
                            causes.measured_otherwise(f"{label}: LN makes no difference"),
                            c_ln.units,
                            c_ln.unit,
                        ),
                    )
                )
            elif s_ln.name == "at floor":
                parts.append((label, _floor_part(NOT_REPRODUCED, f"{label}, with LN", c_ln, s_ln, words)))
            elif s_ln.name in ("falling", "low"):
                parts.append((label, Part(NOT_REPRODUCED, words, s_ln.margins, n=c_ln.units, unit=c_ln.unit)))
            else:
                parts.append((label, _sample_part(INCONCLUSIVE, words, s_ln.margins, c_ln.units, c_ln.unit)))
    return combine_parts(parts)


def kept_stable(curves: Mapping[str, Curve], th: Thresholds, keep_min: float | None) -> Judgement:
    """No collapse and a stable level: overall ``not collapsing`` and last half ``kept`` (reproduced);
    collapsing, at the floor, falling, low or growing (not reproduced)."""
    parts = []
    for label, c in curves.items():
        s_c, s_l = collapse_status(c, th), level_status(c, th, keep_min)
        words = f"{s_c.name}, {s_l.name}: {s_c.words}; {s_l.words}"
        if "too few samples" in (s_c.name, s_l.name):
            parts.append((label, _few_part(label, c.n, th, words)))
        elif s_c.name == "not collapsing" and s_l.name == "kept":
            parts.append((label, Part(REPRODUCED, f"{s_c.words}; {s_l.words}", n=c.units, unit=c.unit)))
        elif "at floor" in (s_c.name, s_l.name):
            parts.append(
                (label, _floor_part(NOT_REPRODUCED, label, c, s_l if s_l.name == "at floor" else s_c, words))
            )
        elif s_c.name == "collapsing" or s_l.name in ("falling", "low", "growing"):
            parts.append((label, Part(NOT_REPRODUCED, words, n=c.units, unit=c.unit)))
        else:
            parts.append(
                (label, _sample_part(INCONCLUSIVE, words, s_c.margins + s_l.margins, c.units, c.unit))
            )
    return combine_parts(parts)


def _unclear_stability(label: str, status: str, words: str, n: int, unit: str = SAMPLE) -> Part:
    """A curve whose I(L) lies between unstable_min / 2 and unstable_min: neither stable nor unstable."""
    return Part(
        INCONCLUSIVE,
        f"{status}: {words}",
        (),
        "sample too small",
        f"{label}: I(L) between unstable_min / 2 and unstable_min",
        n,
        unit,
    )


def skip_unstable(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """Skip alone makes μ unstable, more so deeper: ``unstable`` at the last layer with ``I`` larger
    there than at the middle layer for sure, or non-finite values (reproduced); ``stable`` (not)."""

    def decide(label: str, c: Curve, st: Status) -> Part:
        words = st.words
        if c.layers > 12 and c.first_nonfinite() is None:
            words += f"; I(t=12) = {instability(c, 12):.2g}"
        if st.name == "stable":
            return Part(NOT_REPRODUCED, f"stable: {words}", n=c.units, unit=c.unit)
        if st.name != "unstable":
            return _unclear_stability(label, st.name, words, c.units, c.unit)
        if c.first_nonfinite() is not None:
            return Part(REPRODUCED, words, n=c.units, unit=c.unit)
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
        return _sample_part(v, words, [margin], units, c.unit)

    return _each(curves, th, stability_status, decide)


def full_stable(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """The full transformer keeps μ stable: ``stable`` (and, for μ_rel, never at the floor)."""

    def decide(label: str, c: Curve, st: Status) -> Part:
        floor = c.first_at_floor() if c.quantity == "mu_rel" else None
        if floor is not None:
            at = Status("at floor", "", floor_t=floor)
            return _floor_part(NOT_REPRODUCED, label, c, at, f"at the {c.dtype} floor from t={floor}")
        if st.name == "stable":
            return Part(REPRODUCED, st.words, n=c.units, unit=c.unit)
        if st.name == "unstable":
            return Part(NOT_REPRODUCED, f"unstable: {st.words}", n=c.units, unit=c.unit)
        return _unclear_stability(label, st.name, st.words, c.units, c.unit)

    return _each(curves, th, stability_status, decide)


def _effect(curves: Mapping[float, Curve], start: int, end: int) -> Rate:
    """Rate at the smallest d_qk minus rate at the largest d_qk, over layers start..end."""
    lo, hi = curves[min(curves)], curves[max(curves)]
    a, b = lo.rate(start, end), hi.rate(start, end)
    return Rate(a.mean - b.mean, math.sqrt(a.se**2 + b.se**2), min(a.n, b.n), a.unit)


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
        if st.name in ("collapsing", "at floor", "too few samples"):
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
            shown = ", ".join(
                f"d_qk={d:g}: x{c.rate(0, k).factor:.3g}/layer" for d, c in sorted(curves.items())
            )
            words = (
                f"{shown}; smallest minus largest d_qk {e.mean:+.2g} ± {e.half:.2g} ({n_words(e.n, e.unit)})"
            )
            if min(c.n for c in curves.values()) < th.count("min_samples"):
                parts.append((mask, _few_part(mask, e.n, th, words)))
                continue
            margin = Margin("log-rate effect of d_qk", e.mean, e.se, 0.0, e.n, e.unit)
            v = REPRODUCED if e.lo > 0 else NOT_REPRODUCED if e.hi < 0 else INCONCLUSIVE
            parts.append((mask, _sample_part(v, words, [margin], e.n, e.unit)))
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
            if min(eff[g].n, eff[s].n) < th.count("min_samples"):
                parts.append((label, _few_part(label, min(eff[g].n, eff[s].n), th, "too few samples")))
                continue
            sign, diff, se = _compare(eff[s], eff[g])
            v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
            unit = eff[g].unit
            margin = Margin("difference of d_qk effects", diff, se, 0.0, min(eff[g].n, eff[s].n), unit)
            words = f"{diff:+.2g} ± {z(margin.n) * se:.2g} ({n_words(margin.n, unit)})"
            parts.append((label, _sample_part(v, words, [margin], margin.n, unit)))
    shown = "; ".join(f"{m}: effect {e.mean:+.2g} ± {e.half:.2g}" for m, e in eff.items())
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


def _shallow_part(mask: str, curves: Mapping[float, Curve], k0: int, th: Thresholds) -> Part:
    """One mask of :func:`dqk_shallow`."""
    depth = min(c.layers for c in curves.values())
    k = min(k0, depth // 2)
    if k < 1:
        why = causes.not_testable(f"{mask}: fewer than 2 layers")
        return Part(INCONCLUSIVE, "too few layers", (), "not testable", why)
    shallow, deep = _effect(curves, 0, k), _effect(curves, depth - k, depth)
    if min(c.n for c in curves.values()) < th.count("min_samples"):
        return _few_part(mask, shallow.n, th, "too few samples")
    sign, diff, se = _compare(deep, shallow)
    v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
    margin = Margin("shallow minus deep d_qk effect", diff, se, 0.0, shallow.n, shallow.unit)
    n = n_words(shallow.n, shallow.unit)
    words = f"shallow minus deep effect {diff:+.2g} ± {z(shallow.n) * se:.2g} ({n})"
    return _sample_part(v, words, [margin], shallow.n, shallow.unit)


# --- token geometry (Figs. 4, 8, 9) ----------------------------------------------------------------


def _too_few(n: int, unit: str, th: Thresholds, words: str) -> Judgement | None:
    """Inconclusive (sample too small) below ``min_samples`` samples, or below 2 networks (no spread
    between networks, no interval); None when there are enough."""
    need = th.count("min_samples") if unit == SAMPLE else 2
    if n >= need:
        return None
    return Judgement(INCONCLUSIVE, words, causes.too_few(n, need, unit), "sample too small", n, unit=unit)


def _per_layer(
    layers: Sequence[int],
    th: Thresholds,
    est: Layered,
    part: Callable[[int], Part],
    words: str,
) -> Judgement:
    """A statement that must hold "at every layer": one part per layer in ``layers``, Bonferroni over
    them; too few samples (or networks): inconclusive. ``words`` lead the evidence."""
    few_ = _too_few(est.n, est.unit, th, words)
    if few_ is not None:
        return few_
    with conditions(len(layers)):
        parts = [(f"t={t}", part(t)) for t in layers]
    return combine_parts(parts).amended(before=f"{words} || ")


def _at_least(m: Margin, words: str) -> Part:
    """A part: ``m``'s value at least its threshold for sure (reproduced), below for sure (not)."""
    lo, hi = m.bounds()
    v = REPRODUCED if lo > m.threshold else NOT_REPRODUCED if hi < m.threshold else INCONCLUSIVE
    return _sample_part(v, words, [m], m.n, m.unit)


def full_rank(share: Layered, th: Thresholds, limit_note: str = "") -> Judgement:
    """Full rank at every layer: at each layer the share of samples whose rank reaches the structural
    maximum is at least ``full_rank_min`` for sure (its interval above it: reproduced); below it for
    sure at some layer: not reproduced. ``limit_note``: how the structural maximum was set."""
    s = share.mean
    t_low = int(np.nanargmin(s)) if np.isfinite(s).any() else 0
    words = f"lowest full-rank share {s[t_low]:.0%} (t={t_low}), {n_words(share.n, share.unit)}"
    if limit_note:
        words += f"; {limit_note}"
    limit = th["full_rank_min"]
    layers = [t for t in range(len(s)) if np.isfinite(s[t])]
    return _per_layer(
        layers,
        th,
        share,
        lambda t: _at_least(share.margin(t, limit, "full-rank share"), f"full-rank share {s[t]:.0%}"),
        words,
    )


def sigma_ratio(ratio: Layered, tolerance: Sequence[float], th: Thresholds) -> Judgement:
    """The smallest singular value stays well above 0, scale-free: at every layer the mean of
    ``sigma_min / sigma_max`` is at least ``ratio_margin`` times the rank tolerance (``tolerance``: the
    relative tolerance of the numerical rank at that layer, ``max(n, d) eps``) for sure (reproduced);
    below it for sure at some layer (not reproduced)."""
    tol = np.asarray(tolerance, dtype=float)
    head = ratio.mean / np.where(tol > 0, tol, np.nan)
    t_low = int(np.nanargmin(head)) if np.isfinite(head).any() else 0
    factor = th["ratio_margin"]
    words = (
        f"smallest mean sigma_min/sigma_max {ratio.mean[t_low]:.3g} at t={t_low}, {head[t_low]:.3g} x the "
        f"rank tolerance {tol[t_low]:.2g} (needs {factor:g} x; {n_words(ratio.n, ratio.unit)})"
    )
    few_ = _too_few(ratio.n, ratio.unit, th, words)
    if few_ is not None or not np.isfinite(head).all():
        return few_ or _few_or_nonfinite(words, ratio.n, th)

    def part(t: int) -> Part:
        m = ratio.margin(t, factor, "sigma_min/sigma_max in rank tolerances", scale=1.0 / float(tol[t]))
        return _at_least(m, f"{head[t]:.3g} x the rank tolerance")

    return _per_layer(list(range(len(head))), th, ratio, part, words)


def cos_grows(cos: Layered, d: int, th: Thresholds) -> Judgement:
    """Mean |cos| grows with depth into a narrow region: last minus first layer above 0 for sure, and the
    last value at least ``aniso_factor`` x sqrt(2/(pi d)) (the mean |cos| of independent isotropic tokens)."""
    m = cos.mean
    diff = float(m[-1] - m[0])
    se = math.sqrt(float(cos.se[-1]) ** 2 + float(cos.se[0]) ** 2)
    iso = math.sqrt(2.0 / (math.pi * d))
    margin = Margin("growth of mean |cos|", diff, se, 0.0, cos.n, cos.unit)
    lo, hi = margin.bounds()
    words = (
        f"mean |cos| {m[0]:.3g} at t=0 -> {m[-1]:.3g} at t={len(m) - 1} ({diff:+.2g} ± {(hi - lo) / 2:.2g}); "
        f"isotropic level {iso:.2g}; {n_words(cos.n, cos.unit)}"
    )
    n = cos.n
    few_ = _too_few(n, cos.unit, th, words)
    if few_ is not None:
        return replace(few_, margins=(margin,), key=margin)
    if hi < 0:
        return Judgement(
            NOT_REPRODUCED,
            words,
            causes.measured_otherwise(f"mean |cos| falls by {-diff:.2g}"),
            "measured otherwise",
            n,
            (margin,),
            key=margin,
            unit=cos.unit,
        )
    if lo > 0 and m[-1] >= th["aniso_factor"] * iso:
        return Judgement(REPRODUCED, words, n=n, margins=(margin,), key=margin, unit=cos.unit)
    if lo > 0:
        return Judgement(
            INCONCLUSIVE,
            words,
            f"grows, but ends below {th['aniso_factor']:g} x the isotropic level",
            "measured otherwise",
            n,
            (margin,),
            key=margin,
            unit=cos.unit,
        )
    return Judgement(
        INCONCLUSIVE,
        words,
        causes.sample_too_small([margin]),
        "sample too small",
        n,
        (margin,),
        key=margin,
        unit=cos.unit,
    )


def dominant_sv(dominance: Layered, ratio: Layered, th: Thresholds, first: int = 1) -> Judgement:
    """One dominant singular value and the smallest never near 0, per layer from ``first``: mean
    sigma_1/sigma_2 >= ``dominance_min`` and mean sigma_min/sigma_max >= ``ratio_min`` for sure at every
    layer (reproduced); either below for sure at some layer (not reproduced). Layers before ``first``
    are reported, not judged (Fig. 8: X(0) is the embedding lookup, no layer has acted on it)."""
    dom, low = dominance.mean, ratio.mean
    layers = list(range(first, len(dom)))
    judged_dom, judged_low = dom[first:], low[first:]
    shown = ", ".join(f"t={t}: {dom[t]:.3g}" for t in range(len(dom)))
    words = (
        f"sigma_1/sigma_2 per layer {shown}; smallest mean sigma_min/sigma_max {np.nanmin(judged_low):.3g} "
        f"(t={first + int(np.nanargmin(judged_low))}); judged from t={first}; "
        f"{n_words(dominance.n, dominance.unit)}"
    )
    few_ = _too_few(dominance.n, dominance.unit, th, words)
    if (
        few_ is not None
        or not (np.isfinite(judged_dom).all() and np.isfinite(judged_low).all())
        or not layers
    ):
        return few_ or _few_or_nonfinite(words, dominance.n, th)

    def part(t: int) -> Part:
        a = dominance.margin(t, th["dominance_min"], "sigma_1/sigma_2")
        b = ratio.margin(t, th["ratio_min"], "sigma_min/sigma_max")
        pa, pb = (
            _at_least(a, f"sigma_1/sigma_2 {dom[t]:.3g}"),
            _at_least(b, f"sigma_min/sigma_max {low[t]:.3g}"),
        )
        v = combine_verdicts([pa.verdict, pb.verdict])
        first_bad = next((p for p in (pa, pb) if p.verdict is v), pa)
        return replace(first_bad, verdict=v, words=f"{pa.words}; {pb.words}", margins=pa.margins + pb.margins)

    with conditions(2):  # two statistics per layer, on top of the layers
        return _per_layer(layers, th, dominance, part, words)


def nonnegative_pairs(neg: Layered, th: Thresholds, pairs: str = "") -> Judgement:
    """Fig. 9 as plotted: the pairwise cosines of X(0) are >= 0 as the figure shows them: the mean share
    of negative token pairs per sample is below ``negative_pairs_max`` for sure (reproduced), above it for
    sure (not reproduced). ``neg``: the per-sample share of negative pairs (one layer, X(0))."""
    limit = th["negative_pairs_max"]
    m = neg.margin(0, limit, "share of negative token pairs")
    lo, hi = m.bounds()
    n = n_words(neg.n, neg.unit)
    words = f"share of negative token pairs {neg.mean[0]:.3%} ± {(hi - lo) / 2:.2%} per sample ({n})"
    if pairs:
        words += f"; most negative pairs: {pairs}"
    few_ = _too_few(neg.n, neg.unit, th, words)
    if few_ is not None:
        return few_
    v = REPRODUCED if hi < limit else NOT_REPRODUCED if lo > limit else INCONCLUSIVE
    return combine_parts([("X(0)", _sample_part(v, words, [m], neg.n, neg.unit))])


def initial_cos(nonneg: Layered, th: Thresholds, smallest: float) -> Judgement:
    """Corollary 1's hypothesis phi(0) >= 0: the share of samples whose smallest pairwise cosine of the
    initial embeddings is >= 0 is at least ``share_min`` for sure (reproduced), below it for sure (not
    reproduced). ``nonneg``: per sample 1 if phi(0) >= 0 (one layer, X(0)); ``smallest``: the lowest
    phi(0) seen (evidence)."""
    limit = th["share_min"]
    m = nonneg.margin(0, limit, "share of samples with phi(0) >= 0")
    n = n_words(nonneg.n, nonneg.unit)
    words = f"phi(0) >= 0 in {nonneg.mean[0]:.0%} of samples ({n}); smallest phi(0) {smallest:.3g}"
    few_ = _too_few(nonneg.n, nonneg.unit, th, words)
    if few_ is not None:
        return few_
    part = _at_least(m, words)
    if part.verdict is NOT_REPRODUCED:
        share = float(nonneg.mean[0])
        part = replace(
            part,
            cause_kind="measured otherwise",
            cause=causes.measured_otherwise(f"phi(0) < 0 in {1 - share:.0%} of samples"),
        )
    return combine_parts([("X(0)", part)])


# --- theorems: per-run checks ----------------------------------------------------------------------


def every_run(checks: Sequence[tuple[str, bool | None, str]], empty: str = "no run") -> Judgement:
    """Every labelled check holds (reproduced); any fails (not reproduced); a check that could not be
    made (None) or no check at all: inconclusive. ``checks``: (label, holds, words)."""
    parts = []
    for label, holds, words in checks:
        if holds is None:
            parts.append(
                (
                    label,
                    Part(INCONCLUSIVE, words, (), "not testable", causes.not_testable(f"{label}: {words}")),
                )
            )
        else:
            parts.append((label, Part(REPRODUCED if holds else NOT_REPRODUCED, words)))
    return combine_parts(parts, empty)


def collapses(runs: Sequence[tuple[str, float | None, bool]], th: Thresholds) -> Judgement:
    """Exponential collapse in every run: each (label, fitted log rate per layer, reached the floor)
    reaches the floor or has rate < ``-min_log_rate`` (reproduced); a run above it off the floor (not);
    a run with no fitted rate off the floor (inconclusive)."""
    limit = th["min_log_rate"]
    checks = []
    for label, rate, floor in runs:
        if floor:
            checks.append((label, True, "reaches the precision floor"))
        elif rate is None or not math.isfinite(rate):
            checks.append((label, None, "no fitted rate"))
        else:
            checks.append((label, rate < -limit, f"log rate {rate:.3g}/layer (x{math.exp(rate):.3g})"))
    return every_run(checks)


def bound_holds(runs: Sequence[tuple[str, str, bool] | tuple[str, str, bool, float | None]]) -> Judgement:
    """A theorem's bound against measured runs: each (label, check, reached floor[, graph radius]) with
    the check of ``dynamics.theory`` (``consistent``, ``rate_exceeded``, ``vacuous``). A run that reached
    the precision floor tests no rate and is not counted; any ``rate_exceeded`` -> not reproduced; some
    non-vacuous ``consistent`` run -> reproduced; none tested -> inconclusive (bound vacuous / floor).
    Where the radii are given, the row's scope names the radii at which the bound was actually tested
    (``tested at r = 1 only``: larger radii made it vacuous)."""
    full = [(r[0], r[1], r[2], r[3] if len(r) > 3 else None) for r in runs]
    tested = [(lab, v) for lab, v, floor, _ in full if not floor and v != "vacuous"]
    vacuous = [lab for lab, v, floor, _ in full if v == "vacuous"]
    floored = [lab for lab, v, floor, _ in full if floor and v != "vacuous"]
    counts = (
        f"{len(runs)} runs: {len(tested)} test the rate (non-vacuous, above the floor), "
        f"{len(vacuous)} vacuous, {len(floored)} reached the floor (no rate to test)"
    )
    radii_all = sorted({r for *_, r in full if r is not None})
    radii = sorted({r for lab, v, floor, r in full if r is not None and not floor and v != "vacuous"})
    scope = ""
    if radii and radii_all and radii != radii_all:
        scope = f"tested at r = {', '.join(f'{r:g}' for r in radii)} only"
    if scope:
        counts += f"; {scope} (radii run: {', '.join(f'{r:g}' for r in radii_all)})"
    exceeded = [lab for lab, v in tested if v == "rate_exceeded"]
    if exceeded:
        return Judgement(
            NOT_REPRODUCED,
            f"{counts}; rate exceeded in {', '.join(exceeded[:4])}",
            causes.measured_otherwise(
                f"the measured rate is slower than the bound in {len(exceeded)} run(s)"
            ),
            "measured otherwise",
            len(runs),
            unit=RUN,
            scope=scope,
        )
    if tested:
        return Judgement(
            REPRODUCED, f"{counts}; consistent in all {len(tested)}", n=len(runs), unit=RUN, scope=scope
        )
    if vacuous:
        return Judgement(
            INCONCLUSIVE,
            counts,
            causes.bound_vacuous(f"{len(vacuous)} of {len(runs)} runs"),
            "bound vacuous",
            len(runs),
            unit=RUN,
        )
    return Judgement(
        INCONCLUSIVE,
        counts,
        causes.not_testable("every run reached the precision floor"),
        "not testable",
        len(runs),
        unit=RUN,
    )


def stable_in_certain_directions(
    ranks: Mapping[int, Sequence[tuple[int, int]]], words: Mapping[int, str]
) -> Judgement:
    """§4.4's "stable in certain directions", per rank: ``ranks[k]`` lists each equilibrium of rank ``k``
    as (stable tangent directions, directional starts along them that returned). Rank ``k`` holds when
    some equilibrium has a stable direction and every start along its stable directions returned (a
    saddle *is* stable in certain directions); it fails when no equilibrium of that rank has a stable
    direction; stable directions whose starts do not all return leave it inconclusive (the spectrum and
    the map disagree); no equilibrium of the rank: not testable. Every rank holds -> reproduced."""
    checks: list[tuple[str, bool | None, str]] = []
    for k, eqs in sorted(ranks.items()):
        text = words.get(k, "")
        if not eqs:
            checks.append((f"rank {k}", None, text or "no equilibrium of this rank"))
        elif not any(stable > 0 for stable, _ in eqs):
            checks.append((f"rank {k}", False, text))
        else:
            back = any(stable > 0 and returned == stable for stable, returned in eqs)
            checks.append((f"rank {k}", True if back else None, text))
    return every_run(checks, empty="no equilibrium of rank >= 2")


def at_least(values: Sequence[tuple[str, float]], th: Thresholds, name: str) -> Judgement:
    """Every labelled value is at least the threshold ``name`` (reproduced), else not reproduced."""
    limit = th[name]
    return every_run([(label, bool(v >= limit), f"{v:.3g} (needs >= {limit:g})") for label, v in values])


def spearman_order(per_family: Mapping[str, tuple[float, str]], th: Thresholds) -> Judgement:
    """Per family, a Spearman correlation of the expected order: ``>= min_rho`` (reproduced), ``<= 0``
    (not reproduced), in between or NaN (inconclusive). ``per_family``: family -> (rho, words)."""
    limit = th["min_rho"]
    parts = []
    for fam, (rho, words) in per_family.items():
        if not math.isfinite(rho):
            parts.append(
                (
                    fam,
                    Part(
                        INCONCLUSIVE,
                        f"{words}; too few points",
                        (),
                        "not testable",
                        causes.not_testable(f"{fam}: fewer than 3 fitted rates"),
                    ),
                )
            )
        else:
            v = REPRODUCED if rho >= limit else NOT_REPRODUCED if rho <= 0 else INCONCLUSIVE
            parts.append((fam, Part(v, f"{words}; Spearman {rho:.2g}")))
    return combine_parts(parts)


def pairs_ordered(pairs: Sequence[tuple[str, float, float]]) -> Judgement:
    """In every (label, a, b) pair ``b > a`` (reproduced); any not (not reproduced); none: inconclusive."""
    return every_run(
        [(label, bool(b > a), f"{a:.3g} vs {b:.3g}") for label, a, b in pairs], empty="no pair measured"
    )


RuleFn = Callable[[Thresholds], Judgement]
