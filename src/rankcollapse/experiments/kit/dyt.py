"""Rules of the DyT story (Zhu et al., CVPR 2025, arXiv 2503.10622): the tanh-like map of trained norms, and
the NeurIPS paper's equilibria asked of DyT, as pure functions of estimates and exact checks.

- :func:`tanh_like`: "layer normalization in Transformers often produces tanh-like, S-shaped input-output
  mappings" [abstract]. Per norm of a model, from the per-excerpt DyT fits (``metrics.dyt_fit``): *tanh-like
  and S-shaped* when its tanh R² is at least ``r2_min`` and its S-shape share (what the tanh explains of a
  straight line's residual) at least ``s_min``, both for sure over the excerpts; *not* when either lies
  below for sure; open otherwise (Bonferroni over the norms and the two statistics). "Often" [ours]: at
  least ``often_min`` of the model's norms tanh-like and S-shaped -> reproduced; more than ``1 - often_min``
  of them not -> not reproduced; else inconclusive.
- :func:`basin_and_equilibria`: a set of starts of positive measure ends at rank >= ``k``. As plotted: the
  share of random starts whose end has rank >= k above 0 for sure (Wilson over the starts) -> reproduced;
  below ``basin_max`` for sure -> not reproduced. The mechanism: some *stable* equilibrium of rank >= k
  exists (its basin has positive measure) -> reproduced; none in a complete enumeration -> not reproduced;
  an enumeration cut short -> inconclusive (``equilibria.dyt``: the spectra are exact).
- :func:`ranks_present`: equilibria of every rank ``1..N`` exist (a complete enumeration).
- :func:`fixed_points_kept`: the paper's equilibria, best rescaled, are fixed points of the DyT map (their
  residual at most ``residual_max``).

Statements about "some alpha" (DyT's scale is free) combine their per-alpha parts with
``kit.combine.combine_exists``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_exists, sample_part
from rankcollapse.experiments.kit.curves import RUN, SAMPLE, conditions, n_words
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


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


@dataclass(frozen=True)
class Basin:
    """Where random starts ended: ``hits`` of ``starts`` at rank >= the statement's; ``stable`` the stable
    equilibria of that rank or more (None: not enumerated), ``complete`` whether the enumeration was."""

    hits: int
    starts: int
    stable: int | None
    complete: bool


def _basin_part(label: str, b: Basin, th: Thresholds) -> Judgement:
    limit = th["basin_max"]
    share = b.hits / b.starts if b.starts else float("nan")
    m = Margin(f"{label}: share of starts ending at the rank", share, 0.0, 0.0, b.starts, SAMPLE, share=True)
    lo, hi = m.bounds()
    words = f"{b.hits} of {b.starts} starts ({share:.1%}, Wilson [{lo:.2%}, {hi:.2%}])"
    if b.starts == 0:
        return Judgement(INCONCLUSIVE, "no start", causes.not_testable("no start"), "not testable")
    if lo > 0:
        return Judgement(REPRODUCED, words, n=b.starts, margins=(m,))
    upper = Margin(f"{label}: share of starts ending at the rank, below basin_max", share, 0.0, limit,
                   b.starts, SAMPLE, share=True)
    if hi < limit:
        cause = causes.measured_otherwise(f"{label}: {words}, below {limit:.1%} for sure")
        return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", b.starts, (upper,))
    return sample_part(INCONCLUSIVE, words, [upper], b.starts)


def _stable_part(label: str, b: Basin) -> Judgement:
    if b.stable is None:
        why = f"{label}: no enumeration of the equilibria"
        return Judgement(INCONCLUSIVE, why, causes.not_testable(why), "not testable", unit=RUN)
    words = f"{b.stable} stable equilibria of that rank or more ({'complete' if b.complete else 'cut'} walk)"
    if b.stable > 0:
        return Judgement(REPRODUCED, words, unit=RUN)
    if not b.complete:
        why = f"{label}: the enumeration was cut before it ended"
        return Judgement(INCONCLUSIVE, words, causes.not_testable(why), "not testable", unit=RUN)
    cause = causes.measured_otherwise(f"{label}: every equilibrium of that rank is unstable (exact spectra)")
    return Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", unit=RUN)


def basin_and_equilibria(per_alpha: Mapping[str, Basin], th: Thresholds) -> tuple[Judgement, Judgement]:
    """``(as plotted, mechanism)`` of "a set of starts of positive measure ends at rank >= k, for some alpha"
    (module docstring): the basin share per alpha, and the stable equilibria per alpha, each combined over
    the alphas by ``combine_exists``."""
    with conditions(max(len(per_alpha), 1)):
        plotted = combine_exists([(label, _basin_part(label, b, th)) for label, b in per_alpha.items()],
                                 empty="no alpha measured")
    mechanism = combine_exists([(label, _stable_part(label, b)) for label, b in per_alpha.items()],
                               empty="no alpha enumerated")
    return plotted, mechanism


@dataclass(frozen=True)
class Ranks:
    """The ranks of the equilibria of one alpha: ``present`` (all), ``stable`` (of the stable ones), ``n``
    tokens, ``complete`` whether the enumeration was, ``count`` the equilibria."""

    present: Sequence[int]
    stable: Sequence[int]
    n: int
    complete: bool
    count: int


def ranks_present(per_alpha: Mapping[str, Ranks]) -> Judgement:
    """Equilibria of every rank ``1..N`` exist for some alpha: per alpha, every rank present -> that alpha
    shows it; a rank missing from a complete enumeration -> it does not; a cut enumeration missing one -> not
    testable; combined over the alphas by ``combine_exists``."""
    parts = []
    for label, r in per_alpha.items():
        missing = [k for k in range(1, r.n + 1) if k not in r.present]
        words = (f"{r.count} equilibria, ranks {list(r.present)} (stable: {list(r.stable)}), "
                 f"{'complete' if r.complete else 'cut'} walk")
        if not missing:
            parts.append((label, Judgement(REPRODUCED, words, unit=RUN)))
        elif r.complete:
            cause = causes.measured_otherwise(f"{label}: no equilibrium of rank {missing} ({words})")
            parts.append((label, Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", unit=RUN)))
        else:
            why = f"{label}: the enumeration was cut before rank {missing} appeared"
            part = Judgement(INCONCLUSIVE, words, causes.not_testable(why), "not testable", unit=RUN)
            parts.append((label, part))
    return combine_exists(parts, empty="no alpha enumerated")


def fixed_points_kept(residuals: Mapping[str, float], th: Thresholds) -> Judgement:
    """The paper's equilibria (best rescaled) are fixed points of the DyT map, for some alpha: a residual
    at most ``residual_max`` -> that alpha keeps them; above -> it does not (``combine_exists``; a refusal
    names the alpha nearest to keeping them)."""
    limit = th["residual_max"]
    parts = []
    for label, res in sorted(residuals.items(), key=lambda kv: kv[1]):  # the nearest first: it is named
        words = f"max |F(cX*) - cX*| / c = {res:.3g} at the best c (needs <= {limit:g})"
        if res <= limit:
            parts.append((label, Judgement(REPRODUCED, words, unit=RUN)))
        else:
            cause = causes.measured_otherwise(f"{label}: {words}")
            parts.append((label, Judgement(NOT_REPRODUCED, words, cause, "measured otherwise", unit=RUN)))
    return combine_exists(parts, empty="no alpha measured")

