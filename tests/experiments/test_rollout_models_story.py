"""Story ``rollout_models``: MPNet beside MiniLM and SmolLM2, the opt-in arm of ``make models-extra``, and
the first-token concentration by depth beside the sink measures, read from the same runs.

The depth table is checked against closed forms the rollout must satisfy whatever the weights: at t = 0
``P(0) = I`` (share 1/n), and at t = 1 ``P(1) = lam I + (1 - lam) mean_h A_h(1)``, so its first-token share
is ``lam / n + (1 - lam) first_token_attention(1)``, the sink measure of the same layer.
"""

from __future__ import annotations

import numpy as np
import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.engine.config import load_arms
from rankcollapse.experiments.engine.store import RunStore
from rankcollapse.experiments.stories import all_stories, load_experiments
from rankcollapse.experiments.stories.rollout_models import (
    DEPTH_FIGURE,
    FIGURE,
    causal_own_mask,
    depth_table,
    headlines,
)
from rankcollapse.models import bundled
from rankcollapse.pipeline.reproduce import refuse_missing_extras

from .story_run import run_story
from .test_reproduce_pipeline import PINNED

STORY = "rollout_models"
EXTRA = f"{STORY}.extra"


def _arm(profile: str, arm: str, only: list[str] | None = None):
    (exp,) = [e for e in load_experiments(profile, only or [STORY]) if e.arm == arm]
    return exp


def test_mpnet_is_measured_beside_minilm_and_smollm2_in_quick_and_full_but_tiny_stays_random() -> None:
    for profile in ("quick", "full"):
        assert _arm(profile, "models").grid["model"] == ["minilm", "mpnet", "smollm2"]
        assert _arm(profile, "models").base["stand_in_for"]
    assert _arm("tiny", "models").grid["model"] == ["tiny:bert", "tiny:gpt2"]


def test_the_opt_in_arm_never_runs_in_a_default_call_only_under_paper_or_named() -> None:
    for profile in ("quick", "full", "tiny"):
        for only in (None, [STORY]):
            exp = next(e for e in load_experiments(profile, only) if e.name == EXTRA)
            assert exp.opt_in and exp.runs() == [], (profile, only)
    for profile, only in (("paper", None), ("paper", [STORY]), ("quick", [EXTRA]), ("full", [EXTRA])):
        exp = next(e for e in load_experiments(profile, only) if e.name == EXTRA)
        assert {r.params["model"] for r in exp.runs()} == set(bundled.EXTRA), (profile, only)
    assert _arm("tiny", "extra", [EXTRA]).runs() == []  # tiny stays tiny: skipped even when named


def test_an_opt_in_flag_that_is_not_a_boolean_is_one_line(tmp_path) -> None:
    found = all_stories()[STORY]
    text = found.config.read_text().replace("opt_in: true", "opt_in: yes please")
    path = tmp_path / f"{STORY}.yaml"
    path.write_text(text)
    with pytest.raises(RankCollapseError, match="opt_in must be true or false"):
        load_arms(path, "quick", STORY, found.story.tasks)


def test_a_run_of_an_uninstalled_extra_is_refused_before_anything_runs(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(bundled, "installed", lambda name: name not in bundled.EXTRA)
    store = RunStore(tmp_path)
    default = [s for e in load_experiments("full") for s in e.runs()]
    refuse_missing_extras(default, store)  # a default call: nothing to refuse
    named = [s for e in load_experiments("quick", [EXTRA]) for s in e.runs()]
    with pytest.raises(RankCollapseError, match="make models-extra") as err:
        refuse_missing_extras(named, store)
    assert "\n" not in str(err.value) and EXTRA in str(err.value)
    out = tmp_path / "out"
    code = main(["reproduce", "--quick", "--only", EXTRA, "--workers", "1", "--no-progress",
                 "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "make models-extra" in lines[0]
    assert not (out / "runs").exists() or not any((out / "runs").rglob("*.csv"))


def test_causal_own_masks_are_the_lower_triangular_ones() -> None:
    assert causal_own_mask("causal", 64) and causal_own_mask("causal-window:w=3", 64)
    assert not causal_own_mask("complete", 64) and not causal_own_mask("window:w=3", 64)


@pytest.fixture(scope="module")
def tiny():
    return run_story(STORY, "tiny")


def test_tiny_verdicts_hold_and_the_depth_figure_is_drawn(tiny) -> None:
    _, rows, figs = tiny
    assert {c.id: c.verdict for c in rows} == PINNED[STORY]
    assert [f.name for f in figs] == [FIGURE, DEPTH_FIGURE]
    first = [c for c in rows if c.key == "first_token_models"]
    assert [c.figure for c in first] == [DEPTH_FIGURE]


def test_the_depth_table_puts_each_layers_sinks_beside_the_rollout_of_the_same_attention(tiny) -> None:
    sd, _, _ = tiny
    table = depth_table(sd)
    tokens = int(sd.arm("models").exp.base["tokens"])
    assert len(set(table["model"])) == 2
    for _, g in table.groupby("model"):
        g = g.set_index("layer")
        assert list(g.index) == list(range(len(g)))
        assert np.isnan(g.loc[0, "sink_rate"]) and np.isnan(g.loc[0, "first_token_attention"])
        assert g.loc[1:, "sink_rate"].between(0, 1).all()
        for lam in (0.0, 0.5, 0.9):
            share = g[f"first_token_share_lam{lam:g}"]
            assert share.loc[0] == pytest.approx(1 / tokens, abs=1e-12)  # P(0) = I
            expected = lam / tokens + (1 - lam) * g.loc[1, "first_token_attention"]
            assert share.loc[1] == pytest.approx(expected, abs=1e-6)  # P(1) from A(1), the same layer


def test_the_report_shows_every_model_by_depth_beside_its_sinks_in_two_headlines(tiny) -> None:
    sd, _, _ = tiny
    lines = headlines(sd)
    assert len(lines) == 2  # the report shows a follow-up's first two headlines
    depth = depth_table(sd)
    for model, g in depth.groupby("model"):
        short = model.split(" (")[0]
        assert short in lines[0] and short in lines[1]
        last = g.set_index("layer").loc[int(g["layer"].max())]
        assert f"t = {int(last.name)}: {last['first_token_share_lam0']:.2g} / " in lines[1]


def test_the_list_says_how_to_run_an_opt_in_arm(capsys) -> None:
    assert main(["reproduce", "--list", "--only", STORY]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "opt-in: --only rollout_models.extra or --profile paper" in lines[EXTRA]
    assert "opt-in" not in lines[f"{STORY}.models"] and " 3 runs" in lines[f"{STORY}.models"]
