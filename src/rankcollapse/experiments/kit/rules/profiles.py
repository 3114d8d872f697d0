"""Rules on the shape of an influence profile (Herasimchyk et al., arXiv 2602.16837: a finite-depth U).

The profile ``P(t)[i, :]`` of a rollout (``metrics.rollout``) is summarised per sample by its two arms
(``metrics.influence``): ``start_over_middle_log`` and ``end_over_middle_log``, the log of each end's mean
influence per position over the middle's, or by where it peaks (``profile_peak``). The rules, pinned by
synthetic data in ``tests/experiments/test_kit_profiles.py`` and broken on purpose by
``scripts/break_rules.py``:

- :func:`peaked` (Wu et al. 2025's decay mask: a non-monotone profile peaking at ``x* = t / (e^m - 1)``):
  per condition the rise of the peak over the token itself, its fall to position 1 and its place against
  ``x*`` (``metrics.influence.profile_peak``); both logs above ``hump_log_min`` and the place within
  ``+-peak_log_tol`` for sure -> reproduced; one log below or the place outside for sure -> not
  reproduced; otherwise inconclusive.
- :func:`scales_as` (Wu et al. 2025's RoPE decay term, ``D ∝ Δ² θ_1²``): per condition the slope of
  ``log D`` in ``log Δ`` and the log of its coefficient ``D / (Δ θ_1)^p`` over the reference ``θ_1``'s;
  the slope within ``p ± slope_tol`` and the ratio within ``±coef_log_tol`` for sure -> reproduced; either
  outside for sure -> not reproduced; otherwise inconclusive.
- :func:`u_shaped`: per condition ``label -> (start arm, end arm)`` (:class:`~rankcollapse.experiments.kit.
  data.Layered`, one layer read), both arms above ``u_log_min`` for sure -> reproduced (a U); one arm below
  it for sure -> not reproduced (the arm named: a profile falling from the first token has its end arm
  below); otherwise inconclusive; fewer than ``min_samples`` units -> inconclusive. Bonferroni over the
  conditions and the two arms of each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_exists, combine_parts
from rankcollapse.experiments.kit.curves import conditions, n_words
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The arms of a profile, in the order a condition gives them.
ARMS: tuple[str, str] = ("start", "end")


def _factor(v: float) -> str:
    return f"x{math.exp(v):.3g}" if math.isfinite(v) and abs(v) < 700 else f"log {v:.3g}"


def u_shaped(arms: Mapping[str, tuple[Layered, Layered]], th: Thresholds, layer: int = -1) -> Judgement:
    """A U-shaped profile at ``layer`` (default the last of each) in *every* condition: per condition
    ``label -> (start arm, end arm)``, each arm's mean log ratio over the middle above ``u_log_min`` for
    sure in both arms -> reproduced; below it for sure in one arm -> not reproduced; else inconclusive
    (module docstring)."""
    with conditions(2 * len(arms)):
        return combine_parts(_u_parts(arms, th, layer))


def u_somewhere(arms: Mapping[str, tuple[Layered, Layered]], th: Thresholds, layer: int = -1) -> Judgement:
    """A U-shaped profile at ``layer`` in *some* condition (a claim that a U exists, e.g. at some residual
    share lam): the parts of :func:`u_shaped` combined by ``kit.combine.combine_exists``: a U for sure in
    one condition -> reproduced (that condition decides); not a U for sure in every condition -> not
    reproduced; else inconclusive. Bonferroni over the conditions and their two arms, as for
    :func:`u_shaped`."""
    with conditions(2 * len(arms)):
        return combine_exists(_u_parts(arms, th, layer))


def _u_parts(arms: Mapping[str, tuple[Layered, Layered]], th: Thresholds, layer: int) -> list[
        tuple[str, Judgement]]:
    """One part per condition: a U, not a U (the arm below named), or open (module docstring)."""
    floor = th["u_log_min"]
    need = th.count("min_samples")
    parts: list[tuple[str, Judgement]] = []
    for label, pair in arms.items():
        margins = tuple(
            a.margin(layer, floor, f"{name} over middle (log, per position)")
            for name, a in zip(ARMS, pair, strict=True)
        )
        n = min(a.n for a in pair)
        unit = pair[0].unit
        words = ", ".join(
            f"{name} {_factor(m.value)} the middle" for name, m in zip(ARMS, margins, strict=True)
        ) + f" ({n_words(n, unit)})"
        if n < need:
            cause = causes.too_few(n, need, unit, label)
            parts.append((label, Judgement(INCONCLUSIVE, words, cause, "sample too small", n, unit=unit)))
            continue
        below = [name for name, m in zip(ARMS, margins, strict=True) if m.decided and m.value < floor]
        if below:
            what = f"{' and '.join(below)} arm below the middle"
            cause = causes.measured_otherwise(f"{label}: not a U, the {what} ({words})")
            text, kind = f"not a U: {words}", "measured otherwise"
            parts.append((label, Judgement(NOT_REPRODUCED, text, cause, kind, n, margins, unit=unit)))
        elif all(m.decided and m.value > floor for m in margins):
            parts.append((label, Judgement(REPRODUCED, f"a U: {words}", n=n, margins=margins, unit=unit)))
        else:
            open_ = [m for m in margins if not m.decided]
            cause, kind = causes.sample_too_small(open_), "sample too small"
            parts.append((label, Judgement(INCONCLUSIVE, words, cause, kind, n, margins, unit=unit)))
    return parts


#: The three estimates :func:`peaked` reads per condition, in this order.
PEAK_PARTS: tuple[str, str, str] = ("rise", "fall", "place")


def peaked(
    parts: Mapping[str, tuple[Layered, Layered, Layered]], th: Thresholds, layer: int = 0
) -> Judgement:
    """A non-monotone profile peaking at a predicted distance (Wu et al. 2025's decay mask): per condition
    ``label -> (rise, fall, place)`` at ``layer``, ``rise`` = ``peak_over_self_log``, ``fall`` =
    ``peak_over_far_log`` (``metrics.influence.profile_peak``) and ``place`` = ``log((x_hat + 1) / (x* + 1))``
    (the measured peak distance against the predicted one).

    Both ``rise`` and ``fall`` above ``hump_log_min`` for sure and ``place`` within ``+-peak_log_tol`` for
    sure -> reproduced; ``rise`` or ``fall`` below ``hump_log_min`` for sure (a monotone profile) or
    ``place`` outside ``+-peak_log_tol`` for sure (a peak elsewhere) -> not reproduced; otherwise
    inconclusive; fewer than ``min_samples`` units -> inconclusive. Bonferroni over the conditions and their
    four comparisons.
    """
    floor, tol = th["hump_log_min"], th["peak_log_tol"]
    need = th.count("min_samples")
    out: list[tuple[str, Judgement]] = []
    with conditions(4 * len(parts)):
        for label, (rise, fall, place) in parts.items():
            margins = (
                rise.margin(layer, floor, "peak over the token itself (log)"),
                fall.margin(layer, floor, "peak over position 1 (log)"),
                place.margin(layer, tol, "log (x_hat + 1)/(x* + 1), at most +tol"),
                place.margin(layer, -tol, "log (x_hat + 1)/(x* + 1), at least -tol"),
            )
            n = min(p.n for p in (rise, fall, place))
            unit = rise.unit
            words = (
                f"peak {_factor(margins[0].value)} the token itself, {_factor(margins[1].value)} position 1, "
                f"(x_hat + 1) at {_factor(margins[2].value)} (x* + 1) ({n_words(n, unit)})"
            )
            if need > n:
                cause = causes.too_few(n, need, unit, label)
                out.append((label, Judgement(INCONCLUSIVE, words, cause, "sample too small", n, unit=unit)))
                continue
            flat = [
                w for w, m in zip(("falls from the token", "rises to the start"), margins[:2], strict=True)
                if m.decided and m.value < floor
            ]
            off = (margins[2].decided and margins[2].value > tol) or (
                margins[3].decided and margins[3].value < -tol)
            if flat or off:
                what = f"monotone: {flat[0]}" if flat else "the peak is not at x*"
                cause = causes.measured_otherwise(f"{label}: {what} ({words})")
                out.append((label, Judgement(NOT_REPRODUCED, f"{what}: {words}", cause, "measured otherwise",
                                             n, margins, unit=unit)))
            elif all(m.decided for m in margins):
                out.append((label, Judgement(REPRODUCED, f"non-monotone, peak at x*: {words}", n=n,
                                             margins=margins, unit=unit)))
            else:
                open_ = [m for m in margins if not m.decided]
                cause, kind = causes.sample_too_small(open_), "sample too small"
                out.append((label, Judgement(INCONCLUSIVE, words, cause, kind, n, margins, unit=unit)))
    return combine_parts(out)


def scales_as(
    parts: Mapping[str, tuple[Layered, Layered | None]], exponent: float, th: Thresholds, layer: int = 0
) -> Judgement:
    """A power law in the distance whose coefficient scales with a frequency (Wu et al. 2025's RoPE decay
    term ``D(Δ) ∝ Δ² θ_1²``): per condition ``label -> (slope, ratio)`` at ``layer``, ``slope`` the
    least-squares slope of ``log D`` in ``log Δ`` and ``ratio`` the log of the coefficient
    ``D / (Δ θ_1)^exponent`` over the reference frequency's (None for the reference itself).

    ``slope`` within ``exponent ± slope_tol`` and ``ratio`` within ``±coef_log_tol`` for sure -> reproduced;
    either outside for sure -> not reproduced (the cause says which); otherwise inconclusive; fewer than
    ``min_samples`` units -> inconclusive. Bonferroni over the conditions and their comparisons (two per
    estimate).
    """
    slope_tol, coef_tol = th["slope_tol"], th["coef_log_tol"]
    need = th.count("min_samples")
    out: list[tuple[str, Judgement]] = []
    with conditions(sum(2 if r is None else 4 for _, r in parts.values())):
        for label, (slope, ratio) in parts.items():
            what = f"slope of log D in log distance, against {exponent:g}"
            margins = [slope.margin(layer, exponent + slope_tol, f"{what}, at most +tol"),
                       slope.margin(layer, exponent - slope_tol, f"{what}, at least -tol")]
            if ratio is not None:
                margins += [ratio.margin(layer, coef_tol, "log coefficient ratio, at most +tol"),
                            ratio.margin(layer, -coef_tol, "log coefficient ratio, at least -tol")]
            n = min(e.n for e in (slope, ratio) if e is not None)
            unit = slope.unit
            words = f"D ~ distance^{margins[0].value:.4g}" + (
                "" if ratio is None else f", coefficient {_factor(margins[2].value)} the reference's"
            ) + f" ({n_words(n, unit)})"
            if need > n:
                cause = causes.too_few(n, need, unit, label)
                out.append((label, Judgement(INCONCLUSIVE, words, cause, "sample too small", n, unit=unit)))
                continue
            off = [w for w, hi, lo in (("the slope", margins[0], margins[1]),
                                       *([("the coefficient", margins[2], margins[3])] if ratio is not None
                                         else []))
                   if (hi.decided and hi.value > hi.threshold)
                   or (lo.decided and lo.value < lo.threshold)]
            if off:
                what = f"{' and '.join(off)} off the law"
                cause = causes.measured_otherwise(f"{label}: {what} ({words})")
                out.append((label, Judgement(NOT_REPRODUCED, f"{what}: {words}", cause, "measured otherwise",
                                             n, tuple(margins), unit=unit)))
            elif all(margin.decided for margin in margins):
                out.append((label, Judgement(REPRODUCED, f"the law holds: {words}", n=n,
                                             margins=tuple(margins), unit=unit)))
            else:
                open_ = [m for m in margins if not m.decided]
                cause, kind = causes.sample_too_small(open_), "sample too small"
                out.append((label, Judgement(INCONCLUSIVE, words, cause, kind, n, tuple(margins), unit=unit)))
    return combine_parts(out)
