"""``rankcollapse mask``'s entry point: one query validating on construction, the facts of the mask or of
the schedule it names (the same objects the masks package gives directly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.composed import analyze_schedule
from rankcollapse.masks.entry import MaskQuery, mask_facts
from rankcollapse.masks.schedule import parse_schedule


def test_one_mask_gives_the_mask_analysis_and_a_schedule_the_composed_one() -> None:
    one = mask_facts(MaskQuery(spec="causal-window:w=4", tokens=33))
    assert one.schedule is None
    assert one.facts == parse_mask("causal-window:w=4").analysis(33).to_dict(full=None)
    assert one.facts["radius"] == 8  # ceil((33 - 1) / 4): hops of at most 4 positions back to the first token
    many = mask_facts(MaskQuery(spec="causal-window:w=3;causal", tokens=16, layers=4))
    expected = analyze_schedule(parse_schedule("causal-window:w=3;causal", 4), 16).to_dict(full=None)
    assert many.schedule and many.facts == expected


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"spec": "causal"}, "missing tokens"),
        ({"tokens": 8}, "missing spec"),
        ({"spec": "causal", "tokens": 8, "hf_config": {"model_type": "gpt2"}}, "not both"),
        ({"spec": "causal", "tokens": 8, "layers": 0}, "layers must be >= 1"),
        ({"spec": "causal", "tokens": 8, "plot": ""}, "plot '' is empty"),
        ({"spec": "causal;complete", "tokens": 8, "plot": "m.png"}, "plot does not apply to a schedule"),
        ({"spec": "causal", "tokens": 8, "layers": 2, "plot": "m.png"}, "plot does not apply to a schedule"),
    ],
)
def test_a_bad_query_is_one_line(fields: dict, words: str) -> None:
    with pytest.raises(RankCollapseError) as caught:
        MaskQuery(**fields)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_plot_into_a_missing_folder_or_onto_a_folder_is_refused_before_drawing(tmp_path: Path) -> None:
    with pytest.raises(RankCollapseError, match="does not exist"):
        MaskQuery(spec="causal", tokens=8, plot=tmp_path / "nowhere" / "m.png")
    with pytest.raises(RankCollapseError, match="is a directory"):
        MaskQuery(spec="causal", tokens=8, plot=tmp_path)
    found = mask_facts(MaskQuery(spec="causal", tokens=8, plot=tmp_path / "m.png"))
    assert found.plot == tmp_path / "m.png" and found.plot.stat().st_size > 0 and found.facts["plot"]
