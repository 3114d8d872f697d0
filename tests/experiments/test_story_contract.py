"""The story contract: one module with STORY + one YAML beside it is a whole paper result (kit only)."""

from __future__ import annotations

import textwrap

import pytest

from experiments.story_run import story_package
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.contract.story import Arm, Statement, Story, discover_stories
from rankcollapse.experiments.contract.verdicts import MAIN_PAPER
from rankcollapse.experiments.engine.tasks import Task, toy
from rankcollapse.experiments.stories import all_stories, load_experiments
from rankcollapse.pipeline import ReproduceConfig, reproduce

#: A whole story, written with the engine and the kit only: a statement judged from a curve by a kit
#: rule, and a second statement no row judges (the engine writes its no-data row).
_MODULE = """
from rankcollapse.experiments.contract.story import Arm, Statement, Story
from rankcollapse.experiments.engine.tasks import Task, toy
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.curves import Curve
from rankcollapse.experiments.kit.thresholds import Thresholds

STATEMENTS = (
    Statement("falls", "x(t) falls exponentially", "paper §0, Fig. 0", "every curve collapsing"),
    Statement("never", "something nobody measures", "paper §0", "none"),
)


def claims(sd):
    th = Thresholds.of("{name}", sd.verdict, sd.ranges)
    data = sd.arm("main")
    if data is None:
        return []
    rows = data.rows.sort_values(["run_id", "layer"])
    import numpy as np
    values = np.stack([g["mu"].to_numpy() for _, g in rows.groupby("run_id")])
    curves = {{"toy": Curve.from_samples(values, "mu", "float64")}}
    j = judged(lambda t: rules.san_collapse(curves, t), th)
    return [claim_row("{name}", STATEMENTS[0], data, th, j)]


STORY = Story(name="{name}", statements=STATEMENTS, arms=(Arm("main", Task(toy)),), claims=claims)
"""
_YAML = """
title: a toy story
verdict: {rate_tol: 0.02, min_samples: 4}
ranges: {rate_tol: [0.01, 0.05]}
arms:
  main:
    base: {layers: 6, rate: 0.5}
    grid: {seed: [0, 1, 2, 3]}
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fresh importable package ``storypkg_<n>`` under tmp_path; returns (name, folder)."""
    with story_package(tmp_path, monkeypatch) as found:
        yield found


def test_a_module_and_a_yaml_are_a_whole_story_judged_with_the_kit(package, tmp_path):
    name, folder = package
    (folder / "toy_story.py").write_text(
        textwrap.dedent(_MODULE.replace("{name}", "toy_story").replace("{{", "{").replace("}}", "}"))
    )
    (folder / "toy_story.yaml").write_text(textwrap.dedent(_YAML))
    (folder / "_helpers.py").write_text("X = 1\n")  # helpers are not stories
    found = discover_stories(name)
    assert list(found) == ["toy_story"]
    config = ReproduceConfig(tmp_path / "out", profile="full", workers=1, progress=False)
    result = reproduce(config, stories=found)
    rows = {c.id: c for c in result.claims}
    assert (
        rows["toy_story.falls"].verdict == "reproduced" and rows["toy_story.falls"].origin == "paper setting"
    )
    assert "rate_tol = 0.02 (range 0.01-0.05)" in rows["toy_story.falls"].thresholds
    never = rows["toy_story.never"]  # written by the engine, not by the story
    assert never.verdict == "inconclusive" and never.cause_kind == "no data"
    frame = result.to_frame()
    assert {"as_plotted", "mechanism", "verdict", "origin", "cause", "threshold_sensitive", "n"} <= set(frame)


@pytest.mark.parametrize(
    "module,yaml,match",
    [
        ("X = 1\n", True, "defines no STORY"),
        (_MODULE.replace("{name}", "other").replace("{{", "{").replace("}}", "}"), True, "!= 'toy_story'"),
        (
            _MODULE.replace("{name}", "toy_story").replace("{{", "{").replace("}}", "}"),
            False,
            "no config toy_story.yaml",
        ),
    ],
)
def test_a_broken_story_is_named(package, module, yaml, match):
    name, folder = package
    (folder / "toy_story.py").write_text(textwrap.dedent(module))
    if yaml:
        (folder / "toy_story.yaml").write_text(textwrap.dedent(_YAML))
    with pytest.raises(RankCollapseError, match=match):
        discover_stories(name)


def test_the_yaml_must_name_exactly_the_arms_the_story_declares(package, tmp_path):
    name, folder = package
    (folder / "toy_story.py").write_text(
        textwrap.dedent(_MODULE.replace("{name}", "toy_story").replace("{{", "{").replace("}}", "}"))
    )
    (folder / "toy_story.yaml").write_text(textwrap.dedent(_YAML).replace("  main:", "  other:"))
    with pytest.raises(RankCollapseError, match=r"arms \['other'\] but the story declares \['main'\]"):
        load_experiments("full", stories=discover_stories(name))


def test_the_contract_declares_what_stories_used_to_bolt_on():
    with pytest.raises(RankCollapseError, match="top-level"):
        Task(lambda p, o: None)
    task = Task(toy, cost_s=lambda p: 1.0, identity_facts=lambda p: {"weights": "w"})
    assert task.target == "rankcollapse.experiments.engine.tasks:toy" and task.name == "toy"
    st = Statement("k", "s", "ours", "r", ours=True)
    with pytest.raises(RankCollapseError, match="declared twice"):
        Story(name="x", statements=(st, st), arms=(Arm("a", task),), claims=lambda d: [])
    with pytest.raises(RankCollapseError, match="at least one arm"):
        Story(name="x", statements=(st,), arms=(), claims=lambda d: [])
    exp = load_experiments("quick", ["fig9"])[0]
    spec = exp.runs()[0]
    assert exp.cost_s(spec) > 0 and spec.facts == (exp.task_info.identity_facts(spec.params) or {})


_DECLARED = """
from rankcollapse.experiments.contract.story import Arm, Statement, story_here
from rankcollapse.experiments.engine.tasks import Task, toy

PAPER = "2502.01951"
STATEMENTS = (Statement("s", "a follow-up's statement", "Wu et al. §1", "none"),)
ARMS = (Arm("main", Task(toy)),)


def claims(sd):
    return []


def headlines(sd):
    return ["a finding"]


STORY = story_here(__name__)
"""


def test_a_story_declares_only_what_differs_and_story_here_fills_the_rest(package):
    name, folder = package
    (folder / "follow.py").write_text(_DECLARED)
    (folder / "follow.yaml").write_text(textwrap.dedent(_YAML))
    story = discover_stories(name)["follow"].story
    assert (story.name, story.paper, [s.key for s in story.statements]) == ("follow", "2502.01951", ["s"])
    assert story.headlines(None) == ["a finding"] and story.figures(None) == []  # figures: none declared
    (folder / "nopaper.py").write_text(_DECLARED.replace('PAPER = "2502.01951"\n', ""))
    (folder / "nopaper.yaml").write_text(textwrap.dedent(_YAML))
    assert discover_stories(name)["nopaper"].story.paper == MAIN_PAPER
    (folder / "noarms.py").write_text(_DECLARED.replace("ARMS = (", "_ARMS = ("))
    with pytest.raises(RankCollapseError, match=r"story module .*noarms defines no ARMS"):
        discover_stories(name)


def test_every_bundled_story_has_its_yaml_arms_and_statements():
    for name, found in all_stories().items():
        exps = [e for e in load_experiments("quick") if e.story == name]
        assert [e.arm for e in exps] == [a.name for a in found.story.arms]
        assert all(e.source == f"{name}.yaml" and e.name == f"{name}.{e.arm}" for e in exps)
        assert found.story.statements


def test_a_custom_config_names_a_task_and_unknown_tasks_are_refused(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "title: t\ntask: toy\nbase: {layers: 2, rate: 0.5}\ngrid: {seed: [0, 1]}\n"
    )
    exps = load_experiments("full", folder=tmp_path)
    config = ReproduceConfig(tmp_path / "out", profile="full", config_dir=tmp_path, workers=1, progress=False)
    result = reproduce(config)
    assert [e.name for e in exps] == ["mine"] and result.sweep.finished == 2 and result.claims == []
    (tmp_path / "bad.yaml").write_text("title: t\ntask: nope\nbase: {}\ngrid: {seed: [0]}\n")
    with pytest.raises(RankCollapseError, match=r"unknown task 'nope'; allowed: .*simulate"):
        load_experiments("full", folder=tmp_path)


def test_thresholds_live_in_the_yaml_not_in_python():
    """No rule of the kit or a story carries a default threshold: every number it compares with comes
    from the story's YAML (read by name), so a YAML without it is an error, not a silent default."""
    import ast
    from pathlib import Path

    import rankcollapse.experiments as pkg

    root = Path(pkg.__file__).parent
    names = {
        "rate_tol",
        "keep_min",
        "min_samples",
        "unstable_min",
        "initial_layers",
        "full_rank_min",
        "ratio_margin",
        "ratio_min",
        "aniso_factor",
        "dominance_min",
        "share_min",
        "min_log_rate",
        "min_rho",
        "limit_tol",
        "meet_tol",
        "residual_max",
    }
    offenders = []
    for path in [*root.glob("kit/*.py"), *root.glob("stories/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.args[-len(node.args.defaults) :] if node.args.defaults else []
                offenders += [f"{path.name}:{node.name}({a.arg}=...)" for a in args if a.arg in names]
                offenders += [
                    f"{path.name}:{node.name}({a.arg}=...)"
                    for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
                    if d is not None and a.arg in names
                ]
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id in names
            ):
                offenders.append(f"{path.name}: {node.target.id} = ...")
    assert offenders == []


#: A story that measures something the kit has never been told about (the effective rank of X(t), any
#: per-sample metric of rankcollapse.metrics), named once in its YAML, judged by a kit rule: its two files
#: are all it takes.
_NEW_QUANTITY = """
from rankcollapse.experiments.contract.story import Arm, Statement, Story
from rankcollapse.experiments.kit import rules
from rankcollapse.experiments.kit.claims import judged, model_row
from rankcollapse.experiments.kit.data import arm_models, by_label, curves_by
from rankcollapse.experiments.kit.tasks.curves import MODEL_CURVES
from rankcollapse.experiments.kit.thresholds import Thresholds

STATEMENTS = (
    Statement("erank_falls", "The effective rank of X(t) falls in a SAN", "ours", "collapsing", ours=True),
)


def claims(sd):
    th = Thresholds.of("erank", sd.verdict, sd.ranges)
    out = []
    for arm, data, label, _, frame in arm_models(sd, ("main",), "curve"):
        masks = list(dict.fromkeys(frame["mask"]))
        curves = by_label(curves_by(frame, "effective_rank", ["mode", "mask"]), "attn", masks, ["float64"])
        j = judged(lambda t: rules.san_collapse(curves, t), th)
        out.append(model_row("erank", STATEMENTS[0], data, th, j, None, frame, qualifier=arm, figure=""))
    return out


STORY = Story(name="erank", statements=STATEMENTS, arms=(Arm("main", MODEL_CURVES),), claims=claims)
"""
_NEW_QUANTITY_YAML = """
title: the effective rank of a SAN
verdict: {rate_tol: 0.02, min_samples: 4}
arms:
  main:
    base: {model: "tiny:bert", variants: [attn], masks: [complete], layers: 4, tokens: 12, samples: 2,
           dtype: float64, quantities: [mu, mu_rel, effective_rank]}
    grid: {seed: [0, 1, 2]}
"""


def test_a_claim_on_a_quantity_the_kit_never_saw_is_one_story_and_its_yaml(package, tmp_path):
    name, folder = package
    (folder / "erank.py").write_text(textwrap.dedent(_NEW_QUANTITY))
    (folder / "erank.yaml").write_text(textwrap.dedent(_NEW_QUANTITY_YAML))
    config = ReproduceConfig(tmp_path / "out", profile="full", workers=1, progress=False)
    result = reproduce(config, stories=discover_stories(name))
    row = next(c for c in result.claims if c.id == "erank.erank_falls[main]")
    assert row.n == 3 and row.unit == "networks" and "effective_rank" not in row.verdict
    assert row.as_plotted in ("reproduced", "not reproduced", "inconclusive") and row.evidence
    import pandas as pd

    table = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert {"effective_rank", "effective_rank_drop", "mu_rel"} <= set(table.columns)
    with pytest.raises(RankCollapseError, match="unknown quantity 'entropy_of_nothing'"):
        from rankcollapse.models.measure import CurvesConfig

        CurvesConfig(model="tiny:bert", quantities=("entropy_of_nothing",))


def test_a_statement_of_a_second_follow_up_is_counted_with_its_own_paper(package, tmp_path):
    """A story judging two follow-ups on the same runs (LayerNorm Scaling and Peri-LN): each statement's
    rows carry its own paper (``Statement.paper``), the engine's no-data row too; never the main paper."""
    from rankcollapse.experiments.contract.verdicts import tally

    name, folder = package
    module = _MODULE.replace("{name}", "two_papers").replace("{{", "{").replace("}}", "}")
    module = module.replace('"none"),\n)', '"none", paper="2502.02732"),\n)')
    module = module.replace("claims=claims)", 'claims=claims, paper="2502.05795")')
    (folder / "two_papers.py").write_text(textwrap.dedent(module))
    (folder / "two_papers.yaml").write_text(textwrap.dedent(_YAML))
    found = discover_stories(name)
    story = found["two_papers"].story
    assert (story.paper_of("falls"), story.paper_of("never")) == ("2502.05795", "2502.02732")
    result = reproduce(ReproduceConfig(tmp_path / "out", profile="full", workers=1, progress=False),
                       stories=found)
    rows = {c.key: c for c in result.claims}
    assert (rows["falls"].paper, rows["never"].paper) == ("2502.05795", "2502.02732")
    assert {c.origin for c in result.claims} == {"follow-up setting"}
    assert tally(result.claims) == {}  # nothing of either paper in the NeurIPS paper's tally
    assert tally(result.claims, "2502.02732")["follow-up setting"]["as plotted"] == {"inconclusive": 1}
    page = result.report.read_text()
    assert page.index("id='paper-2502.05795'") < page.index("id='paper-2502.02732'") < page.index(
        "id='exp-two_papers'")
    with pytest.raises(RankCollapseError, match="main paper"):
        Statement("s", "t", "src", "rule", paper=MAIN_PAPER)
    with pytest.raises(RankCollapseError, match="unknown paper"):
        Statement("s", "t", "src", "rule", paper="1234.5678")
