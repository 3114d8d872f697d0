"""One rule for facts that hold by construction, checked case by case (Li & Guo, arXiv 2606.09951, story
``hasse``): every mask and schedule, every depth, every check.

A *case* is one mask (or schedule) at one length, or one designed flow at one depth; a *check* is one
comparison that a proof says must come out true (our limit equals networkx's transitive closure; the
condensation is a DAG; the transitive reduction equals networkx's; the flow a mask is designed for holds).
:func:`all_cases`, pinned by synthetic data in ``tests/experiments/test_kit_orders.py`` and broken on
purpose by ``scripts/break_rules.py``:

- every check true in every case -> reproduced (a ``proof`` statement's row reads "consistent: proven"),
  ``n`` the cases (unit: runs of the check, not samples: nothing is drawn);
- a check false in some case -> not reproduced, the failing cases and checks named (a proof cannot fail:
  it means our code, the reference or the reading of the statement is wrong);
- a check that could not be made (None) in some case and none false -> inconclusive, not testable;
- no case -> inconclusive (no data).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.curves import RUN
from rankcollapse.experiments.kit.judgement import Judgement


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
