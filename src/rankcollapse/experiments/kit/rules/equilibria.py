"""Rules on the equilibria of a map (DyT, Zhu et al., CVPR 2025, arXiv 2503.10622, asked the NeurIPS
paper's questions): where random starts end, which ranks its equilibria have, whether given points stay
fixed, as pure functions of exact checks and shares of starts.

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
from rankcollapse.experiments.kit.curves import RUN, SAMPLE, conditions
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


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

