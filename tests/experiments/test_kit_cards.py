"""Claim cards (``kit.cards``): a card judged equals the same claim judged in Python, a bad card is one line
(exit 2 from the CLI), and a card's rows join its own paper's counters, never the NeurIPS paper's."""

from __future__ import annotations

import re

import pytest
import yaml

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments import stories
from rankcollapse.experiments.contract.verdicts import MAIN_PAPER, tally
from rankcollapse.experiments.kit import cards
from rankcollapse.experiments.kit.cards import RULES, Card, card_rows, load_cards
from rankcollapse.pipeline.reproduce import ReproduceConfig, reproduce

#: residual_rollout's no_residual_collapses (kit.rules.san_collapse on the gap at lam = 0) as a card.
NO_RESIDUAL = {
    "key": "no_residual_collapses",
    "statement": "Without the residual the cumulative context converges to the first token exponentially",
    "source": "ours (Wu et al. 2025 re-judged)",
    "source_level": "text, via a structured summary",
    "paper": "2602.16837",
    "origin": "extension",
    "arm": "residual_rollout.paper",
    "quantity": "first_token_gap_max",
    "condition": {"rollout_residual": 0.0},
    "rule": "collapsing",
    "thresholds": {"min_samples": 4, "rate_tol": 0.02, "keep_min": 0.05},
    "ranges": {"rate_tol": [0.01, 0.05], "keep_min": [0.01, 0.2]},
}


SLOW = pytest.mark.slow  # the tests that run the tiny profile of an arm


@pytest.fixture(scope="module")
def rollout_tiny(tmp_path_factory):
    """The tiny profile of residual_rollout's paper arm (24 runs), judged: (result, story data)."""
    out = tmp_path_factory.mktemp("cards")
    result = reproduce(ReproduceConfig(out, profile="tiny", only=["residual_rollout.paper"], workers=1,
                                       progress=False))
    return result


def numbers(text: str) -> list[str]:
    return re.findall(r"[-+]?\d[\d.e+-]*", text)


def _claims_data(result):
    """residual_rollout's StoryData from the fixture's folder, sliced as the pipeline slices it."""
    from rankcollapse.experiments.contract.story import StoryData, slice_data
    from rankcollapse.pipeline.reproduce import _tables

    exps = stories.load_experiments("tiny", only=["residual_rollout.paper"])
    table, index = _tables(result.out_dir, None, exps)
    arms = {e.arm: slice_data(e, table, index) for e in exps}
    return StoryData("residual_rollout", arms, dict(exps[0].verdict), dict(exps[0].ranges))


@SLOW
def test_a_card_judged_equals_the_same_claim_judged_in_python(rollout_tiny):
    python = [c for c in rollout_tiny.claims if c.key == "no_residual_collapses"]
    assert len(python) == 1
    sd = _claims_data(rollout_tiny)
    (row,) = card_rows(Card.of(NO_RESIDUAL, "no_residual"), sd)
    for name in ("verdict", "as_plotted", "mechanism", "n", "unit", "origin", "undecided", "needed_n",
                 "threshold_sensitive", "key"):
        assert getattr(row, name) == getattr(python[0], name), name
    unlabelled = {"interval": python[0].interval.replace("lam=0, ", ""),  # the same numbers, labelled
                  "evidence": python[0].evidence.split(" — ", 1)[1].replace("lam=0, ", "")}  # otherwise
    assert numbers(row.interval) == numbers(unlabelled["interval"])
    assert numbers(row.evidence.split(" — ", 1)[1]) == numbers(unlabelled["evidence"])


@SLOW
@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_runs_on_the_thresholds_it_declares_it_reads(rollout_tiny, rule):
    sd = _claims_data(rollout_tiny)
    th = {name: 0.05 for name in RULES[rule].reads} | {"min_samples": 4, "exponent": -1.0}
    th = {k: v for k, v in th.items() if k in RULES[rule].reads}
    card = Card.of({**NO_RESIDUAL, "rule": rule, "thresholds": th, "ranges": {}}, "probe")
    (row,) = card_rows(card, sd)
    assert row.n == 4


@SLOW
def test_the_package_cards_join_their_own_papers_counters_never_the_neurips_papers(tmp_path):
    result = reproduce(ReproduceConfig(tmp_path, profile="tiny", only=["residual_rollout.alibi"], workers=1,
                                       progress=False))
    (card,) = [c for c in load_cards() if c.arm == "residual_rollout.alibi"]
    rows = [c for c in result.claims if c.key == card.key]
    assert len(rows) == 1 and rows[0].paper == card.paper != MAIN_PAPER
    assert rows[0].source.endswith(f"[{card.source_level}]")
    assert sum(sum(v.values()) for o in tally(result.claims).values() for v in o.values()) == 0
    assert sum(sum(v.values()) for o in tally(result.claims, card.paper).values() for v in o.values()) > 0
    for c in load_cards():
        assert c.paper != MAIN_PAPER and c.statement_of().paper == c.paper


def test_every_package_card_names_a_story_arm_it_has():
    found = stories.all_stories()
    for card in load_cards():
        assert card.key in {s.key for s in found[card.story].story.statements}


BAD = [
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"quantity": "mu_rell"}, "unknown quantity 'mu_rell'"),
    ({"rule": "collapses_fast"}, "unknown rule 'collapses_fast'"),
    ({"source_level": "hearsay"}, "unknown source_level 'hearsay'"),
    ({"paper": MAIN_PAPER}, "is the NeurIPS paper"),
    ({"thresholds": {"min_samples": 4}}, "reads thresholds rate_tol, keep_min"),
    ({"ranges": {"rate_tol": [0.03, 0.05]}}, "outside its range"),
    ({"arm": "residual_rollout"}, "must be <story>.<arm>"),
]


@pytest.mark.parametrize(("change", "words"), BAD)
def test_a_bad_card_is_one_line_naming_the_card(change, words):
    with pytest.raises(RankCollapseError) as err:
        Card.of({**NO_RESIDUAL, **change}, "bad_card")
    text = str(err.value)
    assert len(text.splitlines()) == 1 and "bad_card" in text and words in text


def test_a_missing_key_is_one_line():
    raw = {k: v for k, v in NO_RESIDUAL.items() if k != "quantity"}
    with pytest.raises(RankCollapseError, match=r"card c: missing quantity$"):
        Card.of(raw, "c")


@pytest.mark.parametrize(("change", "words"), [({"arm": "residual_rollout.nope"}, "has no arm 'nope'"),
                                               ({"key": "mine"}, None), ({}, "declared twice"), *BAD[:3]])
def test_a_bad_card_in_the_cards_folder_is_one_line_and_exit_2_from_the_cli(tmp_path, monkeypatch, capsys,
                                                                          change, words):
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "mine.yaml").write_text(yaml.safe_dump({**NO_RESIDUAL, **change}))
    monkeypatch.setattr(cards, "CARDS_DIR", folder)
    stories.all_stories.cache_clear()
    try:
        code = main(["reproduce", "--list"])
    finally:
        stories.all_stories.cache_clear()
    err = capsys.readouterr().err.strip()
    if words is None:  # a good card: listed, nothing refused
        assert code == 0 and not err
        return
    assert code == 2 and len(err.splitlines()) == 1 and "card mine" in err and words in err
