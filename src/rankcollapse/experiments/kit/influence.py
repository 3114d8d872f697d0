"""Rules on the shape of an influence profile (Herasimchyk et al., arXiv 2602.16837: a finite-depth U).

The profile ``P(t)[i, :]`` of a rollout (``metrics.rollout``) is summarised per sample by its two arms
(``metrics.influence``): ``start_over_middle_log`` and ``end_over_middle_log``, the log of each end's mean
influence per position over the middle's. The rule, pinned by synthetic data in
``tests/experiments/test_kit_influence.py`` and broken on purpose by ``scripts/break_rules.py``:

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
from rankcollapse.experiments.kit.combine import combine_parts
from rankcollapse.experiments.kit.curves import conditions, n_words
from rankcollapse.experiments.kit.data import Layered
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The arms of a profile, in the order a condition gives them.
ARMS: tuple[str, str] = ("start", "end")


def _factor(v: float) -> str:
    return f"x{math.exp(v):.3g}" if math.isfinite(v) and abs(v) < 700 else f"log {v:.3g}"


def u_shaped(arms: Mapping[str, tuple[Layered, Layered]], th: Thresholds, layer: int = -1) -> Judgement:
    """A U-shaped profile at ``layer`` (default the last of each): per condition ``label -> (start arm,
    end arm)``, each arm's mean log ratio over the middle above ``u_log_min`` for sure in both arms ->
    reproduced; below it for sure in one arm -> not reproduced; else inconclusive (module docstring)."""
    floor = th["u_log_min"]
    need = th.count("min_samples")
    parts: list[tuple[str, Judgement]] = []
    with conditions(2 * len(arms)):
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
    return combine_parts(parts)
