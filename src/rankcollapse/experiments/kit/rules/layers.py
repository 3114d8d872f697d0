"""Rules on per-layer estimates against a threshold (Figs. 4, 8, 9): a mean or a share, at every layer.

An estimate is a :class:`~rankcollapse.experiments.kit.data.Layered` (per layer the mean over the unit of
sampling and its standard error; a share is a mean of 0/1). A statement that must hold "at every layer"
is one part per layer, Bonferroni over the layers; each part compares the layer's interval (t for a mean,
Wilson for a share: :class:`~rankcollapse.experiments.kit.judgement.Margin`) with its threshold: above it
for sure (reproduced), below for sure (not reproduced), else open. Too few samples (or fewer than two
networks, no spread between them) is inconclusive before any comparison. Such a statement is decided by
its weakest layer (:func:`_weakest`): the layer whose comparison has the smallest margin above its
threshold (``Margin.excess``) names the row's deciding condition and prints its interval.

- :func:`tanh_like` (DyT, Zhu et al., CVPR 2025, arXiv 2503.10622): "layer normalization in Transformers often
  produces tanh-like, S-shaped input-output mappings" [abstract]. Per norm of a model (a layer's own), from
  the per-excerpt DyT fits (``metrics.dyt_fit``): *tanh-like and S-shaped* when its tanh R² is at least
  ``r2_min`` and its S-shape share (what the tanh explains of a straight line's residual) at least ``s_min``,
  both for sure over the excerpts; *not* when either lies below for sure; open otherwise (Bonferroni over
  the norms and the two statistics). "Often" [ours]: at least ``often_min`` of the model's norms tanh-like
  and S-shaped -> reproduced; more than ``1 - often_min`` of them not -> not reproduced; else inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rankcollapse.experiments.contract.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    combine_verdicts,
)
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts, sample_part
from rankcollapse.experiments.kit.curves import SAMPLE, conditions, n_words
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


def _few_or_nonfinite(words: str, n: int, th: Thresholds) -> Judgement:
    """Inconclusive: fewer than ``min_samples`` samples (sample too small), else non-finite values."""
    need = th.count("min_samples")
    if n < need:
        return Judgement(INCONCLUSIVE, words, causes.too_few(n, need), "sample too small", n)
    nonfinite = causes.non_finite(f"{n} samples", "non-finite values")
    return Judgement(INCONCLUSIVE, words, nonfinite, "non-finite", n)


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
    part: Callable[[int], Judgement],
    words: str,
) -> Judgement:
    """A statement that must hold "at every layer": one part per layer in ``layers``, Bonferroni over
    them; too few samples (or networks): inconclusive. ``words`` lead the evidence."""
    few_ = _too_few(est.n, est.unit, th, words)
    if few_ is not None:
        return few_
    with conditions(len(layers)):
        parts = [(f"t={t}", part(t)) for t in layers]
    return _weakest(combine_parts(parts), parts).amended(before=f"{words} || ")


def _weakest(j: Judgement, parts: Sequence[tuple[str, Judgement]]) -> Judgement:
    """``j`` (of ``combine_parts`` over one part per layer) decided by its weakest layer: among the layers
    whose verdict is the statement's, the comparison with the smallest margin above its threshold
    (``Margin.excess``; decided ones for a decided verdict, open ones for an open verdict) gives
    ``decided_by``, ``key`` (the row's interval) and, where the verdict is not reproduced, the cause. Fig. 4:
    sigma_min is decided at t = 12 (25.7 x the rank tolerance), not at t = 0 (635 x), whose interval is
    merely the closest to its threshold in standard errors."""
    open_verdict = j.verdict is INCONCLUSIVE
    found = [
        (m.excess, label, p, m)
        for label, p in parts
        if p.verdict is j.verdict
        for m in p.margins
        if m.decided is not open_verdict and math.isfinite(m.excess)
    ]
    if not found:
        return j
    _, label, part, m = min(found, key=lambda f: f[0])
    key = m if m.what.startswith(f"{label}:") else replace(m, what=f"{label}: {m.what}")
    margins = (key, *(x for x in j.margins if x.what != key.what))  # an open row prints its first open one
    out = replace(j, decided_by=f"{label}: {part.evidence}", key=key, margins=margins)
    if j.verdict is REPRODUCED:
        return out
    kind, sentence = part.cause_kind, part.cause
    if not kind:
        kind = "measured otherwise" if j.verdict is NOT_REPRODUCED else "sample too small"
        sentence = (
            causes.measured_otherwise(f"{label}: {part.evidence}")
            if j.verdict is NOT_REPRODUCED
            else f"{label}: {part.evidence}: the evidence does not decide"
        )
    return replace(out, cause=sentence, cause_kind=kind)


def _at_least(m: Margin, words: str) -> Judgement:
    """A part: ``m``'s value at least its threshold for sure (reproduced), below for sure (not)."""
    lo, hi = m.bounds()
    v = REPRODUCED if lo > m.threshold else NOT_REPRODUCED if hi < m.threshold else INCONCLUSIVE
    return sample_part(v, words, [m], m.n, m.unit)


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

    def part(t: int) -> Judgement:
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

    def part(t: int) -> Judgement:
        a = dominance.margin(t, th["dominance_min"], "sigma_1/sigma_2")
        b = ratio.margin(t, th["ratio_min"], "sigma_min/sigma_max")
        pa, pb = (
            _at_least(a, f"sigma_1/sigma_2 {dom[t]:.3g}"),
            _at_least(b, f"sigma_min/sigma_max {low[t]:.3g}"),
        )
        v = combine_verdicts([pa.verdict, pb.verdict])
        first_bad = next((p for p in (pa, pb) if p.verdict is v), pa)
        evidence = f"{pa.evidence}; {pb.evidence}"
        return replace(first_bad, verdict=v, evidence=evidence, margins=pa.margins + pb.margins)

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
    return combine_parts([("X(0)", sample_part(v, words, [m], neg.n, neg.unit))])


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


def largest(estimates: Mapping[str, Layered], first: str, th: Thresholds, what: str) -> Judgement:
    """``first``'s estimate (entry 0 of each :class:`Layered`, e.g. a window mean per network,
    ``kit.data.window_layered``) above every other's for sure -> reproduced; below any for sure -> not
    reproduced; otherwise inconclusive. Each comparison is a part (difference ``a - b`` with
    ``se = sqrt(se_a^2 + se_b^2)`` over the smaller count of units), Bonferroni over the others; fewer than
    ``min_samples`` samples (or 2 networks) on either side, inconclusive. ``what`` names the estimate."""
    if first not in estimates or len(estimates) < 2:
        why = f"{what}: {first} and at least one other needed, got {', '.join(estimates) or 'none'}"
        return Judgement(INCONCLUSIVE, why, causes.not_testable(why), "not testable")
    a = estimates[first]
    others = [(k, e) for k, e in estimates.items() if k != first]
    parts: list[tuple[str, Judgement]] = []
    with conditions(len(others)):
        for label, b in others:
            name = f"{first} vs {label}"
            n = min(a.n, b.n)
            few_ = _too_few(n, a.unit, th, f"{name}: {n_words(n, a.unit)}")
            if few_ is not None:
                parts.append((name, few_))
                continue
            diff = float(a.mean[0]) - float(b.mean[0])
            se = math.sqrt(float(a.se[0]) ** 2 + float(b.se[0]) ** 2)
            m = Margin(f"{what}: {name}", diff, se, 0.0, n, a.unit)
            lo, hi = m.bounds()
            words = (f"{what} {float(a.mean[0]):.3g} vs {float(b.mean[0]):.3g} (difference {diff:+.2g}, "
                     f"interval [{lo:.2g}, {hi:.2g}], {n_words(n, a.unit)})")
            parts.append((name, _at_least(m, words)))
    return combine_parts(parts)


@dataclass(frozen=True)
class NormFit:
    """One norm's per-excerpt fit estimates: ``r2`` (the tanh's R²) and ``shape`` (the S-shape share)."""

    r2: Layered
    shape: Layered


def _norm_part(label: str, fit: NormFit, th: Thresholds) -> Judgement:
    """One norm: tanh-like and S-shaped (reproduced), not (either statistic below for sure), or open."""
    n = min(fit.r2.n, fit.shape.n)
    need = th.count("min_samples")
    words = (f"R² {float(fit.r2.mean[0]):.3f}, S-shape share {float(fit.shape.mean[0]):.3f} "
             f"({n_words(n, fit.r2.unit)})")
    if n < need:
        cause = causes.too_few(n, need, fit.r2.unit, label)
        return Judgement(INCONCLUSIVE, words, cause, "sample too small", n, unit=fit.r2.unit)
    a = fit.r2.margin(0, th["r2_min"], "tanh R²")
    b = fit.shape.margin(0, th["s_min"], "S-shape share")
    below = [m for m in (a, b) if m.decided and m.value < m.threshold]
    if below:
        return Judgement(NOT_REPRODUCED, words, n=n, margins=(a, b), unit=fit.r2.unit)
    v = REPRODUCED if a.decided and b.decided else INCONCLUSIVE
    return sample_part(v, words, [a, b], n, fit.r2.unit)


def tanh_like(norms: Mapping[str, NormFit], th: Thresholds) -> Judgement:
    """"Often tanh-like, S-shaped" over a model's norms (module docstring). ``norms``: label -> fit."""
    if not norms:
        why = "no norm measured"
        return Judgement(INCONCLUSIVE, why, causes.not_testable(why), "not testable")
    with conditions(2 * len(norms)):
        parts = [(label, _norm_part(label, fit, th)) for label, fit in norms.items()]
    often = th["often_min"]
    yes = [label for label, p in parts if p.verdict is REPRODUCED]
    no = [label for label, p in parts if p.verdict is NOT_REPRODUCED]
    open_ = [(label, p) for label, p in parts if p.verdict is INCONCLUSIVE]
    total = len(parts)
    n = min((p.n for _, p in parts if p.n is not None), default=None)
    unit = next(iter(norms.values())).r2.unit
    counts = (f"{len(yes)} of {total} norms tanh-like and S-shaped, {len(no)} not, {len(open_)} open "
              f"(often: at least {often:.0%})")
    shown = " | ".join(f"{label}: {p.evidence}" for label, p in parts)
    margins = tuple(m for _, p in parts for m in p.margins)
    if len(yes) >= often * total:
        return Judgement(REPRODUCED, f"{counts} || {shown}", n=n, margins=margins, unit=unit,
                         decided_by=f"{counts}: {', '.join(yes[:6])}")
    if len(no) > (1 - often) * total:
        cause = causes.measured_otherwise(f"{counts}; linear or not tanh-like: {', '.join(no[:8])}")
        return Judgement(NOT_REPRODUCED, f"{counts} || {shown}", cause, "measured otherwise", n, margins,
                         decided_by=counts, unit=unit)
    open_margins = [m for _, p in open_ for m in p.margins if not m.decided]
    if open_margins:
        cause, kind = causes.sample_too_small(open_margins), "sample too small"
    else:  # open without an open comparison: too few excerpts, or a statistic that is not finite
        first = open_[0][1] if open_ else None
        cause = first.cause if first is not None and first.cause else f"{counts}: nothing decides"
        kind = first.cause_kind if first is not None and first.cause_kind else "sample too small"
    return Judgement(INCONCLUSIVE, f"{counts} || {shown}", cause, kind, n, margins,
                     decided_by=counts, key=open_margins[0] if open_margins else None, unit=unit)
