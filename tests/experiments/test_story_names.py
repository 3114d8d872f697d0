"""A story reads only the names table's names: the engine hands it every arm's params and rows with the
stored keys of the quantities its tasks name (``Task.names``: ``n`` -> ``tokens``, ``batch`` -> ``samples``,
``preset`` -> ``mode``, ``steps`` -> ``layers`` in an iterated map) renamed, so a story module that writes
one of those keys as a string (``data.exp.base["n"]``, ``groupby(["n", "d"])``, ``row.get("preset")``) reads
a column or a setting that is not there. Checked on the source (docstrings and f-string text aside) and on
the data the engine gives a story."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rankcollapse.core.names import QUANTITIES
from rankcollapse.experiments.stories import all_stories, load_experiments

STORIES = all_stories()


def stored_keys(names: tuple[str, ...]) -> set[str]:
    """The stored keys of the quantities ``names`` (``core.names``' ``stored``)."""
    return {old for key in names for old in QUANTITIES[key].stored}


def banned(name: str) -> dict[str, str]:
    """stored key -> the table's name, for every quantity a task of story ``name`` names."""
    out = {}
    for arm in STORIES[name].story.arms:
        for key in arm.task.names:
            out.update({old: key for old in QUANTITIES[key].stored})
    return out


def stored_reads(source: str, keys: set[str]) -> list[str]:
    """``line: 'key'`` for each string constant of ``source`` that is one of ``keys`` (a docstring and the
    literal text of an f-string are prose, not reads)."""
    tree = ast.parse(source)
    prose: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            prose.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            prose.update(id(v) for v in node.values if isinstance(v, ast.Constant))
    return [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in keys
            and id(node) not in prose]


def test_the_check_finds_a_stored_key_read_and_leaves_prose_alone() -> None:
    source = '''
def f(data):
    """Reads n tokens."""
    label = f"n = {data.n}"
    return data.exp.base["n"], data.table.groupby(["mode", "n"]), data.row.get("preset"), "tokens"
'''
    assert sorted(stored_reads(source, {"n", "preset"})) == ["line 5: 'n'", "line 5: 'n'", "line 5: 'preset'"]


@pytest.mark.parametrize("name", sorted(STORIES))
def test_a_story_never_reads_a_key_its_tasks_store_under_another_name(name: str) -> None:
    keys = banned(name)
    path = Path(STORIES[name].config).with_suffix(".py")
    found = stored_reads(path.read_text(encoding="utf-8"), set(keys))
    hint = ", ".join(f"{old} -> {keys[old]}" for old in sorted(keys))
    assert not found, f"{path.name} reads stored keys ({'; '.join(found)}); read the table's names ({hint})"


def test_the_engine_gives_a_story_its_params_under_the_tables_names_only() -> None:
    checked = 0
    for exp in load_experiments("tiny"):
        keys = stored_keys(exp.names)
        assert not keys & {*exp.base, *(exp.grid or {})}, exp.name
        for spec in exp.runs():
            assert not keys & set(spec.named_params), exp.name
            checked += bool(keys & set(spec.params))  # the identity still hashes the stored keys
    assert checked > 100


def test_the_yaml_keeps_its_stored_keys_for_the_identity_and_describe_shows_them() -> None:
    exp = next(e for e in load_experiments("tiny", ["theorem3"]) if e.arm == "paper")
    assert exp.stored == {"tokens": "n", "layers": "steps"}
    assert {"tokens", "layers"} <= set(exp.base) | set(exp.grid or {})
    shown = exp.describe()
    assert "steps" in shown["base"] and "n" in shown["grid"]
    (spec, *_) = exp.runs()
    assert {"n", "steps"} <= set(spec.params) and {"tokens", "layers"} <= set(spec.named_params)
