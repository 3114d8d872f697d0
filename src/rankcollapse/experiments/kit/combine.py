"""The verdict algebra: one judgement per condition (a *part*), and the one way parts make a row's judgement.

A rule judges each condition of a statement (a mask, a dtype, a layer, a run) on its own: a part is a
:class:`~rankcollapse.experiments.kit.judgement.Judgement` of that condition alone (its verdict, words,
comparisons, cause, ``n`` and unit). :func:`combine_parts` merges labelled parts into the statement's
judgement; the verdicts only through
:func:`~rankcollapse.experiments.contract.verdicts.combine_verdicts`. The part constructors here give the
kit's shared causes one shape: an open comparison (:func:`sample_part`), too few samples
(:func:`few_part`), a curve at the precision floor (:func:`floor_part`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from rankcollapse.experiments.contract.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Verdict,
    combine_verdicts,
)
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.curves import NETWORK, SAMPLE, Curve, conditions
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.statuses import Status
from rankcollapse.experiments.kit.thresholds import Thresholds

#: A rule bound to its data: thresholds -> judgement (``kit.claims.judged`` re-runs it per threshold).
RuleFn = Callable[[Thresholds], Judgement]


def sample_part(
    verdict: Verdict, words: str, margins: Sequence[Margin], n: int | None, unit: str = SAMPLE
) -> Judgement:
    """A part on its comparisons; an inconclusive one whose comparisons did not decide carries the
    'sample too small' cause."""
    open_ = [m for m in margins if not m.decided]
    if verdict is INCONCLUSIVE and open_:
        return Judgement(
            verdict, words, causes.sample_too_small(open_), "sample too small", n, tuple(margins), unit=unit
        )
    return Judgement(verdict, words, n=n, margins=tuple(margins), unit=unit)


def few_part(label: str, c_n: int, th: Thresholds, words: str, unit: str = SAMPLE) -> Judgement:
    """Inconclusive: ``c_n`` units (samples, or networks), fewer than ``min_samples`` (sample too small)."""
    need = th.count("min_samples")
    cause = causes.too_few(c_n, need, unit, label)
    return Judgement(INCONCLUSIVE, words, cause, "sample too small", c_n, unit=unit)


def floor_part(verdict: Verdict, label: str, c: Curve, st: Status, words: str) -> Judgement:
    """A part decided by ``c`` sitting at its dtype's precision floor (from ``st.floor_t``)."""
    cause = causes.precision_floor(label, c.dtype, st.floor_t)
    return Judgement(verdict, words, cause, "precision floor", c.units, unit=c.unit)


def _labelled(label: str, m: Margin) -> Margin:
    """``m`` with its condition named in front of its statistic (once)."""
    return m if not label or m.what.startswith(f"{label}:") else replace(m, what=f"{label}: {m.what}")


def combine_parts(parts: Sequence[tuple[str, Judgement]], empty: str = "no data") -> Judgement:
    """One judgement from labelled parts: verdicts by ``combine_verdicts``; the cause of the first part
    that decided the verdict (``not reproduced``: the first such part; ``inconclusive``: the first
    undecided one); the evidence lists every part (``label: evidence | ...``); ``n`` the smallest part's.

    The deciding condition (``Judgement.decided_by``, ``Judgement.key``): for ``not reproduced`` the first
    failing part and its decided comparison; for ``inconclusive`` the first open part and its open
    comparison; for ``reproduced`` the part whose decided comparison sits closest to its threshold (the
    weakest link). Every comparison is named by its condition's label. A part's own ``decided_by``,
    ``key`` and ``scope`` are not read."""
    if not parts:
        return Judgement(INCONCLUSIVE, empty, causes.no_data(empty), "no data")
    parts = [(label, replace(p, margins=tuple(_labelled(label, m) for m in p.margins))) for label, p in parts]
    verdict = combine_verdicts(p.verdict for _, p in parts)
    evidence = " | ".join(f"{label}: {p.evidence}" for label, p in parts)
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
        by = f"{label}: {part.evidence}"
        return Judgement(verdict, evidence, n=n, margins=margins, decided_by=by, key=key, unit=unit)
    label, part = deciding[0]
    wanted = [m for m in part.margins if m.decided is (verdict is NOT_REPRODUCED)]
    key = wanted[0] if wanted else None
    kind, sentence = part.cause_kind, part.cause
    if not kind:
        kind = "measured otherwise" if verdict is NOT_REPRODUCED else "sample too small"
        sentence = (
            causes.measured_otherwise(f"{label}: {part.evidence}")
            if verdict is NOT_REPRODUCED
            else f"{label}: {part.evidence}: the evidence does not decide"
        )
    return Judgement(verdict, evidence, sentence, kind, n, margins, f"{label}: {part.evidence}", key, unit)


def combine_exists(parts: Sequence[tuple[str, Judgement]], empty: str = "no data") -> Judgement:
    """One judgement of an *existence* statement ("at finite depth the profile is U-shaped": some condition
    shows it) from labelled parts, each a judgement of "this condition shows it": reproduced when a part is
    reproduced (decided by the clearest such part: its decided comparisons farthest from their
    thresholds); not reproduced only when every part is not reproduced (decided by the part nearest to
    showing it: its decided comparison closest to its threshold); else inconclusive (the first open part,
    its cause). The evidence lists every part, ``n`` the smallest part's; Bonferroni over the parts is the
    rule's (``kit.curves.conditions``), as for :func:`combine_parts`."""
    if not parts:
        return Judgement(INCONCLUSIVE, empty, causes.no_data(empty), "no data")
    parts = [(label, replace(p, margins=tuple(_labelled(label, m) for m in p.margins))) for label, p in parts]
    evidence = " | ".join(f"{label}: {p.evidence}" for label, p in parts)
    margins = tuple(m for _, p in parts for m in p.margins)
    ns = [p.n for _, p in parts if p.n is not None]
    n = min(ns) if ns else None
    unit = NETWORK if any(p.unit == NETWORK for _, p in parts) else SAMPLE

    def weakest(p: Judgement) -> tuple[float, Margin | None]:
        decided = sorted(((m.gap, m) for m in p.margins if m.decided), key=lambda x: x[0])
        return decided[0] if decided else (0.0, None)

    shown = [(label, p) for label, p in parts if p.verdict is REPRODUCED]
    if shown:
        label, part = max(shown, key=lambda lp: weakest(lp[1])[0])
        by = f"{label}: {part.evidence}"
        return Judgement(REPRODUCED, evidence, n=n, margins=margins, decided_by=by, key=weakest(part)[1],
                         unit=unit)
    if all(p.verdict is NOT_REPRODUCED for _, p in parts):
        label, part = min(parts, key=lambda lp: weakest(lp[1])[0])
        by = f"{label}: {part.evidence}"
        detail = part.cause.removeprefix(causes.measured_otherwise("")) if part.cause else by
        sentence = causes.measured_otherwise(f"no condition shows it; the nearest, {detail}")
        return Judgement(NOT_REPRODUCED, evidence, sentence, "measured otherwise", n, margins, by,
                         weakest(part)[1], unit)
    label, part = next(lp for lp in parts if lp[1].verdict is INCONCLUSIVE)
    open_ = [m for m in part.margins if not m.decided]
    kind, sentence = part.cause_kind, part.cause
    if not kind:
        kind, sentence = "sample too small", f"{label}: {part.evidence}: the evidence does not decide"
    return Judgement(INCONCLUSIVE, evidence, sentence, kind, n, margins, f"{label}: {part.evidence}",
                     open_[0] if open_ else None, unit)


def unstated_conditions(j: Judgement, conditions: str, setting: str) -> Judgement:
    """``j`` for a claim that holds under ``conditions`` its source names but does not state ("under
    realistic conditions"): data of one ``setting`` can show an instance (reproduced stays reproduced, the
    setting named) but cannot refute it, since the setting may lie outside those conditions: a not
    reproduced becomes inconclusive, ``not testable``, with what was measured in the cause."""
    if j.verdict is not NOT_REPRODUCED:
        return j
    why = causes.not_testable(
        f"the claim holds {conditions}, which its source does not state; in {setting} the data say: "
        f"{j.cause or j.evidence}"
    )
    return replace(j, verdict=INCONCLUSIVE, cause=why, cause_kind="not testable", key=None)


def per_group(groups: Mapping[str, RuleFn], th: Thresholds) -> Judgement:
    """One judgement from a rule applied per group (e.g. per dtype), each group's judgement a part of
    ``combine_parts``; the groups are conditions of the row too (Bonferroni, multiplied into the rule's
    own)."""
    with conditions(len(groups)):
        return combine_parts([(label, fn(th)) for label, fn in groups.items()])
