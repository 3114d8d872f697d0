"""reproduce end to end on the tiny profile: every story (--only each), figures, claims, report.

Verdicts are checked two ways: pinned where the tiny runs leave no doubt (theorems, closed forms, in
``test_stories``), and re-derived from the written ``runs.csv`` / ``index.csv`` by each story's rules
(the claims table is what the rules say about the stored data, nothing else).
"""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest

from rankcollapse.cli.main import main
from rankcollapse.experiments.engine.config import PROFILES
from rankcollapse.experiments.engine.store import collect_index, collect_table
from rankcollapse.experiments.stories import ORDER, all_stories, load_experiments
from rankcollapse.pipeline import reproduce
from rankcollapse.pipeline.reproduce import _analyse

STORIES = list(ORDER)
FAST = ["theorem1", "theorem2", "fig1_fig5"]  # simulations and closed forms: seconds


@pytest.fixture(scope="module")
def tiny_all(tmp_path_factory):
    """The whole tiny profile from scratch, once for the module (in-process: one transformers import)."""
    out = tmp_path_factory.mktemp("reproduce_tiny")
    return reproduce(out, profile="tiny", workers=1, progress=False)


def test_every_story_config_loads_in_every_profile_with_seeds():
    for profile in PROFILES:
        exps = load_experiments(profile)
        assert {e.story for e in exps} == set(STORIES)
        for exp in exps:
            assert all(r.seed is not None for r in exp.runs()), (
                f"{exp.name}: every run needs an explicit seed"
            )
    tiny = sum(len(e.runs()) for e in load_experiments("tiny"))
    full = sum(len(e.runs()) for e in load_experiments("full"))
    assert tiny < full


def rederived(out, profile: str, names: list[str], tmp) -> dict[str, str]:
    """claim id -> verdict, judged again by each story's rules from the tables stored in ``out``."""
    claims, _, _ = _analyse(
        load_experiments(profile, names), collect_table(out), collect_index(out), tmp, all_stories()
    )
    return {c.id: c.verdict for c in claims}


def test_fast_stories_end_to_end_on_the_tiny_profile(tmp_path):
    result = reproduce(tmp_path / "out", profile="tiny", only=FAST, workers=1, progress=False)
    assert result.sweep.failed == 0, result.sweep.failures
    assert {f.experiment for f in result.figures} == set(FAST)
    for fig in result.figures:
        assert fig.png.stat().st_size > 1000 and fig.pdf.stat().st_size > 1000
        assert not pd.read_csv(fig.csv).empty
    assert {c.story for c in result.claims} == set(FAST)
    page = (tmp_path / "out" / "report.html").read_text()
    assert len(re.findall(r"<tr id='[^']+'>", page)) == len(result.claims)
    got = {c.id: c.verdict for c in result.claims}
    assert rederived(tmp_path / "out", "tiny", FAST, tmp_path) == got
    stored = pd.read_csv(tmp_path / "out" / "claims.csv")
    assert dict(zip(stored["id"], stored["verdict"], strict=True)) == got
    assert {"as_plotted", "mechanism", "verdict", "origin"} <= set(stored.columns)
    frame = result.to_frame()
    assert list(frame.columns) == list(stored.columns) and list(frame["id"]) == list(stored["id"])


@pytest.mark.slow
@pytest.mark.parametrize("name", STORIES)
def test_only_each_story_gives_its_figures_and_verdicts(tiny_all, tmp_path, name):
    shutil.copytree(tiny_all.out_dir / "runs", tmp_path / "runs")  # resume from the module's runs
    result = reproduce(tmp_path, profile="tiny", only=[name], workers=1, progress=False)
    assert result.sweep.failed == 0, result.sweep.failures
    assert result.sweep.skipped == result.sweep.total  # resumed: the module fixture ran them all
    assert result.figures and result.claims, name
    assert all(c.story == name and c.evidence and c.rule and c.conditions for c in result.claims)
    whole = {c.id: c.verdict for c in tiny_all.claims if c.story == name}
    assert {c.id: c.verdict for c in result.claims} == whole  # --only judges as the whole run does


@pytest.mark.slow
def test_full_tiny_report_has_a_verdict_for_every_claim_and_is_self_contained(tiny_all, tmp_path):
    result, out = tiny_all, tiny_all.out_dir
    assert result.sweep.failed == 0 and result.sweep.finished == result.sweep.total
    claims = json.loads((out / "claims.json").read_text())
    assert [c["story"] for c in claims] == sorted(
        (c["story"] for c in claims), key=STORIES.index
    )  # paper order
    page = (out / "report.html").read_text()
    assert len(re.findall(r"<tr id='[^']+'>", page)) == len(claims)
    assert rederived(out, "tiny", STORIES, tmp_path) == {c["id"]: c["verdict"] for c in claims}
    assert page.count("data:image/png;base64,") == len(result.figures)
    assert not re.search(r"""(src|href)=["']https?://""", page), "report must open offline"
    assert "<link" not in page and "<script src" not in page
    table = pd.read_csv(out / "runs.csv")
    assert {"run_id", "experiment", "task", "seed", "layer"} <= set(table.columns)
    assert not table.duplicated(["run_id", "row"]).any()


def test_cli_reproduce_writes_report_and_unknown_experiment_is_one_line_exit_2(tmp_path, capsys):
    code = main(
        [
            "reproduce",
            "--profile",
            "tiny",
            "--only",
            "theorem2.hemisphere",
            "--workers",
            "1",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    assert (tmp_path / "report.html").exists()
    printed = capsys.readouterr().out
    assert "report:" in printed and "claims (extension): 1 reproduced" in printed
    code = main(["reproduce", "--profile", "tiny", "--only", "fig99", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "fig99" in err and "allowed" in err
    assert main(["reproduce", "--quick", "--full", "--out", str(tmp_path)]) == 2
