"""`rankcollapse mask --hasse` and ``MaskQuery(hasse=True)``: where the composed flow ends up, added to the
facts of a mask or a schedule only when asked; a bad value is one line."""

from __future__ import annotations

import json

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.entry import MaskQuery, mask_facts


def test_the_hasse_key_appears_only_when_asked() -> None:
    plain = mask_facts(MaskQuery(spec="window:w=2", tokens=9)).facts
    assert "hasse" not in plain
    got = mask_facts(MaskQuery(spec="window:w=2", tokens=9, hasse=True)).facts["hasse"]
    assert got["depth"] == 4 and got["components"] == 1 and got["pairs_by_depth"][-1] == 81
    assert got["pairs_by_depth"] == sorted(got["pairs_by_depth"])  # the flow only grows


def test_a_schedule_reports_its_period_repeated_without_end() -> None:
    """At --layers 2 the product of the Gemma-like schedule has no global layer yet; its limit does."""
    q = MaskQuery(spec="causal-window:w=3*5;causal", tokens=64, layers=2, hasse=True)
    got = mask_facts(q).facts["hasse"]
    assert got["depth"] == 6 and got["limit_pairs"] == 64 * 65 // 2 and got["partial_order_on_tokens"]


def test_cli_prints_the_limit_in_words_and_json(capsys) -> None:
    assert main(["mask", "butterfly", "--tokens", "12", "--hasse"]) == 0
    out = capsys.readouterr().out
    assert "stops changing after:     1 layer (" in out and "12 covering edges" in out
    assert main(["mask", "block-two-stream:size=2", "--tokens", "8", "--hasse", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["hasse"]["components"] == 4 and facts["hasse"]["is_dag"]


def test_a_bad_hasse_value_is_one_line() -> None:
    with pytest.raises(RankCollapseError, match="hasse="):
        MaskQuery(spec="causal", tokens=4, hasse="yes")  # type: ignore[arg-type]


def test_an_odd_length_for_a_stream_mask_is_exit_2(capsys) -> None:
    assert main(["mask", "butterfly", "--tokens", "10", "--hasse"]) == 2
    err = capsys.readouterr().err
    assert "not a multiple of 3" in err and err.count("\n") == 1
