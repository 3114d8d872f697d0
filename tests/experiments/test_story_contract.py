"""The story contract: one module with STORY + one YAML beside it is a whole experiment."""

from __future__ import annotations

import sys
import textwrap

import pytest

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.story import Story, discover_stories
from rankcollapse.experiments.engine.tasks import toy
from rankcollapse.experiments.engine.verdicts import REPRODUCED
from rankcollapse.experiments.reproduce import reproduce
from rankcollapse.experiments.stories import all_stories, load_experiments

_MODULE = """
from rankcollapse.experiments.engine.story import Story
from rankcollapse.experiments.engine.tasks import toy
from rankcollapse.experiments.engine.verdicts import REPRODUCED, combine_verdicts


def claims(data):
    final = [data.curve(r, "mu")[-1] for r in data.ok["run_id"]]
    verdicts = [REPRODUCED if f < 0.1 else "not reproduced" for f in final]
    verdict = combine_verdicts(verdicts)
    return [data.claim("toy.falls", "x(t) falls", "ours", "final < 0.1", str(final), verdict)]


STORY = Story(name="{name}", task=toy, claims=claims)
"""
_YAML = """
title: a toy story
base: {layers: 4}
grid: {rate: [0.1, 0.2], seed: [0]}
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fresh importable package ``pkg_<n>`` under tmp_path; returns (name, folder)."""
    name = f"storypkg_{abs(hash(tmp_path)) % 10**8}"
    folder = tmp_path / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, folder
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


def test_a_module_and_a_yaml_are_a_whole_experiment(package):
    name, folder = package
    (folder / "toy_story.py").write_text(textwrap.dedent(_MODULE.format(name="toy_story")))
    (folder / "toy_story.yaml").write_text(textwrap.dedent(_YAML))
    (folder / "_helpers.py").write_text("X = 1\n")  # helpers are not stories
    found = discover_stories(name)
    assert list(found) == ["toy_story"]
    assert found["toy_story"].story.task_name == "toy" and found["toy_story"].config.name == "toy_story.yaml"


@pytest.mark.parametrize(
    "module,yaml,match",
    [
        ("X = 1\n", True, "defines no STORY"),
        (_MODULE.format(name="other"), True, "!= 'toy_story'"),
        (_MODULE.format(name="toy_story"), False, "no config toy_story.yaml"),
    ],
)
def test_a_broken_story_is_named(package, module, yaml, match):
    name, folder = package
    (folder / "toy_story.py").write_text(textwrap.dedent(module))
    if yaml:
        (folder / "toy_story.yaml").write_text(textwrap.dedent(_YAML))
    with pytest.raises(RankCollapseError, match=match):
        discover_stories(name)


def test_a_task_must_be_an_importable_top_level_function():
    with pytest.raises(RankCollapseError, match="top-level"):
        Story(name="x", task=lambda p, o: None, claims=lambda d: [])
    assert (
        Story(name="x", task=toy, claims=lambda d: []).target == "rankcollapse.experiments.engine.tasks:toy"
    )


def test_every_bundled_story_has_its_yaml_and_keeps_its_run_identity():
    stories = all_stories()
    assert {
        "theorem1",
        "radius_rate",
        "fig2_random",
        "fig3_temperature",
        "ln_orthogonal",
        "fig2_models",
        "fig4_geometry",
        "counterexample",
        "equilibria_ranks",
    } <= set(stories)
    for exp in load_experiments("quick"):
        assert exp.source == f"{exp.name}.yaml"
        assert exp.task == stories[exp.name].story.task_name
    # the task name (not the module it moved to) is hashed: stored runs keep their identity
    cx = load_experiments("quick", ["counterexample"])[0]
    assert cx.runs()[0].task == "counterexample"


def test_a_custom_config_names_a_task_and_unknown_tasks_are_refused(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "title: t\ntask: toy\nbase: {layers: 2, rate: 0.5}\ngrid: {seed: [0, 1]}\n"
    )
    exps = load_experiments("full", folder=tmp_path)
    result = reproduce(tmp_path / "out", profile="full", config_dir=tmp_path, workers=1, progress=False)
    assert [e.name for e in exps] == ["mine"] and result.sweep.finished == 2 and result.claims == []
    (tmp_path / "bad.yaml").write_text("title: t\ntask: nope\nbase: {}\ngrid: {seed: [0]}\n")
    with pytest.raises(RankCollapseError, match=r"unknown task 'nope'; allowed: .*simulate"):
        load_experiments("full", folder=tmp_path)


def test_a_story_claim_goes_through_the_pipeline(package, tmp_path, monkeypatch):
    name, folder = package
    (folder / "toy_story.py").write_text(textwrap.dedent(_MODULE.format(name="toy_story")))
    (folder / "toy_story.yaml").write_text(textwrap.dedent(_YAML))
    found = discover_stories(name)
    monkeypatch.setattr("rankcollapse.experiments.reproduce.all_stories", lambda: found)
    monkeypatch.setattr("rankcollapse.experiments.stories.all_stories", lambda: found)
    result = reproduce(tmp_path / "out", profile="full", workers=1, progress=False)
    assert [(c.id, c.verdict) for c in result.claims] == [("toy.falls", REPRODUCED)]
