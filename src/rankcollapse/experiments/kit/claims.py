"""Claim rows: a statement judged on the plotted quantity and on the mechanism, with its origin.

:func:`judged` runs a rule at the story's thresholds and again at each end of the documented range of
every threshold the rule read, so a row can say whether its verdict depends on a number the paper
never gives. :func:`claim_row` turns one or two :class:`Judged` into a
:class:`~rankcollapse.experiments.contract.verdicts.Claim`: its origin (paper setting / stand-in /
extension; a random init never stands in for pretrained weights: that row is ``untested``), the
combined word (``contract.verdicts.verdict_word``), one cause sentence, the thresholds it used, the
sample size and whether the verdict is provisional.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rankcollapse.experiments.contract.story import Data, Statement
from rankcollapse.experiments.contract.verdicts import (
    INCONCLUSIVE,
    NA,
    NOT_REPRODUCED,
    REPRODUCED,
    UNTESTED,
    Claim,
    Origin,
    Verdict,
    row_plotted,
    verdict_word,
)
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.curves import NETWORK, RUN, SAMPLE
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


@dataclass(frozen=True)
class Judged:
    """A judgement at the story's thresholds, the thresholds the rule read, and the verdicts it gives
    at the ends of their documented ranges where those differ (``flips``: (name, value, verdict))."""

    judgement: Judgement
    used: frozenset[str]
    flips: tuple[tuple[str, float, Verdict], ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict


def judged(rule: Callable[[Thresholds], Judgement], th: Thresholds) -> Judged:
    """Run ``rule`` at ``th``, then once per end of each used threshold's range."""
    probe = th.fresh()
    base = rule(probe)
    used = frozenset(probe.used)
    flips = []
    for name in sorted(used & set(th.ranges)):
        for value in th.ranges[name]:
            if value == float(th.values[name]):
                continue
            other = rule(th.with_value(name, value)).verdict
            if other is not base.verdict:
                flips.append((name, value, other))
    return Judged(base, used, tuple(flips))


@dataclass(frozen=True)
class Model:
    """What a row says about the weights it judged (from a run's ``model_*`` columns)."""

    label: str = ""
    name: str = ""
    pretrained: bool = True
    stand_in_for: str = ""

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Model:
        if frame.empty or "model_label" not in frame:
            return cls()
        first = frame.iloc[0]

        def text(key: str) -> str:
            value = first.get(key, "")
            return value if isinstance(value, str) else ""

        return cls(
            text("model_label"), text("model_name"), bool(first.get("pretrained", True)), text("stand_in_for")
        )

    @property
    def untested(self) -> bool:
        """A random init labelled as standing in for a pretrained checkpoint: it tests nothing."""
        return bool(self.stand_in_for) and not self.pretrained


def origin_of(statement: Statement, data: Data, model: Model) -> Origin:
    """Extension for our own arms and statements; stand-in where other pretrained weights stood in."""
    if data.exp.extension or statement.ours:
        return Origin.EXTENSION
    if model.stand_in_for and model.pretrained:
        return Origin.STAND_IN
    return Origin.PAPER


def _flip_words(j: Judged, th: Thresholds) -> str:
    bits = [f"{v} at {name} = {value:g}" for name, value, v in j.flips]
    return "; ".join(bits)


def _cause(
    plotted: Judged,
    mechanism: Judged | None,
    origin: Origin,
    model: Model,
    th: Thresholds,
    norm_words: str,
    names: tuple[str, str],
) -> tuple[str, str]:
    """(kind, sentence) of a row that is not plainly reproduced (see ``kit.causes``), in this order: a
    verdict that moves inside a threshold's documented range; a plotted quantity that reproduces while
    the mechanism does not (the norm, the floor); a mechanism that holds while the plotted quantity does
    not (the norm, or the plotted dtype's precision); the plotted judgement's own cause (a stand-in's
    measured difference named as such)."""
    p = plotted.judgement
    m = mechanism.judgement if mechanism is not None else None
    if p.verdict is REPRODUCED and (m is None or m.verdict is REPRODUCED):
        return "", ""
    flipped = [(names[0], plotted)] if plotted.flips else []
    if mechanism is not None and mechanism.flips:
        flipped.append((names[1], mechanism))
    if flipped:
        label, which = flipped[0]
        span = ", ".join(
            f"{n} {th.ranges[n][0]:g}-{th.ranges[n][1]:g}" for n in sorted({f[0] for f in which.flips})
        )
        return "threshold", causes.threshold(
            span, f"{label}: {which.verdict} at the YAML's value, {_flip_words(which, th)}"
        )
    if p.verdict is REPRODUCED and m is not None:
        if m.cause_kind in ("measured otherwise", "") and norm_words:
            return "norm effect", causes.norm_effect("raw μ reproduces", norm_words, f"says {m.verdict}")
        return m.cause_kind or "measured otherwise", m.cause or causes.measured_otherwise(m.evidence[:200])
    if m is not None and m.verdict is REPRODUCED:
        if norm_words:
            return "norm effect", causes.norm_effect(
                f"{names[0]} says {p.verdict}", norm_words, "behaves as the statement says"
            )
        return "precision floor", causes.dtype_precision(names[0], names[1], p.cause or p.evidence[:160])
    kind, sentence = p.cause_kind, p.cause
    if origin is Origin.STAND_IN and kind == "measured otherwise":
        return "stand-in differs", causes.stand_in_differs(model.label, model.stand_in_for, sentence)
    if not kind:
        kind = "measured otherwise" if p.verdict is NOT_REPRODUCED else "sample too small"
        sentence = (
            causes.measured_otherwise(p.evidence[:200]) if p.verdict is NOT_REPRODUCED else p.evidence[:200]
        )
    return kind, sentence


def claim_row(
    story: str,
    statement: Statement,
    data: Data,
    th: Thresholds,
    plotted: Judged,
    mechanism: Judged | None = None,
    *,
    qualifier: str = "",
    frame: pd.DataFrame | None = None,
    runs: pd.DataFrame | None = None,
    figure: str = "",
    sample_note: str = "",
    norm_words: str = "",
    names: tuple[str, str] = ("raw mu (the paper's quantity)", "mu_rel with the precision floor"),
    axes_frame: pd.DataFrame | None = None,
) -> Claim:
    """One claims-table row (see the module docstring).

    ``frame``: the table rows behind it (gives the model); ``runs``: the index rows (gives seeds);
    ``names``: the words for the plotted quantity and the mechanism in the evidence; ``axes_frame``:
    every table row either half judged, where the halves are judged on different rows (a dtype each):
    the grid values they share are the conditions a sequential run extends (default ``frame``).
    """
    frame = frame if frame is not None else pd.DataFrame()
    axes = shared_axes(data, axes_frame if axes_frame is not None else frame)
    model = Model.of(frame)
    origin = origin_of(statement, data, model)
    untested = model.untested  # a random init never stands in for pretrained weights, in any row
    mech_verdict = mechanism.verdict if mechanism is not None else None
    word = verdict_word(origin, plotted.verdict, mech_verdict, untested=untested, kind=statement.kind)
    qual = qualifier or (data.exp.arm if data.exp.extension else "")
    cid = f"{story}.{statement.key}" + (f"[{qual}]" if qual else "")
    seeds = data.seeds(runs) if runs is not None else data.seeds()
    if untested:  # nothing of the random init is evidence about the checkpoint: no n, no interval
        missing = model.stand_in_for
        return _unjudged_row(
            story, statement, data, origin, word,
            f"not run on {missing}: its weights are not in the local Hugging Face cache", "untested",
            causes.untested(missing), figure, cid=cid,
            text=f"{statement.text} [{missing}: the paper's weights, not available here]",
            model=missing, seeds=seeds, axes=axes,
        )
    kind, cause = _cause(plotted, mechanism, origin, model, th, norm_words, names)
    used = set(plotted.used) | (set(mechanism.used) if mechanism is not None else set())
    flips = [*plotted.flips, *(mechanism.flips if mechanism is not None else ())]
    sensitivity = "; ".join(
        f"{label}: {_flip_words(j, th)}"
        for label, j in zip(names, (plotted, mechanism), strict=True)
        if j is not None and j.flips
    )
    ns = [j.judgement.n for j in (plotted, mechanism) if j is not None and j.judgement.n is not None]
    n = min(ns) if ns else None
    halves = [j.judgement for j in (plotted, mechanism) if j is not None]
    units = {j.unit for j in halves} | {m.unit for j in halves for m in j.margins}
    unit = NETWORK if NETWORK in units else RUN if RUN in units else SAMPLE
    provisional = bool(
        n is not None and unit == SAMPLE and "min_samples" in th.values and n <= th.count("min_samples")
    ) or bool(n is not None and unit == NETWORK and n < 3)
    undecided, needed, interval = sampling_state(plotted, mechanism, th, kind)
    label = f"[{model.label}] " if model.label else ""
    evidence = (
        f"{label}{names[0]}: {verdict_word(origin, plotted.verdict, None, kind=statement.kind)} — "
        f"{plotted.judgement.evidence}"
    )
    if sample_note:
        evidence += f" || {sample_note}"
    mech_evidence = (
        f"{names[1]}: {verdict_word(origin, mechanism.verdict, None)} — {mechanism.judgement.evidence}"
        if mechanism is not None
        else ""
    )
    stand = f"{model.label} stands in for {model.stand_in_for}" if model.stand_in_for else ""
    scope = plotted.judgement.scope or (mechanism.judgement.scope if mechanism is not None else "")
    return Claim(
        id=cid,
        story=story,
        key=statement.key,
        experiment=data.exp.name,
        statement=statement.text + (f" [{model.label}]" if model.label else f" [{qual}]" if qual else ""),
        source=statement.source,
        origin=origin.value,
        verdict=word,
        as_plotted=row_plotted(plotted.verdict, word),
        mechanism=mech_verdict.value if mech_verdict is not None else NA,
        rule=statement.rule,
        evidence=evidence,
        mechanism_evidence=mech_evidence,
        cause_kind=kind,
        cause=cause,
        thresholds=th.describe(used) if used else "",
        threshold_sensitive=bool(flips),
        sensitivity=sensitivity,
        n=n,
        unit=unit,
        provisional=provisional,
        model=model.label,
        stand_in=stand,
        conditions=data.conditions(),
        seeds=seeds,
        figure=figure,
        undecided=undecided,
        needed_n=needed,
        interval=interval,
        decided_by=decided_by(plotted, mechanism, names),
        scope=scope,
        axes=axes,
    )


def decided_by(plotted: Judged, mechanism: Judged | None, names: tuple[str, str]) -> str:
    """The condition that decided each half of the row, in words (``as plotted — causal, float32: ...``)."""
    bits = []
    for name, j in zip(names, (plotted, mechanism), strict=True):
        if j is not None and j.judgement.decided_by:
            bits.append(f"{name} — {j.judgement.decided_by}")
    return " · ".join(bits)


#: Causes that explain an inconclusive row better than its sample size (more samples would not help).
_NOT_SAMPLING = ("threshold", "failed runs", "untested", "no data", "not testable")


def _interval(m: Margin) -> str:
    return m.text()


def _key_interval(j: Judged, name: str) -> str:
    """The comparison that decided ``j`` (its verdict's key), named; empty where a status without an
    interval decided it (a floor, a count) or the key does not say what the verdict says."""
    key = j.judgement.key
    if key is None:
        return ""
    if (j.verdict is INCONCLUSIVE) == key.decided:  # a decided verdict never prints an open interval
        return ""
    return f"{name}: {key.text()}" if name else key.text()


def sampling_state(
    plotted: Judged, mechanism: Judged | None, th: Thresholds, kind: str
) -> tuple[bool, int | None, str]:
    """(undecided?, the n that would decide it, its interval in words) of a row.

    A part is undecided when it is inconclusive for want of samples (cause ``sample too small``:
    a comparison's interval straddles its threshold, or n < ``min_samples``); the row is undecided when
    one of its parts is and no other cause (failed runs, no data) explains it. A verdict that another
    threshold inside its documented range would change stays undecided when it is open at the YAML's
    value for want of samples: more samples decide it there (a share of 100 % over 32 excerpts against
    95 % was called "inconclusive for a reason more samples do not change"); the range is its cause.
    ``needed``: the largest :meth:`Margin.needed_n` over the open comparisons, ``min_samples`` where a
    part had too few samples, None when no comparison says. The interval: for an undecided row its first
    open comparison; otherwise the comparison that decided each half of the row (``Judgement.key``:
    the failing condition of a "not reproduced", the weakest condition of a "reproduced"), named by its
    condition; empty where no interval decided it (a floor, a count, a check)."""
    parts = [j.judgement for j in (plotted, mechanism) if j is not None]
    open_parts = [j for j in parts if j.verdict is INCONCLUSIVE and j.cause_kind == "sample too small"]
    if not open_parts or (kind in _NOT_SAMPLING and kind != "threshold"):
        shown = [
            _key_interval(j, "as plotted" if i == 0 and mechanism is not None else "mechanism" if i else "")
            for i, j in enumerate((plotted, mechanism))
            if j is not None
        ]
        return False, None, " · ".join(x for x in shown if x)
    needs: list[int] = []
    interval = ""
    both = mechanism is not None
    for j in open_parts:
        for m in j.undecided:
            need = m.needed_n()
            if need is not None:
                needs.append(need)
            if not interval:
                half = "as plotted" if j is plotted.judgement else "mechanism"
                interval = f"{half} (open): {_interval(m)}" if both else _interval(m)
        if (
            not j.undecided
            and j.n is not None
            and "min_samples" in th.values
            and j.n < th.count("min_samples")
        ):
            needs.append(th.count("min_samples"))
    return True, (max(needs) if needs else None), interval


def shared_axes(data: Data, frame: pd.DataFrame) -> dict[str, Any]:
    """The grid axes (not the seed) on which every row of ``frame`` has one value: the conditions a
    sequential run extends for this row."""
    grid = data.exp.grid or {}
    out: dict[str, Any] = {}
    for axis, values in grid.items():
        if axis == "seed" or len(values) < 2 or axis not in frame or frame.empty:
            continue
        seen = frame[axis].dropna().unique()
        if len(seen) == 1:
            out[axis] = seen[0].item() if hasattr(seen[0], "item") else seen[0]
    return out


def model_row(
    story: str,
    statement: Statement,
    data: Data,
    th: Thresholds,
    plotted: Judged,
    mechanism: Judged | None,
    frame: pd.DataFrame,
    *,
    qualifier: str,
    figure: str,
    names: tuple[str, str] = ("raw mu (the paper's quantity)", "mu_rel with the precision floor"),
    norm_words: str = "",
    mechanism_frame: pd.DataFrame | None = None,
) -> Claim:
    """:func:`claim_row` for one model's rows ``frame`` of an arm: its runs, seeds and sample note.

    ``mechanism_frame``: where the mechanism is judged on other rows than ``frame`` (fig. 4: float64
    beside the plotted float32), those rows. The row's seeds are then the smaller half's (its ``n``),
    and its conditions span both halves, so that ``reproduce --until-decided`` doubles the half that
    is open (it once added float32 excerpts to 2,048 while the open float64 half stayed at 32)."""
    from rankcollapse.experiments.kit.data import runs_of, sample_note

    runs = runs_of(data, frame)
    note = sample_note(runs, frame)
    axes_frame = None
    if mechanism_frame is not None and not mechanism_frame.empty:
        mech_runs = runs_of(data, mechanism_frame)
        axes_frame = pd.concat([frame, mechanism_frame], ignore_index=True)
        if mechanism is not None and (mechanism.judgement.n or 0) < (plotted.judgement.n or 0):
            runs = mech_runs
        note += f" · {names[1]}: {sample_note(mech_runs, mechanism_frame)}"
    return claim_row(
        story,
        statement,
        data,
        th,
        plotted,
        mechanism,
        qualifier=qualifier,
        frame=frame,
        runs=runs,
        figure=figure,
        sample_note=note,
        norm_words=norm_words,
        names=names,
        axes_frame=axes_frame,
    )


def checks_row(
    story: str,
    statement: Statement,
    data: Data,
    th: Thresholds,
    checks: list[tuple[str, bool | None, str]],
    *,
    names: tuple[str, str],
    runs: pd.DataFrame | None = None,
    figure: str = "",
    qualifier: str = "",
) -> Claim:
    """:func:`claim_row` for a statement judged by labelled checks (``kit.rules.every_run``)."""
    from rankcollapse.experiments.kit.rules import every_run

    return claim_row(
        story,
        statement,
        data,
        th,
        judged(lambda t: every_run(checks), th),
        runs=runs,
        figure=figure,
        qualifier=qualifier,
        names=names,
    )


def _unjudged_row(story: str, statement: Statement, data: Data | None, origin: Origin, verdict: str,
                  evidence: str, cause_kind: str, cause: str, figure: str = "", *, cid: str = "",
                  text: str = "", **more: Any) -> Claim:
    """A row no rule judged: as plotted inconclusive, no mechanism, no n and no interval. ``cid`` / ``text``:
    the row's id and statement where they are not the statement's own; ``more``: further ``Claim`` fields
    (an untested stand-in's model, seeds and axes)."""
    return Claim(
        id=cid or f"{story}.{statement.key}",
        story=story,
        key=statement.key,
        experiment=data.exp.name if data is not None else story,
        statement=text or statement.text,
        source=statement.source,
        origin=origin.value,
        verdict=verdict,
        as_plotted=INCONCLUSIVE.value,
        mechanism=NA,
        rule=statement.rule,
        evidence=evidence,
        cause_kind=cause_kind,
        cause=cause,
        conditions=data.conditions() if data is not None else "",
        figure=figure,
        **more,
    )


def untested_row(
    story: str, statement: Statement, data: Data | None, missing: str, figure: str = ""
) -> Claim:
    """The row of a paper statement that needs what is not here (``missing``: e.g. a kind of pretrained
    model no wheel ships): untested, with no n and no interval."""
    return _unjudged_row(story, statement, data, Origin.PAPER, UNTESTED, f"not run: no {missing} offline",
                         "untested", causes.untested(missing), figure)


def not_testable_row(
    story: str, statement: Statement, data: Data | None, why: str, figure: str = ""
) -> Claim:
    """The row of a statement no run here can speak to (``why``: e.g. a claim about trained models, a step
    count measured in other models): untested, with no n and no interval, the reason in its cause; its
    origin the statement's (ours: an extension)."""
    extension = statement.ours or (data is not None and data.exp.extension)
    origin = Origin.EXTENSION if extension else Origin.PAPER
    return _unjudged_row(story, statement, data, origin, UNTESTED, f"not run: {why}", "untested",
                         causes.not_testable_here(why), figure)


def no_data_row(story: str, statement: Statement, data: Data | None, why: str, extension: bool) -> Claim:
    """The pipeline's row for a statement nothing judged (no runs, all failed, arm skipped)."""
    origin = Origin.EXTENSION if extension or statement.ours else Origin.PAPER
    return _unjudged_row(story, statement, data, origin, verdict_word(origin, INCONCLUSIVE, None),
                         f"no data: {why}", "no data", causes.no_data(why))


def with_failures(claim: Claim, failures: str) -> Claim:
    """Failed runs in the arm: part of the grid is missing, so nothing there counts as reproduced."""
    if not failures:
        return claim
    claim.evidence += f"; {failures}"
    if claim.as_plotted in (REPRODUCED.value, Verdict.CONSISTENT.value):
        claim.as_plotted = INCONCLUSIVE.value
        mech: Any = None if claim.mechanism == NA else claim.mechanism
        claim.verdict = verdict_word(claim.origin, INCONCLUSIVE, mech)
        claim.cause_kind, claim.cause = "failed runs", causes.failed_runs(failures)
    return claim
