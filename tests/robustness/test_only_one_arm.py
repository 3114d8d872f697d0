"""``reproduce --only STORY.ARM`` (the documented form) judges whichever arms it selected (issue 39,
tracebacks): ``--only position_decay.rope`` crashed the judging after the runs with an IndexError, and
every resume the same way, where a statement is judged on the story as a whole (its claim names the
story, not an arm). The pipeline reads a claim's arm, if it has one, among the arms selected."""

from __future__ import annotations

import pytest

from rankcollapse.pipeline.reproduce import _arm_failures, judge_folder


@pytest.mark.parametrize("only", ["position_decay.rope", "position_decay.rope_profile"])
def test_one_arm_of_a_story_is_judged_without_a_traceback(tmp_path, only):
    claims = judge_folder(tmp_path, "tiny", [only])  # no run stored: every row says why
    assert claims and {c.experiment for c in claims} <= {only, "position_decay"}


def test_a_claim_on_the_whole_story_reads_the_failures_of_every_arm_selected():
    class Arm:
        def __init__(self, failures: str) -> None:
            self._failures = failures

        def failures(self) -> str:
            return self._failures

    arms = {"rope": Arm("1 run(s) failed, e.g. boom"), "alibi": Arm("")}
    assert _arm_failures("s.rope", arms) == "1 run(s) failed, e.g. boom"
    assert _arm_failures("s", arms) == "1 run(s) failed, e.g. boom"
    assert _arm_failures("s.other", {"rope": Arm("no runs")}) == ""
