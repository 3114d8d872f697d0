"""A statement's rule text names kit functions that exist: the text is the ``rule`` column of claims.csv,
and a reader follows it to the code (a module moved without its texts leaves the reader at a dead name)."""

from __future__ import annotations

import importlib
import re

import pytest

from rankcollapse.experiments.stories import all_stories

#: ``kit.<module>[.<module>].<name>`` as a rule text writes it (``rules.x`` is short for ``kit.rules.x``)
NAMED = re.compile(r"\b(kit(?:\.[a-z_]+)+)\b")


def resolves(dotted: str) -> bool:
    """Whether ``rankcollapse.experiments.<dotted>`` is a module or an attribute of one."""
    parts = f"rankcollapse.experiments.{dotted}".split(".")
    for cut in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def named_in_rules() -> list[tuple[str, str]]:
    return [
        (f"{name}.{s.key}", dotted)
        for name, found in all_stories().items()
        for s in found.story.statements
        for dotted in NAMED.findall(s.rule)
    ]


def test_rule_texts_name_kit_functions() -> None:
    named = named_in_rules()
    assert len(named) >= 20  # the stories do name their rules
    dead = [f"{key}: {dotted}" for key, dotted in named if not resolves(dotted)]
    assert not dead, dead


@pytest.mark.parametrize("dotted", ["kit.influence.peaked", "kit.rules.nothing_here", "kit.notions"])
def test_a_dead_name_is_caught(dotted: str) -> None:
    assert not resolves(dotted)


def test_a_live_name_resolves() -> None:
    assert resolves("kit.rules") and resolves("kit.curves.Curve")
