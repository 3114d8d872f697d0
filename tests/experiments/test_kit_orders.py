"""kit.rules.checks.all_cases on synthetic checks: every verdict it can give and the failing case named."""

from __future__ import annotations

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit.curves import RUN
from rankcollapse.experiments.kit.rules.checks import all_cases


def test_every_check_true_in_every_case_is_reproduced_with_the_cases_as_n() -> None:
    j = all_cases([("causal, n = 12", {"closure": True, "dag": True}), ("window, n = 12", {"closure": True})],
                  "masks")
    assert j.verdict == REPRODUCED and j.n == 2 and j.unit == RUN and "3 checks" in j.evidence


def test_one_false_check_is_not_reproduced_and_named() -> None:
    cases = [("causal", {"closure": True}), ("butterfly", {"closure": True, "no leak": False})]
    j = all_cases(cases, "masks")
    assert j.verdict == NOT_REPRODUCED and j.cause_kind == "measured otherwise"
    assert "butterfly: no leak" in j.cause and j.decided_by == "butterfly: no leak"


def test_a_check_not_made_is_inconclusive_unless_another_fails() -> None:
    j = all_cases([("a", {"dag": None}), ("b", {"dag": True})], "masks")
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable"
    assert all_cases([("a", {"dag": None}), ("b", {"dag": False})], "masks").verdict == NOT_REPRODUCED


def test_no_case_is_no_data() -> None:
    j = all_cases([], "masks")
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "no data"
