"""Sequential sampling (``reproduce --until-decided``): the scheme keeps its error level, and the
pipeline adds seeds only where a row is undecided, stops each row for a reason it names, and resumes."""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.story_run import story_package
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.contract.story import discover_stories
from rankcollapse.experiments.kit.curves import ALPHA, looks
from rankcollapse.experiments.kit.judgement import Margin
from rankcollapse.pipeline import ReproduceConfig, reproduce
from rankcollapse.pipeline.sequential import check_sequential, looks_for, parse_duration


def _wrong_decisions(n0: int, max_samples: int, trials: int, naive: bool, seed: int) -> float:
    """Share of trials in which some look of the doubling schedule decides, for samples whose true mean
    sits exactly on the threshold (so every decision is wrong). ``naive``: 2 standard errors at every
    look (the scheme without the t quantile and without Bonferroni)."""
    rng = np.random.default_rng(seed)
    k = looks_for(n0, max_samples)
    wrong = 0
    with looks(k):
        for _ in range(trials):
            x = rng.standard_normal(max_samples)
            for look in range(k):
                n = n0 * 2**look
                mean, se = float(x[:n].mean()), float(x[:n].std(ddof=1)) / math.sqrt(n)
                decided = abs(mean) > 2.0 * se if naive else Margin("mean", mean, se, 0.0, n).decided
                if decided:
                    wrong += 1
                    break
    return wrong / trials


def test_the_doubling_schedule_with_bonferroni_keeps_the_error_level() -> None:
    """True value on the threshold, n = 4, 8, ..., 256 (K = 7 looks): the scheme decides wrongly in at
    most ALPHA of the trials (within 3 Monte Carlo standard errors); the naive scheme (2 se at every
    look) decides wrongly far more often, so the test can tell them apart."""
    trials = 3000
    mc = 3 * math.sqrt(ALPHA * (1 - ALPHA) / trials)
    ours = _wrong_decisions(4, 256, trials, naive=False, seed=1)
    naive = _wrong_decisions(4, 256, trials, naive=True, seed=1)
    assert ours <= ALPHA + mc, (ours, naive)
    assert naive > 2 * ALPHA, (ours, naive)
    # one look at n = 64: the t interval alone holds the level (a z interval at n = 4 would not)
    assert _wrong_decisions(64, 64, trials, naive=False, seed=2) <= ALPHA + mc


def test_looks_and_options() -> None:
    assert looks_for(4, 256) == 7 and looks_for(64, 64) == 1 and looks_for(64, 100) == 1
    assert looks_for(5, 3000) == 1 + math.floor(math.log2(3000 / 5))
    assert parse_duration("3h") == 10800 and parse_duration("2h30m") == 9000 and parse_duration("90") == 90
    assert parse_duration("45s") == 45 and parse_duration("1.5h") == 5400
    for bad in ("", "soon", "-5", "0", "3x", "nan", "inf"):
        with pytest.raises(RankCollapseError, match="--budget"):
            parse_duration(bad)
    with pytest.raises(RankCollapseError, match="--max-samples applies only with --until-decided"):
        check_sequential(False, 64, None)
    with pytest.raises(RankCollapseError, match="--budget applies only with --until-decided"):
        check_sequential(False, None, 60.0)
    with pytest.raises(RankCollapseError, match="--max-samples must be a positive integer"):
        check_sequential(True, 0, None)


#: A story whose rows compare a mean with 0: one condition with a true effect (decided once the sample
#: is large enough), one with none (undecided until the cap), one arm without a seed axis.
_MODULE = '''
import math

import numpy as np

from rankcollapse.experiments.contract.story import Arm, Statement, Story
from rankcollapse.experiments.engine.tasks import Task, RunOutput
from rankcollapse.experiments.contract.verdicts import Verdict
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


def draws(params, on_layer):
    """``samples`` draws of N(effect, 1), seeded by (seed, effect)."""
    rng = np.random.default_rng([int(params["seed"]), int(1000 * params["effect"])])
    x = params["effect"] + rng.standard_normal(int(params["samples"]))
    return RunOutput([{"sample": i, "value": float(v)} for i, v in enumerate(x)], {})


STATEMENT = Statement("positive", "the mean is above 0", "ours", "mean > 0 for sure", ours=True)


def rule(values, th):
    n = len(values)
    mean, se = float(np.mean(values)), float(np.std(values, ddof=1)) / math.sqrt(n)
    m = Margin("mean", mean, se, 0.0, n)
    if n < th.count("min_samples"):
        return Judgement(Verdict.INCONCLUSIVE, f"n = {n}", "too few", "sample too small", n)
    if m.decided:
        return Judgement(Verdict.REPRODUCED if mean > 0 else Verdict.NOT_REPRODUCED, f"{mean:.3g}", n=n,
                         margins=(m,))
    return Judgement(Verdict.INCONCLUSIVE, f"{mean:.3g}", "open", "sample too small", n, (m,))


def claims(sd):
    th = Thresholds.of("seqstory", sd.verdict, sd.ranges)
    out = []
    for arm in ("seeded", "fixed"):
        data = sd.arm(arm)
        if data is None:
            continue
        for effect, frame in data.rows.groupby("effect"):
            values = frame["value"].to_numpy()
            out.append(claim_row("seqstory", STATEMENT, data, th, judged(lambda t: rule(values, t), th),
                                 frame=frame, runs=data.ok[data.ok["run_id"].isin(frame["run_id"])],
                                 qualifier=f"{arm}, effect {effect:g}"))
    return out


TASK = Task(draws, cost_s=lambda p: 1.0)
ARMS = (Arm("seeded", TASK, True), Arm("fixed", TASK, True))
STORY = Story(name="seqstory", statements=(STATEMENT,), arms=ARMS, claims=claims)
'''
_YAML = """
title: a sequential toy
verdict: {min_samples: 4}
arms:
  seeded:
    base: {samples: 2}
    grid: {effect: [0.0, 1.5], seed: [0, 1]}
  fixed:
    base: {samples: 4, seed: 0}
    grid: {effect: [0.0]}
"""


@pytest.fixture
def story(tmp_path, monkeypatch):
    with story_package(tmp_path, monkeypatch) as (name, folder):
        (folder / "seqstory.py").write_text(textwrap.dedent(_MODULE))
        (folder / "seqstory.yaml").write_text(textwrap.dedent(_YAML))
        yield discover_stories(name)


def _rows(result) -> dict:
    return {c.id.split("[", 1)[1][:-1]: c for c in result.claims}


def _decide(stories, out, max_samples: int = 32, **kw):
    """``reproduce --full --until-decided`` of the toy story into ``out``, in this process."""
    config = ReproduceConfig(
        out, profile="full", workers=1, progress=False, until_decided=True, max_samples=max_samples, **kw
    )
    return reproduce(config, stories=stories)


def test_until_decided_extends_only_undecided_rows_and_names_why_each_stopped(story, tmp_path) -> None:
    out = tmp_path / "out"
    base = reproduce(ReproduceConfig(out / "one", profile="full", workers=1, progress=False), stories=story)
    one = _rows(base)
    assert one["seeded, effect 1.5"].undecided and one["seeded, effect 0"].undecided  # n = 4 decides nothing
    result = _decide(story, out / "seq")
    rows = _rows(result)
    effect, null, fixed = rows["seeded, effect 1.5"], rows["seeded, effect 0"], rows["fixed, effect 0"]
    # the true effect is decided after more samples, on the doubling schedule (4, 8, 16, 32)
    assert (
        effect.verdict == "confirmed (ours)"
        and effect.n in (8, 16, 32)
        and "decided at n =" in effect.sampling
    )
    # no effect: undecided at the cap, which it names
    assert null.undecided and null.n == 32 and "cap" in null.sampling and "--max-samples 32" in null.sampling
    # an arm without a seed axis is never extended
    assert fixed.n == 4 and "no seed axis" in fixed.sampling
    # a row without the paper's weights is untested, never "decided"
    from dataclasses import replace

    from rankcollapse.pipeline.sequential import Sampling, stop_reason

    untested = replace(effect, verdict="untested", undecided=False)
    assert stop_reason(untested, Sampling(32, None)).startswith("untested: ")
    # new seeds only for the undecided conditions: effect 0 has seeds 0..15, effect 1.5 stopped earlier
    assert null.seeds == list(range(16)) and effect.seeds == list(range(effect.n // 2))
    seq = result.out_dir / "experiments.json"
    assert '"looks_per_story"' in seq.read_text() and "sampling:" in result.report.read_text()
    # resume: the same command runs nothing new and gives the same rows
    again = _decide(story, out / "seq")
    assert again.sweep.finished == 0 and {c.id: c.verdict for c in again.claims} == {
        c.id: c.verdict for c in result.claims
    }


def test_a_spent_budget_stops_sampling_and_says_so(story, tmp_path) -> None:
    result = _decide(story, tmp_path / "out", budget_s=1e-3)
    rows = _rows(result)
    assert rows["seeded, effect 0"].n == 4 and "budget" in rows["seeded, effect 0"].sampling
    assert result.sweep.total == 5  # the profile's own runs only


def test_the_summary_says_what_sequential_sampling_did(story, tmp_path) -> None:
    result = _decide(story, tmp_path / "out", 16)
    page = result.report.read_text()
    assert "Sampled until decided" in page and "Bonferroni" in page and "still undecided (cap" in page


def test_a_rerun_replays_the_finished_looks_without_spending_its_budget(story, tmp_path) -> None:
    """The runs of earlier looks cost no budget: the same folder with a tiny budget replays every look
    and judges the same rows on the same n, running nothing."""
    first = _decide(story, tmp_path / "out")
    again = _decide(story, tmp_path / "out", budget_s=1e-3)
    assert again.sweep.finished == 0
    assert {c.id: (c.n, c.verdict) for c in again.claims} == {c.id: (c.n, c.verdict) for c in first.claims}
    # the folder keeps both calls: the page's wall time is the one that ran the runs plus the replay
    meta = json.loads((tmp_path / "out" / "experiments.json").read_text())["meta"]
    ran, replayed = meta["calls"]
    assert ran["runs_finished_now"] > 0 and replayed["runs_finished_now"] == 0
    from rankcollapse.pipeline.results import write_results

    page = write_results(tmp_path / "out", tmp_path / "results.md", note="first call on commit abc")
    page = page.read_text()
    assert "> Note by whoever ran it (not generated): first call on commit abc" in page
    assert "**Run time**" in page
    total = ran["wall_s"] + replayed["wall_s"]
    assert f"**Wall time**: {total:.0f} s" in page and "**Calls on this folder**" in page
    # the call that ran the runs speaks for the folder: its looks with their timings, not the replay's
    assert "(the call that ran most runs; every call below)" in page
    assert ran["sequential"]["history"] and "min (estimated" in page and "replayed here" not in page


def test_a_lone_recorded_call_that_ran_nothing_gives_no_look_timings(story, tmp_path) -> None:
    """A folder whose earlier calls were killed before they recorded themselves: the one recorded call
    replayed the looks and ran nothing, so its looks' minutes (0.0) and budget are not the folder's."""
    from rankcollapse.pipeline.results import write_results

    _decide(story, tmp_path / "out")
    path = tmp_path / "out" / "experiments.json"
    data = json.loads(path.read_text())
    data["meta"]["calls"] = [{**data["meta"]["calls"][0], "runs_finished_now": 0}]
    path.write_text(json.dumps(data))
    page = write_results(tmp_path / "out", tmp_path / "results.md").read_text()
    assert "replayed here; its timings were not recorded" in page and "min (estimated" not in page
    assert ", budget " not in page


def test_results_page_lists_every_row_with_its_verdict_n_interval_and_sampling(story, tmp_path) -> None:
    from rankcollapse.pipeline.results import write_results

    result = _decide(story, tmp_path / "out", 16)
    page = write_results(tmp_path / "out", tmp_path / "results.md").read_text()
    for c in result.claims:
        row = next(line for line in page.splitlines() if f"`{c.id}`" in line)
        assert f"| {c.n} |" in row and c.sampling[:40] in row and (c.interval[:30] in row)
    assert re.search(r"undecided at 16 (samples|networks)", page)
    assert "**Sampling**" in page and "| extension |" in page
    # the judged run is auditable beside the page: its whole claims table and its evidence, row by row
    table = pd.read_csv(tmp_path / "results-claims.csv")
    assert list(table["id"]) == [c.id for c in result.claims] and {"evidence", "decided_by"} <= set(table)
    digest = (tmp_path / "results-evidence.md").read_text()
    assert all(f"## `{c.id}`" in digest for c in result.claims)


def test_write_results_publishes_only_a_finished_folder_and_writes_through_the_output_layer(
    story, tmp_path
) -> None:
    """write_results.py read files directly, wrote experiments.json through a planted link and published
    a normal-looking page from an incomplete folder; each is one line and exit 2 now."""
    import os
    import subprocess
    import sys

    from rankcollapse.edge.folder import MARKER_NAME

    script = Path(__file__).resolve().parents[2] / "scripts" / "write_results.py"
    out = tmp_path / "out"
    _decide(story, out, 16)

    def run(*extra: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        return subprocess.run(
            [sys.executable, str(script), str(out), "--to", str(tmp_path / "r.md"), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    assert run().returncode == 0 and (tmp_path / "r.md").is_file()
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    meta = (out / "experiments.json").read_text()
    (out / "experiments.json").unlink()
    (out / "experiments.json").symlink_to(victim)
    proc = run("--commit", "abc123")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert victim.read_text() == "precious"  # never written through the link
    (out / "experiments.json").unlink()
    (out / "experiments.json").write_text(meta)
    marker = json.loads((out / MARKER_NAME).read_text())
    (out / MARKER_NAME).write_text(json.dumps({**marker, "complete": False}))
    proc = run()
    assert proc.returncode == 2 and "is not finished" in proc.stderr and "Traceback" not in proc.stderr
    (out / MARKER_NAME).write_text(json.dumps(marker))
    (out / "claims.json").write_text("{}")
    proc = run()
    assert proc.returncode == 2 and "no claims table" in proc.stderr


def test_a_row_whose_mechanism_half_is_open_gets_seeds_for_that_half() -> None:
    """Fig. 4 judges float32 (as plotted) and float64 (the mechanism) on different rows. A folder in
    which float32 already has more excerpt seeds than float64 (what a full run left when the extension
    followed the plotted half) must extend the float64 half: the row's conditions do not pin the dtype,
    its seeds are the smaller half's, and the next look's runs include new float64 runs."""
    from experiments.story_run import arm_data
    from rankcollapse.experiments.contract.story import Data, StoryData
    from rankcollapse.experiments.engine.config import load_arms
    from rankcollapse.experiments.stories import all_stories
    from rankcollapse.pipeline.sequential import extension

    found = all_stories()["fig4"]
    exps = load_arms(found.config, "tiny", "fig4", found.story.tasks)
    exp = next(e for e in exps if e.grid is not None)
    data = arm_data(exp)
    # drop float64's seed 2: float32 has seeds 0, 1, 2 and float64 only 0, 1
    gone = set(data.index.loc[(data.index["dtype"] == "float64") & (data.index["seed"] == 2), "run_id"])
    assert gone
    data = Data(
        exp, data.table[~data.table["run_id"].isin(gone)], data.index[~data.index["run_id"].isin(gone)]
    )
    sd = StoryData("fig4", {exp.arm: data}, dict(exp.verdict), dict(exp.ranges))
    rows = [c for c in found.story.claims(sd) if c.mechanism != "n/a"]
    assert rows
    for c in rows:
        assert "dtype" not in c.axes, c.axes
        assert sorted(c.seeds) == [0, 1], (c.id, c.seeds)
        ext = extension(c, exp, max_samples=1024)
        assert not isinstance(ext, str), ext
        new64 = {s.seed for s in ext.runs if s.params["dtype"] == "float64"}
        assert new64 == {2, 3}, (c.id, new64)


def test_the_recorded_command_is_the_cli_line_however_the_cli_was_started() -> None:
    """``python -m rankcollapse reproduce ...`` recorded an empty command (its argv[0] is __main__.py)."""
    from rankcollapse.pipeline.reproduce import cli_command

    args = ["reproduce", "--full", "--out", "x"]
    assert cli_command(["/v/bin/rankcollapse", *args]) == "rankcollapse reproduce --full --out x"
    assert cli_command(["/src/rankcollapse/__main__.py", *args]) == "rankcollapse reproduce --full --out x"
    assert cli_command(["/usr/lib/python3/pytest/__main__.py", *args]) == ""
    assert cli_command(["-c"]) == "" and cli_command([]) == ""


def test_a_spent_budget_never_reads_minus_zero_minutes() -> None:
    """The stop reason once read "would not fit in the -0 min left" (and "-3 min" when a look overran)."""
    from rankcollapse.edge.progress import duration_text

    assert duration_text(-0.4) == "0 s" and duration_text(-200) == "0 s"
    assert duration_text(float("nan")) == "0 s"
    assert duration_text(75) == "1 min 15 s"
