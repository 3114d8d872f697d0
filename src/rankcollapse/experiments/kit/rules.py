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
from rankcollapse.experiments.kit.curves import Curve, Rate, z
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.statuses import (
    Status,
    collapse_status,
    few,
    instability,
    level_status,
    stability_status,
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


def _sample_part(verdict: Verdict, words: str, margins: Sequence[Margin], n: int | None) -> Part:
    """An inconclusive part whose comparisons did not decide carries the 'sample too small' cause."""
    open_ = [m for m in margins if not m.decided]
    if verdict is INCONCLUSIVE and open_:
        return Part(verdict, words, tuple(margins), "sample too small", causes.sample_too_small(open_), n)
    return Part(verdict, words, tuple(margins), n=n)


def _few_part(label: str, c_n: int, th: Thresholds, words: str) -> Part:
    need = th.count("min_samples")
    return Part(
        INCONCLUSIVE,
        words,
        (),
        "sample too small",
        f"{label}: n = {c_n} samples, fewer than min_samples = {need}",
        c_n,
    )


def _floor_part(verdict: Verdict, label: str, c: Curve, st: Status, words: str) -> Part:
    return Part(
        verdict, words, (), "precision floor", causes.precision_floor(label, c.dtype, st.floor_t), c.n
    )


def combine_parts(parts: Sequence[tuple[str, Part]], empty: str = "no data") -> Judgement:
    """One judgement from labelled parts: verdicts by ``combine_verdicts``; the cause of the first part
    that decided the verdict (``not reproduced``: the first such part; ``inconclusive``: the first
    undecided one); the evidence lists every part."""
    if not parts:
        return Judgement(INCONCLUSIVE, empty, causes.no_data(empty), "no data")
    verdict = combine_verdicts(p.verdict for _, p in parts)
    evidence = " | ".join(f"{label}: {p.words}" for label, p in parts)
    margins = tuple(m for _, p in parts for m in p.margins)
    ns = [p.n for _, p in parts if p.n is not None]
    n = min(ns) if ns else None
    if verdict is REPRODUCED:
        return Judgement(verdict, evidence, n=n, margins=margins)
    deciding = [(label, p) for label, p in parts if p.verdict is verdict]
    label, part = deciding[0]
    kind, sentence = part.cause_kind, part.cause
    if not kind:
        kind = "measured otherwise" if verdict is NOT_REPRODUCED else "sample too small"
        sentence = (
            causes.measured_otherwise(f"{label}: {part.words}")
            if verdict is NOT_REPRODUCED
            else f"{label}: {part.words}: the evidence does not decide"
        )
    return Judgement(verdict, evidence, sentence, kind, n, margins)


def as_part(j: Judgement) -> Part:
    """A judgement as one part of a larger one (e.g. one dtype of a statement judged per dtype)."""
    return Part(j.verdict, j.evidence, j.margins, j.cause_kind, j.cause, j.n)


def per_group(groups: Mapping[str, Callable[[Thresholds], Judgement]], th: Thresholds) -> Judgement:
    """One judgement from a rule applied per group (e.g. per dtype), combined by ``combine_parts``."""
    return combine_parts([(label, as_part(fn(th))) for label, fn in groups.items()])


# --- collapse curves (Figs. 2, 3, 6, 7) -----------------------------------------------------------


def _each(
    curves: Mapping[str, Curve],
    th: Thresholds,
    status: Callable[[Curve, Thresholds], Status],
    decide: Callable[[str, Curve, Status], Part],
) -> Judgement:
    """A curve status for every labelled curve, then ``decide`` its part (too few samples: inconclusive)."""
    parts = []
    for label, c in curves.items():
        st = status(c, th)
        part = _few_part(label, c.n, th, st.words) if st.name == "too few samples" else decide(label, c, st)
        if part.verdict is INCONCLUSIVE and st.name == "non-finite" and not part.cause_kind:
            part = replace(part, cause_kind="non-finite", cause=causes.non_finite(label, st.words))
        parts.append((label, part))
    return combine_parts(parts)


def _few_or_nonfinite(words: str, n: int, th: Thresholds) -> Judgement:
    """Inconclusive: fewer than ``min_samples`` samples (sample too small), else non-finite values."""
    need = th.count("min_samples")
    if n < need:
        few = f"n = {n} samples, fewer than min_samples = {need}"
        return Judgement(INCONCLUSIVE, words, few, "sample too small", n)
    nonfinite = causes.non_finite(f"n = {n}", "non-finite values")
    return Judgement(INCONCLUSIVE, words, nonfinite, "non-finite", n)


def san_collapse(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """SANs collapse exponentially: every curve ``collapsing`` or ``at floor`` (reproduced); any ``not
    collapsing`` (not reproduced); else inconclusive."""

    def decide(label: str, c: Curve, st: Status) -> Part:
        v = {"collapsing": REPRODUCED, "at floor": REPRODUCED, "not collapsing": NOT_REPRODUCED}.get(
            st.name, INCONCLUSIVE
        )
        return _sample_part(v, f"{st.name}: {st.words}" if v is not REPRODUCED else st.words, st.margins, c.n)

    return _each(curves, th, collapse_status, decide)


def _compare(a: Rate, b: Rate) -> tuple[int, float, float]:
    """(+1 if b's rate is above a's for sure, -1 if below for sure, else 0; difference; its se)."""
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
    ``"<mask>, <dtype>"`` (or plain masks); ``radius``: by mask."""
    keyed = [(label.split(", ")[0], label, c) for label, c in curves.items()]
    keyed.sort(key=lambda k: radius[k[0]])
    parts: list[tuple[str, Part]] = []
    for i, (a, _, ca) in enumerate(keyed):
        for b, _, cb in keyed[i + 1 :]:
            if radius[a] == radius[b] or ca.dtype != cb.dtype:
                continue
            label = f"{b} vs {a} ({ca.dtype})"
            if few(ca, th) or few(cb, th):
                parts.append((label, _few_part(label, min(ca.n, cb.n), th, "too few samples")))
                continue
            sign, diff, se = _compare(ca.rate(0, ca.layers), cb.rate(0, cb.layers))
            v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
            word = {1: "slower", -1: "faster", 0: "not distinguishable"}[sign]
            margin = Margin(f"log-rate difference {b} - {a}", diff, se, 0.0, min(ca.n, cb.n))
            parts.append(
                (
                    label,
                    _sample_part(
                        v, f"{word} (log rate {diff:+.2g} ± {z(margin.n) * se:.2g})", [margin], margin.n
                    ),
                )
            )
    if not parts:
        return Judgement(
            INCONCLUSIVE,
            "fewer than two masks with different radii",
            causes.not_testable("fewer than two masks with different graph radii"),
            "not testable",
        )
    rates = "; ".join(f"{label} (r={radius[m]:g}): {c.rate(0, c.layers).text()}" for m, label, c in keyed)
    j = combine_parts(parts)
    return Judgement(j.verdict, f"{rates} || {j.evidence}", j.cause, j.cause_kind, j.n, j.margins)


def ln_stops(
    san: Mapping[str, Curve], ln: Mapping[str, Curve], th: Thresholds, keep_min: float | None
) -> Judgement:
    """Adding LN stops the collapse at a stable level well above 0: per condition the LN curve is
    ``kept`` while the curve without LN collapses (reproduced); LN ``falling``, ``low`` or ``at floor``,
    or ``kept`` with the curve without LN not collapsing either (not reproduced). ``keep_min``: the
    level LN must keep (μ_rel), None for raw μ."""
    parts = []
    for label, c_ln in ln.items():
        c_san = san.get(label)
        if c_san is None:
            continue
        s_ln, s_san = level_status(c_ln, th, keep_min), collapse_status(c_san, th)
        words = f"with LN {s_ln.name} ({s_ln.words}); without LN {s_san.name} ({s_san.words})"
        if "too few samples" in (s_ln.name, s_san.name):
            parts.append((label, _few_part(label, min(c_ln.n, c_san.n), th, words)))
        elif s_ln.name == "kept" and s_san.name in ("collapsing", "at floor"):
            parts.append((label, Part(REPRODUCED, words, s_ln.margins, n=c_ln.n)))
        elif s_ln.name == "kept" and s_san.name == "not collapsing":
            parts.append(
                (
                    label,
                    Part(
                        NOT_REPRODUCED,
                        words + "; without LN it does not collapse either",
                        s_ln.margins,
                        "measured otherwise",
                        causes.measured_otherwise(f"{label}: LN makes no difference"),
                        c_ln.n,
                    ),
                )
            )
        elif s_ln.name == "at floor":
            parts.append((label, _floor_part(NOT_REPRODUCED, f"{label}, with LN", c_ln, s_ln, words)))
        elif s_ln.name in ("falling", "low"):
            parts.append((label, Part(NOT_REPRODUCED, words, s_ln.margins, n=c_ln.n)))
        else:
            parts.append((label, _sample_part(INCONCLUSIVE, words, s_ln.margins, c_ln.n)))
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
            parts.append((label, Part(REPRODUCED, f"{s_c.words}; {s_l.words}", n=c.n)))
        elif "at floor" in (s_c.name, s_l.name):
            parts.append(
                (label, _floor_part(NOT_REPRODUCED, label, c, s_l if s_l.name == "at floor" else s_c, words))
            )
        elif s_c.name == "collapsing" or s_l.name in ("falling", "low", "growing"):
            parts.append((label, Part(NOT_REPRODUCED, words, n=c.n)))
        else:
            parts.append((label, _sample_part(INCONCLUSIVE, words, s_c.margins + s_l.margins, c.n)))
    return combine_parts(parts)


def _unclear_stability(label: str, status: str, words: str, n: int) -> Part:
    """A curve whose I(L) lies between unstable_min / 2 and unstable_min: neither stable nor unstable."""
    return Part(
        INCONCLUSIVE,
        f"{status}: {words}",
        (),
        "sample too small",
        f"{label}: I(L) between unstable_min / 2 and unstable_min",
        n,
    )


def skip_unstable(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """Skip alone makes μ unstable, more so deeper: ``unstable`` at the last layer with ``I`` larger
    there than at the middle layer for sure, or non-finite values (reproduced); ``stable`` (not)."""

    def decide(label: str, c: Curve, st: Status) -> Part:
        words = st.words
        if c.layers > 12 and c.first_nonfinite() is None:
            words += f"; I(t=12) = {instability(c, 12):.2g}"
        if st.name == "stable":
            return Part(NOT_REPRODUCED, f"stable: {words}", n=c.n)
        if st.name != "unstable":
            return _unclear_stability(label, st.name, words, c.n)
        if c.first_nonfinite() is not None:
            return Part(REPRODUCED, words, n=c.n)
        mid, end = c.layers // 2, c.layers
        grow = instability(c, end) - instability(c, mid)
        se = float(c.drop_std[end]) / math.sqrt(max(c.n_at(end), 1))
        margin = Margin(f"growth of I from t={mid} to t={end}", grow, se, 0.0, c.n)
        words += f"; I grows by {grow:.2g} from t={mid} (± {z(c.n) * se:.2g})"
        return _sample_part(REPRODUCED if margin.decided and grow > 0 else INCONCLUSIVE, words, [margin], c.n)

    return _each(curves, th, stability_status, decide)


def full_stable(curves: Mapping[str, Curve], th: Thresholds) -> Judgement:
    """The full transformer keeps μ stable: ``stable`` (and, for μ_rel, never at the floor)."""

    def decide(label: str, c: Curve, st: Status) -> Part:
        floor = c.first_at_floor() if c.quantity == "mu_rel" else None
        if floor is not None:
            at = Status("at floor", "", floor_t=floor)
            return _floor_part(NOT_REPRODUCED, label, c, at, f"at the {c.dtype} floor from t={floor}")
        if st.name == "stable":
            return Part(REPRODUCED, st.words, n=c.n)
        if st.name == "unstable":
            return Part(NOT_REPRODUCED, f"unstable: {st.words}", n=c.n)
        return _unclear_stability(label, st.name, st.words, c.n)

    return _each(curves, th, stability_status, decide)


def _effect(curves: Mapping[float, Curve], start: int, end: int) -> Rate:
    """Rate at the smallest d_qk minus rate at the largest d_qk, over layers start..end."""
    lo, hi = curves[min(curves)], curves[max(curves)]
    a, b = lo.rate(start, end), hi.rate(start, end)
    return Rate(a.mean - b.mean, math.sqrt(a.se**2 + b.se**2), min(a.n, b.n))


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
    for mask, curves in per_mask.items():
        k = min(k0, min(c.layers for c in curves.values()))
        e = _effect(curves, 0, k)
        shown = ", ".join(f"d_qk={d:g}: x{c.rate(0, k).factor:.3g}/layer" for d, c in sorted(curves.items()))
        words = f"{shown}; smallest minus largest d_qk {e.mean:+.2g} ± {z(e.n) * e.se:.2g}"
        if min(c.n for c in curves.values()) < th.count("min_samples"):
            parts.append((mask, _few_part(mask, e.n, th, words)))
            continue
        margin = Margin(f"{mask}: log-rate effect of d_qk", e.mean, e.se, 0.0, e.n)
        v = REPRODUCED if e.lo > 0 else NOT_REPRODUCED if e.hi < 0 else INCONCLUSIVE
        parts.append((mask, _sample_part(v, words, [margin], e.n)))
    j = combine_parts(parts)
    return Judgement(j.verdict, f"first {k0} layers | {j.evidence}", j.cause, j.cause_kind, j.n, j.margins)


def dqk_global(per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """The d_qk effect (initial rate at the smallest minus the largest d_qk) is larger under global
    attention (``global_masks``) than under sparse masks (``sparse_masks``), for every pair."""
    k0 = th.count("initial_layers")
    eff = {m: _effect(c, 0, min(k0, min(x.layers for x in c.values()))) for m, c in per_mask.items()}
    parts = []
    for g in th.names("global_masks"):
        for s in th.names("sparse_masks"):
            if g not in eff or s not in eff:
                continue
            label = f"{g} minus {s}"
            if min(eff[g].n, eff[s].n) < th.count("min_samples"):
                parts.append((label, _few_part(label, min(eff[g].n, eff[s].n), th, "too few samples")))
                continue
            sign, diff, se = _compare(eff[s], eff[g])
            v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
            margin = Margin(f"{label}: difference of d_qk effects", diff, se, 0.0, min(eff[g].n, eff[s].n))
            parts.append(
                (label, _sample_part(v, f"{diff:+.2g} ± {z(margin.n) * se:.2g}", [margin], margin.n))
            )
    shown = "; ".join(f"{m}: effect {e.mean:+.2g} ± {z(e.n) * e.se:.2g}" for m, e in eff.items())
    if not parts:
        why = "no (global, sparse) pair of masks measured"
        return Judgement(INCONCLUSIVE, f"{shown} || {why}", causes.not_testable(why), "not testable")
    j = combine_parts(parts)
    return Judgement(j.verdict, f"{shown} || {j.evidence}", j.cause, j.cause_kind, j.n, j.margins)


def dqk_shallow(per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """The d_qk effect is larger in the first k layers than in the last k layers, per mask."""
    parts = []
    k0 = th.count("initial_layers")
    for mask, curves in per_mask.items():
        depth = min(c.layers for c in curves.values())
        k = min(k0, depth // 2)
        if k < 1:
            parts.append(
                (
                    mask,
                    Part(
                        INCONCLUSIVE,
                        "too few layers",
                        (),
                        "not testable",
                        causes.not_testable(f"{mask}: fewer than 2 layers"),
                    ),
                )
            )
            continue
        shallow, deep = _effect(curves, 0, k), _effect(curves, depth - k, depth)
        if min(c.n for c in curves.values()) < th.count("min_samples"):
            parts.append((mask, _few_part(mask, shallow.n, th, "too few samples")))
            continue
        sign, diff, se = _compare(deep, shallow)
        v = {1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE)
        margin = Margin(f"{mask}: shallow minus deep d_qk effect", diff, se, 0.0, shallow.n)
        parts.append(
            (
                mask,
                _sample_part(
                    v, f"shallow minus deep effect {diff:+.2g} ± {z(shallow.n) * se:.2g}", [margin], shallow.n
                ),
            )
        )
    j = combine_parts(parts)
    return Judgement(
        j.verdict, f"layers 0..k vs L-k..L, k <= {k0} | {j.evidence}", j.cause, j.cause_kind, j.n, j.margins
    )


# --- token geometry (Figs. 4, 8, 9) ----------------------------------------------------------------


def full_rank(share: Sequence[float], n: int, th: Thresholds, limit_note: str = "") -> Judgement:
    """Full rank at every layer: the smallest per-layer share of samples whose rank reaches the
    structural maximum is at least ``full_rank_min`` (reproduced), else not reproduced.
    ``limit_note``: how the structural maximum was set (stated in the evidence)."""
    s = np.asarray(share, dtype=float)
    t = int(np.nanargmin(s)) if np.isfinite(s).any() else 0
    words = f"lowest full-rank share {s[t]:.0%} (t={t}) of n={n}" + (f"; {limit_note}" if limit_note else "")
    if n < th.count("min_samples") or not np.isfinite(s).any():
        return Judgement(
            INCONCLUSIVE, words, f"n = {n} samples, fewer than min_samples", "sample too small", n
        )
    if s[t] >= th["full_rank_min"]:
        return Judgement(REPRODUCED, words, n=n)
    return Judgement(
        NOT_REPRODUCED,
        words,
        causes.measured_otherwise(f"full-rank share {s[t]:.0%} at t={t}"),
        "measured otherwise",
        n,
    )


def sigma_ratio(ratio: Sequence[float], tolerance: Sequence[float], n: int, th: Thresholds) -> Judgement:
    """The smallest singular value stays well above 0, scale-free: at every layer the mean of
    ``sigma_min / sigma_max`` is at least ``ratio_margin`` times the rank tolerance (``tolerance``: the
    relative tolerance of the numerical rank at that layer, ``max(n, d) eps``), else not reproduced."""
    v, tol = np.asarray(ratio, dtype=float), np.asarray(tolerance, dtype=float)
    factor = th["ratio_margin"]
    head = v / np.where(tol > 0, tol, np.nan)
    t = int(np.nanargmin(head)) if np.isfinite(head).any() else 0
    words = (
        f"smallest mean sigma_min/sigma_max {v[t]:.3g} at t={t}, {head[t]:.3g} x the rank tolerance "
        f"{tol[t]:.2g} (needs {factor:g} x; n={n})"
    )
    if n < th.count("min_samples") or not np.isfinite(head).all():
        return _few_or_nonfinite(words, n, th)
    if head[t] >= factor:
        return Judgement(REPRODUCED, words, n=n)
    return Judgement(
        NOT_REPRODUCED,
        words,
        causes.measured_otherwise(f"sigma_min/sigma_max {v[t]:.3g} at t={t}"),
        "measured otherwise",
        n,
    )


def cos_grows(mean: Sequence[float], std: Sequence[float], n: int, d: int, th: Thresholds) -> Judgement:
    """Mean |cos| grows with depth into a narrow region: last minus first layer above 0 for sure, and the
    last value at least ``aniso_factor`` x sqrt(2/(pi d)) (the mean |cos| of independent isotropic tokens)."""
    m, s = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    diff = m[-1] - m[0]
    se = math.sqrt((s[-1] ** 2 + s[0] ** 2) / max(n, 1))
    iso = math.sqrt(2.0 / (math.pi * d))
    words = (
        f"mean |cos| {m[0]:.3g} at t=0 -> {m[-1]:.3g} at t={len(m) - 1} ({diff:+.2g} ± {z(n) * se:.2g}); "
        f"isotropic level {iso:.2g}; n={n}"
    )
    margin = Margin("growth of mean |cos|", diff, se, 0.0, n)
    if n < th.count("min_samples") or not np.isfinite([diff, se]).all():
        return Judgement(INCONCLUSIVE, words, f"n = {n}: too few samples", "sample too small", n)
    if diff < -z(n) * se:
        return Judgement(
            NOT_REPRODUCED,
            words,
            causes.measured_otherwise(f"mean |cos| falls by {-diff:.2g}"),
            "measured otherwise",
            n,
            (margin,),
        )
    if diff > z(n) * se and m[-1] >= th["aniso_factor"] * iso:
        return Judgement(REPRODUCED, words, n=n, margins=(margin,))
    if diff > z(n) * se:
        return Judgement(
            INCONCLUSIVE,
            words,
            f"grows, but ends below {th['aniso_factor']:g} x the isotropic level",
            "measured otherwise",
            n,
            (margin,),
        )
    return Judgement(INCONCLUSIVE, words, causes.sample_too_small([margin]), "sample too small", n, (margin,))


def dominant_sv(dominance: Sequence[float], ratio: Sequence[float], n: int, th: Thresholds) -> Judgement:
    """One dominant singular value and the smallest never near 0: mean sigma_1/sigma_2 >= dominance_min
    and mean sigma_min/sigma_max >= ratio_min at every layer (reproduced), else not reproduced."""
    dom, low = np.asarray(dominance, dtype=float), np.asarray(ratio, dtype=float)
    words = (
        f"smallest mean sigma_1/sigma_2 {np.nanmin(dom):.3g} (t={int(np.nanargmin(dom))}); "
        f"smallest mean sigma_min/sigma_max {np.nanmin(low):.3g} (t={int(np.nanargmin(low))}); n={n}"
    )
    if n < th.count("min_samples") or not (np.isfinite(dom).all() and np.isfinite(low).all()):
        return _few_or_nonfinite(words, n, th)
    weak = (
        [f"sigma_1/sigma_2 {np.min(dom):.3g} < {th['dominance_min']:g}"]
        if np.min(dom) < th["dominance_min"]
        else []
    )
    if np.min(low) < th["ratio_min"]:
        weak.append(f"sigma_min/sigma_max {np.min(low):.3g} < {th['ratio_min']:g}")
    if not weak:
        return Judgement(REPRODUCED, words, n=n)
    return Judgement(
        NOT_REPRODUCED, words, causes.measured_otherwise("; ".join(weak)), "measured otherwise", n
    )


def initial_cos(min_cos: Sequence[float], th: Thresholds, pairs: str = "") -> Judgement:
    """Initial cosines >= 0 (phi(0) >= 0): the share of samples whose smallest pairwise cosine of the
    initial embeddings is >= 0 is at least ``share_min`` (reproduced), else not reproduced.
    ``pairs``: the offending token pairs, named (stated in the evidence)."""
    v = np.asarray(min_cos, dtype=float)
    n = int(v.size)
    share = float((v >= 0).mean()) if n else math.nan
    words = f"phi(0) >= 0 in {share:.0%} of n={n} samples; smallest phi(0) {np.min(v) if n else math.nan:.3g}"
    if pairs:
        words += f"; most negative pairs: {pairs}"
    if n < th.count("min_samples"):
        return Judgement(
            INCONCLUSIVE, words, f"n = {n} samples, fewer than min_samples", "sample too small", n
        )
    if share >= th["share_min"]:
        return Judgement(REPRODUCED, words, n=n)
    return Judgement(
        NOT_REPRODUCED,
        words,
        causes.measured_otherwise(f"phi(0) < 0 in {1 - share:.0%} of samples"),
        "measured otherwise",
        n,
    )


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


def bound_holds(runs: Sequence[tuple[str, str, bool]]) -> Judgement:
    """A theorem's bound against measured runs: each (label, check, reached floor) with the check of
    ``dynamics.theory`` (``consistent``, ``rate_exceeded``, ``vacuous``). A run that reached the
    precision floor tests no rate and is not counted; any ``rate_exceeded`` -> not reproduced; some
    non-vacuous ``consistent`` run -> reproduced; none tested -> inconclusive (bound vacuous / floor)."""
    tested = [(lab, v) for lab, v, floor in runs if not floor and v != "vacuous"]
    vacuous = [lab for lab, v, floor in runs if v == "vacuous"]
    floored = [lab for lab, v, floor in runs if floor and v != "vacuous"]
    counts = (
        f"{len(runs)} runs: {len(tested)} test the rate (non-vacuous, above the floor), "
        f"{len(vacuous)} vacuous, {len(floored)} reached the floor (no rate to test)"
    )
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
        )
    if tested:
        return Judgement(REPRODUCED, f"{counts}; consistent in all {len(tested)}", n=len(runs))
    if vacuous:
        return Judgement(
            INCONCLUSIVE,
            counts,
            causes.bound_vacuous(f"{len(vacuous)} of {len(runs)} runs"),
            "bound vacuous",
            len(runs),
        )
    return Judgement(
        INCONCLUSIVE,
        counts,
        causes.not_testable("every run reached the precision floor"),
        "not testable",
        len(runs),
    )


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
