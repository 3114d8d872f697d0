"""One rule for an estimate that a statement bounds: inside ``[low, high]`` for sure, in every condition.

Chowdhury's statements (arXiv 2603.10123, story ``u_init``) each bound one estimate per condition, over
networks (``kit.data.Layered``, one layer read): a Spearman correlation at least ``rho_min``; a log
error at most a tolerance; a log ratio within ``±tol``; a log ratio above a margin. :func:`inside` judges
them all, pinned by synthetic data in ``tests/experiments/test_kit_bounds.py`` and broken on purpose by
``scripts/break_rules.py``:

- per condition, each given bound is one comparison (``Layered.margin``: ``value ± t se`` over the
  networks); every comparison decided on the right side -> the condition holds; one decided on the
  wrong side -> it fails (the bound named); otherwise open; fewer than ``min_samples`` units -> open;
- every condition holds -> reproduced (decided by the weakest); one fails -> not reproduced (the first
  failing condition); otherwise inconclusive (the first open one, with the units that would decide it).
  Bonferroni over the conditions and their bounds (``kit.curves.conditions``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts
from rankcollapse.experiments.kit.curves import conditions, n_words
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.thresholds import Thresholds


def inside(
    parts: Mapping[str, tuple[Layered, int]],
    th: Thresholds,
    what: str,
    low: float | None = None,
    high: float | None = None,
) -> Judgement:
    """Every condition's estimate inside ``[low, high]`` for sure (module docstring). ``parts``: label ->
    (the estimate over networks or samples, the index it is read at); ``what`` names the estimate in the
    evidence; ``low`` / ``high``: a bound, or None for none (at least one given)."""
    if low is None and high is None:
        raise ValueError("inside() needs a low or a high bound")
    bounds = [(b, side) for b, side in ((low, "at least"), (high, "at most")) if b is not None]
    need = th.count("min_samples")
    out: list[tuple[str, Judgement]] = []
    with conditions(len(bounds) * max(len(parts), 1)):
        for label, (est, t) in parts.items():
            margins = tuple(est.margin(t, float(b), f"{what}, {side} {b:g}") for b, side in bounds)
            value = margins[0].value
            words = f"{what} {value:.4g} ({n_words(est.n, est.unit)}; allowed " + " and ".join(
                f"{side} {b:g}" for b, side in bounds) + ")"
            if est.n < need or not math.isfinite(value):
                cause = causes.too_few(est.n, need, est.unit, label) if est.n < need else causes.not_testable(
                    f"{label}: no finite estimate")
                kind = "sample too small" if est.n < need else "not testable"
                out.append((label, Judgement(INCONCLUSIVE, words, cause, kind, est.n, unit=est.unit)))
                continue
            wrong = [m for (b, side), m in zip(bounds, margins, strict=True)
                     if m.decided and (m.value < b if side == "at least" else m.value > b)]
            if wrong:
                cause = causes.measured_otherwise(f"{label}: {words}")
                out.append((label, Judgement(NOT_REPRODUCED, f"outside: {words}", cause, "measured otherwise",
                                             est.n, margins, unit=est.unit)))
            elif all(m.decided for m in margins):
                out.append((label, Judgement(REPRODUCED, f"inside: {words}", n=est.n, margins=margins,
                                             unit=est.unit)))
            else:
                open_ = [m for m in margins if not m.decided]
                out.append((label, Judgement(INCONCLUSIVE, words, causes.sample_too_small(open_),
                                             "sample too small", est.n, margins, unit=est.unit)))
    return combine_parts(out)
