"""The one verdict vocabulary: the combined-word table, origins, and how a claim row is built."""

from __future__ import annotations

import pandas as pd
import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.contract.story import Data, Statement
from rankcollapse.experiments.contract.verdicts import (
    CONSISTENT,
    EXTENSION_WORDS,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    PAPER_WORDS,
    REPRODUCED,
    UNTESTED,
    Claim,
    Origin,
    Verdict,
    combine_verdicts,
    verdict_class,
    verdict_word,
)
from rankcollapse.experiments.engine.config import Experiment
from rankcollapse.experiments.kit.claims import Judged, claim_row, no_data_row, with_failures
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.thresholds import Thresholds

R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE


def plain(verdict: Verdict, evidence: str, cause_kind: str = "", cause: str = "") -> Judged:
    """A judgement of a check that reads no threshold."""
    return Judged(Judgement(verdict, evidence, cause, cause_kind), frozenset())

#: The grammar of a row's word: the plotted quantity's verdict (the paper's words, or ours: confirmed /
#: refuted), then the mechanism's where it differs from it.
LEAD = {R: ("reproduced", "confirmed (ours)"), N: ("not reproduced", "refuted (ours)"),
        I: ("inconclusive", "inconclusive (ours)")}
MECHANISM = {R: "mechanism holds", N: "mechanism differs", I: "mechanism inconclusive"}
PINNED = [(plotted, mech) for plotted in (R, N, I) for mech in (None, R, N, I)]


def test_every_word_is_the_plotted_verdict_then_the_mechanism_where_it_differs() -> None:
    """Both tables follow the grammar for all 12 pairs, and no two pairs that differ in meaning share a
    word (a pair whose mechanism agrees with the plotted verdict reads as the plotted verdict alone)."""
    assert set(PAPER_WORDS) == set(EXTENSION_WORDS) == set(PINNED)
    for k, table in enumerate((PAPER_WORDS, EXTENSION_WORDS)):
        for plotted, mech in PINNED:
            lead = LEAD[plotted][k]
            expected = lead if mech in (None, plotted) else f"{lead} as plotted; {MECHANISM[mech]}"
            assert table[(plotted, mech)] == expected, (plotted, mech)
        assert len(set(table.values())) == 3 + 6  # three plain verdicts, six with a differing mechanism
    assert not set(PAPER_WORDS.values()) & set(EXTENSION_WORDS.values())  # ours never reads as the paper's


@pytest.mark.parametrize("key", list(PINNED))
def test_a_plotted_quantity_that_reproduces_never_reads_not_reproduced(key: tuple) -> None:
    plotted, mech = key
    for origin in Origin:
        word = verdict_word(origin, plotted, mech)
        if plotted is R:
            assert not word.startswith(("not reproduced", "refuted"))
            assert verdict_class(word) == "reproduced"
        if origin is Origin.EXTENSION:
            assert "(ours)" in word and not word.startswith(("reproduced", "not reproduced"))
        else:
            assert "(ours)" not in word


def test_a_stand_in_speaks_of_its_own_behaviour_and_a_search_that_finds_nothing_reads_consistent() -> None:
    assert verdict_word(Origin.STAND_IN, R, None) == "as stated (stand-in)"
    assert verdict_word(Origin.STAND_IN, N, R) == "otherwise (stand-in) as plotted; mechanism holds"
    for plotted, mech in PINNED:  # never the paper's words: a stand-in says nothing about the checkpoint
        word = verdict_word(Origin.STAND_IN, plotted, mech)
        assert "(stand-in)" in word and "reproduced" not in word
    assert verdict_word(Origin.PAPER, R, None, kind="search") == CONSISTENT
    assert verdict_word(Origin.PAPER, N, None, kind="search") == "not reproduced"  # a counterexample found
    assert (
        verdict_class(CONSISTENT) == "consistent"
        and verdict_class("otherwise (stand-in)") == "not reproduced"
    )


def test_untested_wins_and_classes_count_it_apart() -> None:
    assert verdict_word(Origin.PAPER, R, R, untested=True) == UNTESTED
    assert verdict_class(UNTESTED) == UNTESTED
    assert verdict_class("not reproduced as plotted; mechanism holds") == "not reproduced"
    assert verdict_class("inconclusive (ours) as plotted; mechanism holds") == "inconclusive"


def test_combine_verdicts_is_the_one_combiner() -> None:
    assert combine_verdicts([]) is I
    assert combine_verdicts([R, R]) is R
    assert combine_verdicts([R, I]) is I
    assert combine_verdicts(["reproduced", "not reproduced", "inconclusive"]) is N
    with pytest.raises(RankCollapseError, match="unknown verdict 'maybe'"):
        combine_verdicts(["maybe"])
    assert str(Verdict.REPRODUCED) == "reproduced" and Verdict.REPRODUCED == "reproduced"


def test_a_claim_refuses_unknown_words_and_reproduced_without_evidence() -> None:
    base = dict(id="s.k", story="s", key="k", experiment="s.a", statement="x", source="paper §5", rule="r")
    with pytest.raises(ValueError, match="unknown verdict word"):
        Claim(
            **base,
            origin="paper setting",
            verdict="sort of",
            as_plotted="reproduced",
            mechanism="n/a",
            evidence="e",
        )
    with pytest.raises(ValueError, match="needs evidence"):
        Claim(
            **base,
            origin="paper setting",
            verdict="reproduced",
            as_plotted="reproduced",
            mechanism="n/a",
            evidence=" ",
        )
    with pytest.raises(ValueError):
        Claim(
            **base,
            origin="somewhere",
            verdict="reproduced",
            as_plotted="reproduced",
            mechanism="n/a",
            evidence="e",
        )


def _data(extension: bool = False) -> Data:
    exp = Experiment(
        name="s.a",
        title="t",
        task="toy",
        base={},
        grid={"seed": [0]},
        verdict={},
        source="s.yaml",
        story="s",
        arm="a",
        extension=extension,
    )
    index = pd.DataFrame([{"run_id": "r1", "experiment": "s.a", "status": "ok", "error": "", "seed": 0}])
    return Data(exp, pd.DataFrame({"run_id": ["r1"], "experiment": ["s.a"]}), index)


def _frame(label: str, pretrained: bool, stand_in_for: str) -> pd.DataFrame:
    return pd.DataFrame(
        [{"model_label": label, "model_name": label, "pretrained": pretrained, "stand_in_for": stand_in_for}]
    )


STATEMENT = Statement("k", "a statement", "paper §5, Fig. 2", "the rule")
TH = Thresholds.of("s", {"min_samples": 4})


def test_origin_paper_stand_in_untested_and_extension() -> None:
    j = plain(R, "evidence")
    paper = claim_row("s", STATEMENT, _data(), TH, j, frame=_frame("bert (random init)", False, ""))
    assert paper.origin == "paper setting" and paper.verdict == "reproduced" and paper.mechanism == "n/a"
    stand = claim_row(
        "s", STATEMENT, _data(), TH, j, frame=_frame("mpnet, stand-in", True, "bert-base-uncased")
    )
    assert stand.origin == "stand-in" and "stands in for bert-base-uncased" in stand.stand_in
    untested = claim_row("s", STATEMENT, _data(), TH, j, frame=_frame("t5 (random init)", False, "t5-base"))
    assert untested.verdict == UNTESTED and untested.cause_kind == "untested" and "t5-base" in untested.cause
    ext = claim_row("s", STATEMENT, _data(extension=True), TH, j)
    assert ext.origin == "extension" and ext.verdict == "confirmed (ours)" and ext.id == "s.k[a]"
    ours = claim_row("s", Statement("o", "ours too", "ours (measured)", "r", ours=True), _data(), TH, j)
    assert ours.origin == "extension"


def test_a_stand_in_that_fails_says_the_stand_in_differs() -> None:
    j = plain(N, "grows", "measured otherwise", "raw mu grows x1.4/layer")
    row = claim_row(
        "s", STATEMENT, _data(), TH, j, frame=_frame("mpnet, stand-in", True, "bert-base-uncased")
    )
    assert row.cause_kind == "stand-in differs" and "bert-base-uncased" in row.cause and "x1.4" in row.cause


def test_plotted_reproduced_with_a_differing_mechanism_names_the_norm_effect() -> None:
    plotted = plain(R, "raw mu kept")
    mech = plain(N, "mu_rel falls", "measured otherwise", "mu_rel falls")
    row = claim_row("s", STATEMENT, _data(), TH, plotted, mech, norm_words="x0.31 (causal, float32)")
    assert row.verdict == "reproduced as plotted; mechanism differs"
    assert row.cause_kind == "norm effect" and "x0.31" in row.cause


def test_no_data_rows_and_failed_runs_never_read_reproduced() -> None:
    row = no_data_row("s", STATEMENT, _data(), "arm a: no runs", extension=False)
    assert row.verdict == "inconclusive" and row.cause_kind == "no data" and row.id == "s.k"
    ok = claim_row("s", STATEMENT, _data(), TH, plain(R, "e"))
    failed = with_failures(ok, "1 run(s) failed, e.g. boom")
    assert (
        failed.verdict == "inconclusive" and failed.cause_kind == "failed runs" and "boom" in failed.evidence
    )


def test_a_row_at_the_minimum_sample_size_is_provisional() -> None:
    from rankcollapse.experiments.kit.claims import Judged
    from rankcollapse.experiments.kit.judgement import Judgement

    j4 = Judged(Judgement(R, "e", n=4), frozenset({"min_samples"}))
    j9 = Judged(Judgement(R, "e", n=9), frozenset({"min_samples"}))
    assert claim_row("s", STATEMENT, _data(), TH, j4).provisional
    assert not claim_row("s", STATEMENT, _data(), TH, j9).provisional


def test_a_search_or_proof_that_agrees_is_consistent_as_plotted_never_reproduced() -> None:
    """Issue 40 (1): App. F.4's rows read "consistent" in ``as_plotted`` (the old rule stored "reproduced"),
    a proof has its own word, and a contradiction is the paper's "not reproduced"."""
    from rankcollapse.experiments.contract.verdicts import PROVEN, claim_from_record

    for kind, word in (("search", CONSISTENT), ("proof", PROVEN)):
        st = Statement("k", "nothing of a kind exists", "paper App. F.4", "the rule", kind=kind)
        row = claim_row("s", st, _data(), TH, plain(R, "none found"))
        assert row.verdict == word and row.as_plotted == "consistent", (row.verdict, row.as_plotted)
        assert row.verdict_class == "consistent" and "reproduced" not in row.evidence
        found = claim_row("s", st, _data(), TH, plain(N, "one found"))
        assert found.verdict == "not reproduced" and found.as_plotted == "not reproduced"
        failed = with_failures(claim_row("s", st, _data(), TH, plain(R, "none found")), "1 of 2 runs failed")
        assert failed.as_plotted == "inconclusive" and failed.verdict == "inconclusive"
    assert verdict_word(Origin.PAPER, Verdict.CONSISTENT, None, kind="proof") == PROVEN
    with pytest.raises(RankCollapseError, match="search or proof"):
        verdict_word(Origin.PAPER, Verdict.CONSISTENT, None)  # a claim never reads consistent
    with pytest.raises(RankCollapseError, match="not a partial verdict"):
        combine_verdicts([R, Verdict.CONSISTENT])
    old = claim_row("s", Statement("k", "x", "s", "r", kind="search"), _data(), TH, plain(R, "e")).to_dict()
    old["as_plotted"] = "reproduced"  # what an earlier release stored
    with pytest.raises(ValueError, match="never 'reproduced'"):
        Claim(**old)
    assert claim_from_record(old).as_plotted == "consistent"


def test_a_later_papers_row_has_its_own_origin_never_the_neurips_papers() -> None:
    """Issue 40 (2): a follow-up's rows read ``follow-up setting`` (their own counters), and a row that says
    ``paper setting`` for a later paper is refused; stand-ins and extensions keep theirs."""
    from rankcollapse.experiments.contract.verdicts import FOLLOWUPS, assign_paper, claim_from_record, tally

    follow = next(iter(FOLLOWUPS))
    row = assign_paper(claim_row("s", STATEMENT, _data(), TH, plain(R, "e")), follow)
    assert row.origin == "follow-up setting" and row.paper == follow
    assert list(tally([row], follow)) == ["follow-up setting"] and tally([row]) == {}
    ours = assign_paper(claim_row("s", STATEMENT, _data(extension=True), TH, plain(R, "e")), follow)
    assert ours.origin == "extension"
    stored = {**row.to_dict(), "origin": "paper setting"}  # an earlier release's record
    with pytest.raises(ValueError, match="follow-up setting"):
        Claim(**stored)
    assert claim_from_record(stored).origin == "follow-up setting"


def test_a_claim_under_unstated_conditions_is_shown_by_an_instance_never_refuted_by_one() -> None:
    """Issue 40 (2): 'residuals prevent collapse under realistic conditions' (conditions not stated) was
    refuted in random SANs that may lie outside them; now such a refutation is 'not testable' there."""
    from rankcollapse.experiments.kit.combine import unstated_conditions

    refuted = Judgement(N, "the gap falls x0.69 per layer", "the data contradict the statement: falls",
                        "measured otherwise", 6)
    j = unstated_conditions(refuted, "'under realistic conditions'", "random SANs")
    assert j.verdict is I and j.cause_kind == "not testable"
    assert "random SANs" in j.cause and "falls" in j.cause
    shown = Judgement(R, "kept", n=6)
    assert unstated_conditions(shown, "'under realistic conditions'", "random SANs") == shown
