"""What a rule returns: a :class:`Judgement` (a verdict, its evidence, the comparisons it turned on), of a
whole statement or of one of its conditions (a *part*, merged by ``kit.combine.combine_parts``).

A :class:`Margin` is one comparison of a measured statistic with a threshold, ``value ± z(n) se``
against ``threshold`` over ``n`` samples (``kit.curves.z``: the Student t critical value). It is
*decided* when the whole interval lies on one side. When it is not, :meth:`Margin.needed_n` says how
many samples would decide it at the observed spread: ``se`` shrinks like ``1 / sqrt(n)``, so
``|value - threshold| > z(m) se sqrt(n / m)`` needs ``m > n (z(m) se / |value - threshold|)^2``
(documented in the glossary under "would decide it").

A share (a proportion of samples, ``share=True``) gets the Wilson score interval at the same level
instead of ``value ± z se``: it stays inside [0, 1] and is not degenerate at 0 % or 100 %. ``n`` counts
the unit of sampling (``unit``: samples, or networks where a random init is the claim's object), and
``tests`` the conditions of the row (Bonferroni, ``kit.curves.conditions``), both fixed when built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from rankcollapse.experiments.contract.verdicts import Verdict
from rankcollapse.experiments.kit.curves import SAMPLE, current_tests, n_words, z

#: Beyond this many samples a comparison counts as one no sample decides (the value sits on its threshold).
MAX_NEEDED_N = 10**9


def wilson(p: float, n: int, crit: float) -> tuple[float, float]:
    """The Wilson score interval of a share ``p`` over ``n`` units at critical value ``crit``."""
    if n < 1 or not math.isfinite(crit):
        return 0.0, 1.0
    c2 = crit * crit / n
    centre = (p + c2 / 2) / (1 + c2)
    half = crit * math.sqrt(p * (1 - p) / n + c2 / (4 * n)) / (1 + c2)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Margin:
    """``value ± z(n) se`` (over ``n`` units) against ``threshold``; ``what`` names the statistic and the
    condition it belongs to. ``share``: a proportion, with the Wilson interval (module docstring)."""

    what: str
    value: float
    se: float
    threshold: float
    n: int
    unit: str = SAMPLE
    tests: int = field(default_factory=current_tests)
    share: bool = False
    samples: int | None = None

    def bounds(self, n: int | None = None) -> tuple[float, float]:
        """The interval (at ``n`` units, default its own), as the rows print it: ``value ± z(n) se`` for a
        mean; Wilson's for a share over samples; for a share whose unit is the network, the union of
        the t interval over the networks and Wilson's over all their ``samples`` (clustering can only
        widen what independent samples would give, so a share of 100 % over 3 networks is not certain)."""
        m = self.n if n is None else n
        lo, hi = math.inf, -math.inf
        if not self.share or self.unit != SAMPLE:
            crit = z(m, self.tests)
            se = self.se * math.sqrt(self.n / m) if m != self.n and self.n > 0 else self.se
            half = crit * se if math.isfinite(crit) and math.isfinite(se) else math.inf
            lo, hi = self.value - half, self.value + half
        if self.share:
            k = m if self.unit == SAMPLE or not self.samples else round(self.samples * m / max(self.n, 1))
            wl, wh = wilson(self.value, k, z(None, self.tests))
            lo, hi = min(lo, wl), max(hi, wh)
        return lo, hi

    @property
    def decided(self) -> bool:
        if not (math.isfinite(self.value) and (self.share or math.isfinite(self.se))):
            return False
        lo, hi = self.bounds()
        return self.threshold < lo or self.threshold > hi

    @property
    def excess(self) -> float:
        """How far the value lies above its threshold, relative to it: ``(value - threshold) / |threshold|``
        (``value - threshold`` for a threshold of 0); negative below it. Of the comparisons a statement makes
        "at every layer", the weakest is the one with the smallest excess (``kit.rules.layers``)."""
        scale = abs(self.threshold) if self.threshold != 0 else 1.0
        return (self.value - self.threshold) / scale

    @property
    def gap(self) -> float:
        """How far the value sits from the threshold, in half-intervals (0 = on it; > 1 = decided)."""
        lo, hi = self.bounds()
        half = (hi - lo) / 2
        if not (math.isfinite(half) and half > 0):
            return math.inf if math.isfinite(self.value) and half == 0 else 0.0
        return abs(self.value - self.threshold) / half

    def text(self) -> str:
        """``causal, float32: last-half log rate -0.46 ± 0.094 against -0.02 (2 networks)``;
        a share as ``98% [95%, 100%] against 95% (256 samples)``."""
        if self.share:
            lo, hi = self.bounds()
            return (
                f"{self.what}: {self.value:.1%} [{lo:.1%}, {hi:.1%}] against {self.threshold:.0%} "
                f"({n_words(self.n, self.unit)})"
            )
        lo, hi = self.bounds()
        half = (hi - lo) / 2
        return (
            f"{self.what}: {self.value:+.3g} ± {half:.2g} against {self.threshold:g} "
            f"({n_words(self.n, self.unit)})"
        )

    def needed_n(self) -> int | None:
        """Samples that would decide this comparison at the observed spread (None: never, e.g. the
        value sits on the threshold, the spread is unknown, or more than :data:`MAX_NEEDED_N` would be
        needed): the least ``m > n`` with ``|value - threshold| > z(m) se sqrt(n / m)`` (both factors
        fall with ``m``: a bisection)."""
        gap = abs(self.value - self.threshold)
        if not math.isfinite(gap) or gap == 0 or self.n < 1:
            return None
        if not self.share and (not math.isfinite(self.se) or self.se == 0):
            return None

        def decides(m: int) -> bool:
            lo, hi = self.bounds(m)
            return self.threshold < lo or self.threshold > hi

        lo, hi = self.n, self.n + 1
        while not decides(hi):
            if hi > MAX_NEEDED_N:
                return None
            lo, hi = hi, 2 * hi
        while hi - lo > 1:  # decides(hi), not decides(lo) (or lo = n)
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if decides(mid) else (mid, hi)
        return hi


@dataclass(frozen=True)
class Judgement:
    """A partial verdict, the evidence in words, a cause sentence where it is not plainly
    reproduced (``kit.causes``), the samples it rests on and the comparisons it turned on: a rule's
    answer for a statement, or for one condition of it (a part of ``kit.combine.combine_parts``).

    ``decided_by``: the condition that decided the verdict, in words (``causal, float32: falling ...``;
    for a reproduced row the weakest of its conditions); ``key``: that condition's comparison, the one a
    row prints as its interval (None where a status without an interval decided: a floor, a count).
    ``unit``: what ``n`` counts (samples, or networks); ``scope``: where the verdict was actually tested,
    when narrower than the statement (``tested at r = 1 only``)."""

    verdict: Verdict
    evidence: str
    cause: str = ""
    cause_kind: str = ""
    n: int | None = None
    margins: tuple[Margin, ...] = field(default_factory=tuple)
    decided_by: str = ""
    key: Margin | None = None
    unit: str = SAMPLE
    scope: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict.of(self.verdict))
        if bool(self.cause) != bool(self.cause_kind):
            raise ValueError("a cause needs its kind and a kind its sentence")

    def amended(self, before: str = "", after: str = "") -> Judgement:
        """The same judgement with words added before and after its evidence."""
        return replace(self, evidence=f"{before}{self.evidence}{after}")

    @property
    def undecided(self) -> list[Margin]:
        return [m for m in self.margins if not m.decided]
