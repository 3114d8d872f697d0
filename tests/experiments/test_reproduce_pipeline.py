"""reproduce end to end on the tiny profile: every story (--only each), figures, claims, report.

Verdicts are checked two ways: pinned where the tiny runs leave no doubt (theorems, closed forms),
and re-derived from the written ``runs.csv`` / ``index.csv`` by each story's rules (the claims
table is what the rules say about the stored data, nothing else).
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
from rankcollapse.experiments.engine.verdicts import NOT_REPRODUCED, REPRODUCED, judge, slice_data
from rankcollapse.experiments.reproduce import reproduce
from rankcollapse.experiments.stories import all_stories, load_experiments

EXPERIMENTS = [e.name for e in load_experiments("tiny")]
SIMULATIONS = [e.name for e in load_experiments("tiny") if e.task == "simulate"]


@pytest.fixture(scope="module")
def tiny_all(tmp_path_factory):
    """The whole tiny profile from scratch, once for the module (in-process: one transformers import)."""
    out = tmp_path_factory.mktemp("reproduce_tiny")
    return reproduce(out, profile="tiny", workers=1, progress=False)


def test_every_experiment_config_loads_in_every_profile_with_seeds():
    for profile in PROFILES:
        exps = load_experiments(profile)
        assert {e.name for e in exps} == set(EXPERIMENTS)
        for exp in exps:
            runs = exp.runs()
            assert runs, exp.name
            assert all(r.seed is not None for r in runs), f"{exp.name}: every run needs an explicit seed"
    tiny = sum(len(e.runs()) for e in load_experiments("tiny"))
    full = sum(len(e.runs()) for e in load_experiments("full"))
    assert tiny < full


def _check_claims_and_figures(result, names):
    assert result.sweep.failed == 0, result.sweep.failures
    assert {f.experiment for f in result.figures} == set(names)
    for fig in result.figures:
        assert fig.png.stat().st_size > 1000 and fig.pdf.stat().st_size > 1000
        assert not pd.read_csv(fig.csv).empty
    assert {c.experiment for c in result.claims} == set(names)
    assert all(c.evidence and c.rule and c.conditions and c.source for c in result.claims)
    figures = {f.name for f in result.figures}
    assert all(c.figure in figures for c in result.claims if c.figure)


def rederived(out, profile: str, names: list[str]) -> dict[str, str]:
    """claim id -> verdict, computed again by each story's rules from the runs stored in ``out``."""
    table, index = collect_table(out), collect_index(out)
    stories = all_stories()
    verdicts = {}
    for exp in load_experiments(profile, names):
        for claim in judge(stories[exp.name].story.claims, slice_data(exp, table, index)):
            verdicts[claim.id] = claim.verdict
    return verdicts


#: Verdicts the tiny simulations cannot miss: theorems at their hypotheses, and our measured
#: disagreement with the paper (random weights + sphere normalisation still collapse).
PINNED_TINY = {
    "thm1.collapse": REPRODUCED,
    "thm1.no_center": REPRODUCED,
    "ln.orthogonal": REPRODUCED,
    "fig2.pure_collapse": REPRODUCED,
    "fig2.ln_random[causal]": NOT_REPRODUCED,
    "fig3.global": REPRODUCED,
}


def test_simulation_experiments_end_to_end_on_the_tiny_profile(tmp_path):
    result = reproduce(tmp_path, profile="tiny", only=SIMULATIONS, workers=1, progress=False)
    _check_claims_and_figures(result, SIMULATIONS)
    assert all(c.seeds == [0] for c in result.claims if c.seeds)
    page = (tmp_path / "report.html").read_text()
    assert len(re.findall(r"<tr id='[^']+'>", page)) == len(result.claims)
    got = {c.id: c.verdict for c in result.claims}
    assert {k: got.get(k) for k in PINNED_TINY} == PINNED_TINY
    assert rederived(tmp_path, "tiny", SIMULATIONS) == got
    stored = pd.read_csv(tmp_path / "claims.csv")
    assert dict(zip(stored["id"], stored["verdict"], strict=True)) == got
    frame = result.to_frame()
    assert list(frame.columns) == list(stored.columns) and list(frame["id"]) == list(stored["id"])


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_only_each_experiment_gives_its_figures_and_verdicts(tiny_all, tmp_path, name):
    shutil.copytree(tiny_all.out_dir / "runs", tmp_path / "runs")  # resume from the module's runs
    result = reproduce(tmp_path, profile="tiny", only=[name], workers=1, progress=False)
    assert result.sweep.failed == 0, result.sweep.failures
    assert result.sweep.skipped == result.sweep.total  # resumed: the module fixture ran them all
    assert result.figures, f"{name} drew no figure"
    for fig in result.figures:
        assert fig.png.stat().st_size > 1000 and fig.pdf.stat().st_size > 1000
        assert not pd.read_csv(fig.csv).empty
    assert result.claims, f"{name} judged no claim"
    assert all(c.experiment == name and c.evidence and c.rule and c.conditions for c in result.claims)
    whole = {c.id: c.verdict for c in tiny_all.claims if c.experiment == name}
    assert {c.id: c.verdict for c in result.claims} == whole  # --only judges as the whole run does


@pytest.mark.slow
def test_full_tiny_report_has_a_verdict_for_every_claim_and_is_self_contained(tiny_all):
    result, shared_out = tiny_all, tiny_all.out_dir
    assert result.sweep.failed == 0 and result.sweep.finished == result.sweep.total
    claims = json.loads((shared_out / "claims.json").read_text())
    assert {c["experiment"] for c in claims} == set(EXPERIMENTS)
    page = (shared_out / "report.html").read_text()
    rows = re.findall(r"<tr id='[^']+'>", page)
    assert len(rows) == len(claims)
    for claim in claims:
        assert f"<tr id='{claim['id']}'>" in page
    assert rederived(shared_out, "tiny", EXPERIMENTS) == {c["id"]: c["verdict"] for c in claims}
    got = {c["id"]: c["verdict"] for c in claims}
    assert {k: got.get(k) for k in PINNED_TINY} == PINNED_TINY
    assert got["cx.token0"] == REPRODUCED  # token 0 attends to itself: power iteration of W_V
    assert page.count("data:image/png;base64,") == len(result.figures)
    assert not re.search(r"""(src|href)=["']https?://""", page), "report must open offline"
    assert "<link" not in page and "<script src" not in page
    table = pd.read_csv(shared_out / "runs.csv")
    assert {"run_id", "experiment", "task", "seed", "layer", "mu_rel"} <= set(table.columns)
    assert not table.duplicated(["run_id", "row"]).any()
    # one row per layer for the simulator and model-analysis tasks (other tasks may give several)
    layered = table[table["layer"].notna() & table["task"].isin(["simulate", "analyze"])]
    assert not layered.duplicated(["run_id", "layer"]).any()


def test_cli_reproduce_writes_report_and_unknown_experiment_is_one_line_exit_2(tmp_path, capsys):
    code = main(["reproduce", "--profile", "tiny", "--only", "ln_orthogonal", "--workers", "1",
                 "--no-progress", "--out", str(tmp_path)])
    assert code == 0
    assert (tmp_path / "report.html").exists()
    assert "report:" in capsys.readouterr().out
    code = main(["reproduce", "--profile", "tiny", "--only", "fig9", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "fig9" in err and "allowed" in err
    assert main(["reproduce", "--quick", "--full", "--out", str(tmp_path)]) == 2
