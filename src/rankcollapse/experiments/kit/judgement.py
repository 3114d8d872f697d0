"""What a rule returns: a :class:`Judgement` (a verdict, its evidence, the comparisons it turned on).

A :class:`Margin` is one comparison of a measured statistic with a threshold, ``value ± z(n) se``
against ``threshold`` over ``n`` samples (``kit.curves.z``: the Student t critical value). It is
*decided* when the whole interval lies on one side. When it is not, :meth:`Margin.needed_n` says how
many samples would decide it at the observed spread: ``se`` shrinks like ``1 / sqrt(n)``, so
``|value - threshold| > z(m) se sqrt(n / m)`` needs ``m > n (z(m) se / |value - threshold|)^2``
(documented in the glossary under "needed n").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from rankcollapse.experiments.engine.verdicts import Verdict
from rankcollapse.experiments.kit.curves import z

#: Beyond this many samples a comparison counts as one no sample decides (the value sits on its threshold).
MAX_NEEDED_N = 10**9


@dataclass(frozen=True)
class Margin:
    """``value ± z(n) se`` (over ``n`` samples) against ``threshold``; ``what`` names the statistic."""

    what: str
    value: float
    se: float
    threshold: float
    n: int

    @property
    def decided(self) -> bool:
        if not (math.isfinite(self.value) and math.isfinite(self.se)):
            return False
        return abs(self.value - self.threshold) > z(self.n) * self.se

    def needed_n(self) -> int | None:
        """Samples that would decide this comparison at the observed spread (None: never, e.g. the
        value sits on the threshold, the spread is unknown, or more than :data:`MAX_NEEDED_N` would be
        needed): the least ``m > n`` with ``|value - threshold| > z(m) se sqrt(n / m)`` (both factors
        fall with ``m``: a bisection)."""
        gap = abs(self.value - self.threshold)
        if not (math.isfinite(gap) and math.isfinite(self.se)) or gap == 0 or self.n < 1:
            return None

        def decides(m: int) -> bool:
            return gap > z(m) * self.se * math.sqrt(self.n / m)

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
    reproduced (``kit.causes``), the samples it rests on and the comparisons it turned on."""

    verdict: Verdict
    evidence: str
    cause: str = ""
    cause_kind: str = ""
    n: int | None = None
    margins: tuple[Margin, ...] = field(default_factory=tuple)

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
