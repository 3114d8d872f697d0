"""Story ``key_bias`` (Gu et al., ICLR 2025, second-hand: the first token as a key bias) and its rule,
``kit.rules.heads.set_apart``, on planted data whose answer is known: every verdict the rule gives, the
split of the heads read from the YAML's threshold, the unit (excerpts of one pretrained network; networks
of a random init), and a story run on planted rows whose figure shows the very numbers the rule decides
from.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.experiments.contract.story import Data, StoryData
from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Origin
from rankcollapse.experiments.engine.config import load_arms
from rankcollapse.experiments.kit.claims import judged
from rankcollapse.experiments.kit.rules.heads import HeadValues, set_apart, split_units
from rankcollapse.experiments.kit.thresholds import Thresholds
from rankcollapse.experiments.stories import all_stories
from rankcollapse.experiments.stories.key_bias import (
    BY,
    COS,
    FIGURE,
    NORM,
    PAPER,
    STATISTICS,
    figures,
    head_table,
    headlines,
    networks_of,
    summary_table,
    with_statistics,
)

from .story_run import run_story

STORY = "key_bias"
TH = Thresholds.of("test", {"min_samples": 4, "sink_threshold": 0.3}, {"sink_threshold": [0.2, 0.5]})
SINKS, OTHERS = 3, 5


def planted(n: int, sink: float, other: float, noise: float = 0.05, *, seed: int = 0, by_sink: float = 0.6,
            by_other: float = 0.1) -> HeadValues:
    """``n`` samples of SINKS heads whose ``by`` is ``by_sink`` and whose value is ``sink`` (+ noise), and
    OTHERS heads at ``by_other`` and ``other``."""
    rng = np.random.default_rng(seed)
    by = np.concatenate([np.full((n, SINKS), by_sink), np.full((n, OTHERS), by_other)], axis=1)
    value = np.concatenate([sink + noise * rng.standard_normal((n, SINKS)),
                            other + noise * rng.standard_normal((n, OTHERS))], axis=1)
    return HeadValues(by, value)


def judge(networks, unit: str = "samples", below: bool = False, th: Thresholds = TH):
    return set_apart(networks, unit, th, what="gap", group="sink heads", split="sink_threshold", below=below)


def test_set_apart_pins_every_verdict_on_planted_heads() -> None:
    # above 0 and above the others, for sure
    j = judge([planted(16, 0.5, 0.1)])
    assert j.verdict == REPRODUCED and j.n == 16 and j.unit == "samples"
    assert "3 of 8 heads are sink heads (sink_threshold = 0.3)" in j.evidence
    assert {m.tests for m in j.margins} == {2}  # Bonferroni over the two comparisons
    # below 0: the first comparison fails
    j = judge([planted(16, -0.3, 0.1)])
    assert j.verdict == NOT_REPRODUCED and j.decided_by.startswith("sink heads above 0")
    # above 0 but below the other heads: the second fails, the first holds
    j = judge([planted(16, 0.3, 0.6)])
    assert j.verdict == NOT_REPRODUCED and j.decided_by.startswith("sink heads above the others")
    assert j.cause_kind == "measured otherwise"
    # a small gap in much noise: open, with the n that would decide it
    j = judge([planted(8, 0.05, 0.0, noise=0.5)])
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small"
    assert "would decide it" in j.cause and j.undecided
    # too few samples
    j = judge([planted(3, 0.5, 0.1)])
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "sample too small" and "min_samples = 4" in j.cause
    # no sink head, or no other head: not testable
    j = judge([planted(16, 0.5, 0.1, by_sink=0.1)])
    assert j.verdict == INCONCLUSIVE and j.cause_kind == "not testable" and "no sink heads" in j.cause
    j = judge([planted(16, 0.5, 0.1, by_other=0.6)])
    assert j.cause_kind == "not testable" and "every head is one of them" in j.cause


def test_the_stated_direction_below_zero_mirrors_it() -> None:
    assert judge([planted(16, -0.5, -0.1)], below=True).verdict == REPRODUCED
    assert judge([planted(16, 0.2, 0.5)], below=True).verdict == NOT_REPRODUCED  # above 0 (and below others)
    j = judge([planted(16, -0.2, -0.5)], below=True)  # below 0 but above the others
    assert j.verdict == NOT_REPRODUCED and j.decided_by.startswith("sink heads below the others")


def test_a_sink_head_lies_strictly_above_the_threshold_read_from_the_yaml() -> None:
    at = planted(16, 0.5, 0.1, by_sink=0.3)  # exactly at the threshold: not a sink head
    assert not at.group(0.3).any() and judge([at]).cause_kind == "not testable"
    heads = planted(16, 0.5, 0.1, by_sink=0.4)
    j = judged(lambda t: judge([heads], th=t), TH)
    assert {"sink_threshold", "min_samples"} <= j.used and j.verdict == REPRODUCED
    assert [(name, value, v) for name, value, v in j.flips] == [("sink_threshold", 0.5, INCONCLUSIVE)]


def test_a_random_init_is_judged_over_its_networks() -> None:
    nets = [planted(4, 0.5, 0.1, seed=k) for k in range(3)]
    j = judge(nets, unit="networks")
    assert j.verdict == REPRODUCED and j.n == 3 and j.unit == "networks"
    sp = split_units(nets, "networks", 0.3)
    assert sp.inside == pytest.approx([v.value[:, :SINKS].mean() for v in nets])  # each network's mean
    j = judge([*nets, planted(4, 0.5, 0.1, by_sink=0.1, seed=9)], unit="networks")
    assert "1 network(s) without both kinds of head left out" in j.evidence and j.n == 3
    one = judge(nets[:1], unit="networks")
    assert one.verdict == INCONCLUSIVE and "fewer than 2" in one.cause


# ---- the story on planted rows: verdicts, the figure's numbers are the rule's ------------------------------
def _rows(run_id: str, seed: int, samples: int = 8, layers: int = 2, heads: int = 4) -> list[dict]:
    """kind = head rows of one run of a planted pretrained model: heads 0 and 1 of each layer are sinks (first
    token attention 0.6) whose queries point at k_0 (cos 0.7 against 0.1) and whose k_0 is short (0.5 against
    1.0); heads 2 and 3 are not (0.1; cos 0.3 against 0.1; k_0 as long as the others)."""
    rng = np.random.default_rng(seed)
    out = []
    for s in range(samples):
        for t in range(1, layers + 1):
            for h in range(heads):
                sink = h < 2
                out.append({
                    "run_id": run_id, "kind": "head", "sample": s, "layer": t, "head": h, "samples": samples,
                    "first_token_attention": (0.6 if sink else 0.1) + 0.02 * rng.standard_normal(),
                    "first_key_cos": (0.7 if sink else 0.3) + 0.05 * rng.standard_normal(),
                    "key_cos": 0.1 + 0.02 * rng.standard_normal(),
                    "first_key_norm": (0.5 if sink else 1.0) * math.exp(0.05 * rng.standard_normal()),
                    "key_norm": 1.0, "query_norm": 2.0, "dtype": "float32", "own_mask": "causal",
                    "model_label": "planted (pretrained)", "model_name": "planted", "model_kind": "bundled",
                    "pretrained": True, "stand_in_for": "the pretrained language models Gu et al. measured",
                })
    return out


@pytest.fixture(scope="module")
def planted_story() -> StoryData:
    found = all_stories()[STORY]
    (exp,) = load_arms(found.config, "quick", STORY, found.story.tasks)
    table = pd.DataFrame(_rows("r0", 0) + _rows("r1", 1))
    index = pd.DataFrame([{"run_id": r, "experiment": exp.name, "status": "ok", "error": "", "seed": k}
                          for k, r in enumerate(("r0", "r1"))])
    return StoryData(STORY, {"models": Data(exp, table, index)}, dict(exp.verdict), dict(exp.ranges))


def test_the_story_judges_planted_sinks_as_key_biases_over_the_excerpts(planted_story) -> None:
    story = all_stories()[STORY].story
    assert story.paper == PAPER == "2410.10781"  # counted with Gu et al.'s paper, never the NeurIPS one
    rows = story.claims(planted_story)
    assert {c.key: c.verdict for c in rows} == {"key_bias_cos": "as stated (stand-in)",
                                                "key_bias_norm": "as stated (stand-in)"}
    for c in rows:
        assert c.origin == Origin.STAND_IN.value and c.unit == "samples" and c.n == 16  # 2 seeds x 8 excerpts
        assert "[2nd-hand]" in c.source and c.figure == FIGURE
        assert "4 of 8 heads are sink heads" in c.evidence


def test_the_figure_shows_the_numbers_the_rule_decides_from(planted_story) -> None:
    (spec,) = figures(planted_story)
    assert spec.name == FIGURE and "[2nd-hand]" not in spec.caption and "second-hand" in spec.caption
    table = head_table(planted_story)
    pd.testing.assert_frame_equal(spec.data, table)
    assert len(table) == 8 and set(table.columns) >= {"model", "layer", "head", BY, COS, NORM}
    th = Thresholds.of(STORY, planted_story.verdict, planted_story.ranges)
    axes = spec.figure.axes
    for r, column in enumerate(STATISTICS):
        ax = axes[r]  # one model: a column of panels, one row per statistic
        frame = with_statistics(planted_story.arm("models").table)
        nets, unit = networks_of(frame, column)
        j = set_apart(nets, unit, th, what="x", group="sink heads", split="sink_threshold",
                      below=STATISTICS[column])
        rule = next(m for m in j.margins if m.what.endswith("x, sink heads"))
        bars = [c for c in ax.containers if c.get_label().startswith("mean of the sink heads")]
        (bar,) = bars
        assert bar.lines[0].get_ydata()[0] == pytest.approx(rule.value, rel=1e-12)
        (segments,) = bar.lines[2]
        (seg,) = segments.get_segments()
        assert (seg[0][1], seg[1][1]) == pytest.approx(rule.bounds(), rel=1e-12)
        # the scatter: one point per head at its means over the excerpts
        pts = [ln for ln in ax.lines if ln.get_label().startswith("sink head")]
        assert sorted(pts[0].get_ydata()) == pytest.approx(sorted(table.loc[table[BY] > 0.3, column]))
    spec.figure.clf()


def test_headlines_give_each_model_its_sink_and_other_heads(planted_story) -> None:
    table = summary_table(planted_story)
    assert table.loc[0, "sink_heads"] == 4 and table.loc[0, "heads"] == 8 and table.loc[0, "units"] == 16
    assert table.loc[0, f"{COS}_sink"] == pytest.approx(0.6, abs=0.05)
    assert table.loc[0, f"{NORM}_sink"] == pytest.approx(math.log(0.5), abs=0.05)
    lines = headlines(planted_story)
    assert len(lines) == 2 and all("planted" in x and "4 of 8 heads sinks" in x for x in lines)


def test_random_inits_have_no_sink_head_and_the_rows_say_so() -> None:
    """The tiny profile: near-uniform attention at initialisation, every head's first_token_attention near
    H_16 / 16 = 0.21: no sink head, so the statements are not testable there (a random init, its networks)."""
    _, rows, figs = run_story(STORY, "tiny")
    assert {c.verdict for c in rows} == {"inconclusive"} and len(rows) == 4
    assert all(c.cause_kind == "not testable" and "0 of 64 heads are sink heads" in c.cause for c in rows)
    assert [f.name for f in figs] == [FIGURE]
    for f in figs:
        f.figure.clf()
