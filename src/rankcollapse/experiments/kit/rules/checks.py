"""Rules on per-run checks (the theorems): each run, equilibrium or family passes or fails a check.

A check is ``(label, holds, words)``: ``holds`` True (the part reproduces), False (it does not) or None
(the check could not be made: not testable); every check is one part of ``kit.combine.combine_parts``.
The rules here build such checks from fitted rates, a theorem's bound, tangent spectra, correlations or
pairs of values.

:func:`all_cases` judges facts that hold by construction, checked case by case (Li & Guo, arXiv 2606.09951,
story ``hasse``): every mask and schedule, every depth, every check. A *case* is one mask (or schedule) at
one length, or one designed flow at one depth; a *check* is one comparison that a proof says must come out
true. Pinned by synthetic data in ``tests/experiments/test_kit_orders.py`` and broken on purpose by
``scripts/break_rules.py``:

- every check true in every case -> reproduced (a ``proof`` statement's row reads "consistent: proven"),
  ``n`` the cases (unit: runs of the check, not samples: nothing is drawn);
- a check false in some case -> not reproduced, the failing cases and checks named (a proof cannot fail:
  it means our code, the reference or the reading of the statement is wrong);
- a check that could not be made (None) in some case and none false -> inconclusive, not testable;
- no case -> inconclusive (no data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts
from rankcollapse.experiments.kit.curves import RUN
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.thresholds import Thresholds


def every_run(checks: Sequence[tuple[str, bool | None, str]], empty: str = "no run") -> Judgement:
    """Every labelled check holds (reproduced); any fails (not reproduced); a check that could not be
    made (None) or no check at all: inconclusive. ``checks``: (label, holds, words)."""
    parts = []
    for label, holds, words in checks:
        if holds is None:
            why = causes.not_testable(f"{label}: {words}")
            parts.append((label, Judgement(INCONCLUSIVE, words, why, "not testable")))
        else:
            parts.append((label, Judgement(REPRODUCED if holds else NOT_REPRODUCED, words)))
    return combine_parts(parts, empty)


def collapses(runs: Sequence[tuple[str, float | None, bool]], th: Thresholds) -> Judgement:
    """Exponential collapse in every run: each (label, fitted log rate per layer, reached the floor)
    reaches the floor or has rate < ``-min_log_rate`` (reproduced); a run above it off the floor (not);
    a run with no fitted rate off the floor (inconclusive)."""
    limit = th["min_log_rate"]
    checks = []
    for label, rate, floor in runs:
        if floor:
            checks.append((label, True, "reaches the precision floor"))
        elif rate is None or not math.isfinite(rate):
            checks.append((label, None, "no fitted rate"))
        else:
            checks.append((label, rate < -limit, f"log rate {rate:.3g}/layer (x{math.exp(rate):.3g})"))
    return every_run(checks)


def bound_holds(runs: Sequence[tuple[str, str, bool] | tuple[str, str, bool, float | None]]) -> Judgement:
    """A theorem's bound against measured runs: each (label, check, reached floor[, graph radius]) with
    the check of ``dynamics.theory`` (``consistent``, ``rate_exceeded``, ``vacuous``). A run that reached
    the precision floor tests no rate and is not counted; any ``rate_exceeded`` -> not reproduced; some
    non-vacuous ``consistent`` run -> reproduced; none tested -> inconclusive (bound vacuous / floor).
    Where the radii are given, the row's scope names the radii at which the bound was actually tested
    (``tested at r = 1 only``: larger radii made it vacuous)."""
    full = [(r[0], r[1], r[2], r[3] if len(r) > 3 else None) for r in runs]
    tested = [(lab, v) for lab, v, floor, _ in full if not floor and v != "vacuous"]
    vacuous = [lab for lab, v, floor, _ in full if v == "vacuous"]
    floored = [lab for lab, v, floor, _ in full if floor and v != "vacuous"]
    counts = (
        f"{len(runs)} runs: {len(tested)} test the rate (non-vacuous, above the floor), "
        f"{len(vacuous)} vacuous, {len(floored)} reached the floor (no rate to test)"
    )
    radii_all = sorted({r for *_, r in full if r is not None})
    radii = sorted({r for lab, v, floor, r in full if r is not None and not floor and v != "vacuous"})
    scope = ""
    if radii and radii_all and radii != radii_all:
        scope = f"tested at r = {', '.join(f'{r:g}' for r in radii)} only"
    if scope:
        counts += f"; {scope} (radii run: {', '.join(f'{r:g}' for r in radii_all)})"
    exceeded = [lab for lab, v in tested if v == "rate_exceeded"]
    if exceeded:
        return Judgement(
            NOT_REPRODUCED,
            f"{counts}; rate exceeded in {', '.join(exceeded[:4])}",
            causes.measured_otherwise(
                f"the measured rate is slower than the bound in {len(exceeded)} run(s)"
            ),
            "measured otherwise",
            len(runs),
            unit=RUN,
            scope=scope,
        )
    if tested:
        return Judgement(
            REPRODUCED, f"{counts}; consistent in all {len(tested)}", n=len(runs), unit=RUN, scope=scope
        )
    if vacuous:
        return Judgement(
            INCONCLUSIVE,
            counts,
            causes.bound_vacuous(f"{len(vacuous)} of {len(runs)} runs"),
            "bound vacuous",
            len(runs),
            unit=RUN,
        )
    return Judgement(
        INCONCLUSIVE,
        counts,
        causes.not_testable("every run reached the precision floor"),
        "not testable",
        len(runs),
        unit=RUN,
    )


def stable_in_certain_directions(
    ranks: Mapping[int, Sequence[tuple[int, int]]], words: Mapping[int, str]
) -> Judgement:
    """The first half of §4.4, "stable in certain directions", per rank: ``ranks[k]`` lists each equilibrium
    of rank ``k`` as (stable tangent directions, directional starts along them that returned). Rank ``k``
    holds when some equilibrium has a stable direction and every start along its stable directions returned
    (a saddle *is* stable in certain directions); it fails when no equilibrium of that rank has a stable
    direction; stable directions whose starts do not all return leave it inconclusive (the spectrum and
    the map disagree); no equilibrium of the rank: not testable. Every rank holds -> reproduced, decided by
    the rank with the fewest such equilibria. The second half, "small regions of attraction", is
    :func:`regions_of_attraction`'s: stable directions say nothing about whether nearby starts return."""
    checks: list[tuple[str, bool | None, str]] = []
    support: dict[str, int] = {}
    for k, eqs in sorted(ranks.items()):
        text = words.get(k, "")
        if not eqs:
            checks.append((f"rank {k}", None, text or "no equilibrium of this rank"))
        elif not any(stable > 0 for stable, _ in eqs):
            checks.append((f"rank {k}", False, text))
        else:
            back = any(stable > 0 and returned == stable for stable, returned in eqs)
            support[f"rank {k}"] = sum(stable > 0 and returned == stable for stable, returned in eqs)
            checks.append((f"rank {k}", True if back else None, text))
    return _weakest(every_run(checks, empty="no equilibrium of rank >= 2"), checks, support)


def regions_of_attraction(
    ranks: Mapping[int, Sequence[tuple[float, float]]], words: Mapping[int, str]
) -> Judgement:
    """The second half of §4.4, "small regions of attraction", per rank: ``ranks[k]`` lists each
    equilibrium of rank ``k`` as (share of nearby starts back with token 1 held at ``e_d``, share back with
    every token perturbed). Judged on the first, the paper's protocol (§4.3.2: earlier tokens have
    converged); the second is reported in ``words``. Rank ``k`` holds when some equilibrium draws back a
    positive share; it fails when none does (the words say how many equilibria and starts); no
    equilibrium of the rank: not testable. Every rank holds -> reproduced, decided by the rank whose best
    share is smallest; the first rank where none returns decides a "not reproduced". The regions' size
    ("small") is not judged: the starts sit at one distance."""
    checks: list[tuple[str, bool | None, str]] = []
    support: dict[str, float] = {}
    for k, eqs in sorted(ranks.items()):
        text = words.get(k, "")
        if not eqs:
            checks.append((f"rank {k}", None, text or "no equilibrium of this rank"))
            continue
        best = max(held for held, _ in eqs)
        support[f"rank {k}"] = best
        checks.append((f"rank {k}", bool(best > 0), text))
    return _weakest(every_run(checks, empty="no equilibrium of rank >= 2"), checks, support)


def _weakest(
    j: Judgement, checks: Sequence[tuple[str, bool | None, str]], support: Mapping[str, float]
) -> Judgement:
    """A reproduced judgement decided by its weakest check (the smallest ``support``), not the first."""
    if j.verdict is not REPRODUCED or not support:
        return j
    label = min(support, key=lambda lab: support[lab])
    words = next(w for lab, _, w in checks if lab == label)
    return replace(j, decided_by=f"{label}: {words}")


def at_least(values: Sequence[tuple[str, float]], th: Thresholds, name: str) -> Judgement:
    """Every labelled value is at least the threshold ``name`` (reproduced), else not reproduced."""
    limit = th[name]
    return every_run([(label, bool(v >= limit), f"{v:.3g} (needs >= {limit:g})") for label, v in values])


def spearman_order(per_family: Mapping[str, tuple[float, str]], th: Thresholds) -> Judgement:
    """Per family, a Spearman correlation of the expected order: ``>= min_rho`` (reproduced), ``<= 0``
    (not reproduced), in between or NaN (inconclusive). ``per_family``: family -> (rho, words)."""
    limit = th["min_rho"]
    parts = []
    for fam, (rho, words) in per_family.items():
        if not math.isfinite(rho):
            why = causes.not_testable(f"{fam}: fewer than 3 fitted rates")
            parts.append((fam, Judgement(INCONCLUSIVE, f"{words}; too few points", why, "not testable")))
        else:
            v = REPRODUCED if rho >= limit else NOT_REPRODUCED if rho <= 0 else INCONCLUSIVE
            parts.append((fam, Judgement(v, f"{words}; Spearman {rho:.2g}")))
    return combine_parts(parts)


def pairs_ordered(pairs: Sequence[tuple[str, float, float]]) -> Judgement:
    """In every (label, a, b) pair ``b > a`` (reproduced); any not (not reproduced); none: inconclusive."""
    return every_run(
        [(label, bool(b > a), f"{a:.3g} vs {b:.3g}") for label, a, b in pairs], empty="no pair measured"
    )


def all_cases(cases: Sequence[tuple[str, Mapping[str, bool | None]]], what: str) -> Judgement:
    """Every check of every case true (module docstring). ``cases``: (label, {check: holds}); ``what``
    names the cases in the evidence (``masks and schedules``, ``depths``)."""
    n = len(cases)
    if not n:
        return Judgement(INCONCLUSIVE, f"no {what}", causes.no_data(f"no {what} checked"), "no data")
    failed = [(label, check) for label, checks in cases for check, holds in checks.items() if holds is False]
    unknown = [(label, check) for label, checks in cases for check, holds in checks.items() if holds is None]
    checks = sorted({c for _, cs in cases for c in cs})
    total = sum(len(cs) for _, cs in cases)
    counts = f"{n} {what}, {total} checks ({', '.join(checks)})"
    if failed:
        shown = "; ".join(f"{label}: {check}" for label, check in failed[:4])
        more = f" and {len(failed) - 4} more" if len(failed) > 4 else ""
        cause = causes.measured_otherwise(f"{len(failed)} check(s) fail: {shown}{more}")
        return Judgement(NOT_REPRODUCED, f"{counts}; failing: {shown}{more}", cause, "measured otherwise", n,
                         unit=RUN, decided_by=f"{failed[0][0]}: {failed[0][1]}")
    if unknown:
        label, check = unknown[0]
        cause = causes.not_testable(f"{label}: {check} could not be checked")
        return Judgement(INCONCLUSIVE, f"{counts}; {len(unknown)} not checked", cause, "not testable", n,
                         unit=RUN)
    return Judgement(REPRODUCED, f"{counts}: all hold", n=n, unit=RUN, decided_by=f"all {n} {what}")
