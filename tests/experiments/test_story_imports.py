"""A story uses only the kit, the judging contract and the engine: every import of ``rankcollapse`` in a story
module (function-level ones included) names one of them. What a story needs of a lower package (a closed
form, a threshold, a drawing) comes through the kit (``kit.tasks``, the kit's one door downwards)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rankcollapse.experiments.stories as stories

#: The packages a story may import from.
ALLOWED = tuple(f"rankcollapse.experiments.{name}" for name in ("kit", "contract", "engine"))
STORIES = sorted(p for p in Path(stories.__file__).parent.glob("*.py") if p.name != "__init__.py")


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``tree``; ``from a import b`` gives ``a.b`` (``b`` may be a
    module), a relative import its dots."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


def foreign(tree: ast.AST) -> list[str]:
    """The imports of ``tree`` that reach into ``rankcollapse`` outside :data:`ALLOWED` (or relatively)."""
    bad = []
    for line, name in imported(tree):
        ours = name == "rankcollapse" or name.startswith(("rankcollapse.", "."))
        if ours and not any(name == a or name.startswith(f"{a}.") for a in ALLOWED):
            bad.append(f"line {line}: {name}")
    return bad


def test_there_are_stories() -> None:
    assert len(STORIES) >= 10


@pytest.mark.parametrize("path", STORIES, ids=lambda p: p.stem)
def test_a_story_imports_only_the_kit_the_contract_and_the_engine(path: Path) -> None:
    bad = foreign(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    assert not bad, f"{path.name} imports below the kit: {'; '.join(bad)}"


@pytest.mark.parametrize(
    "code",
    [
        "from rankcollapse.core.precision import floor_rel",
        "def f():\n    from rankcollapse.masks import parse_mask\n",
        "import rankcollapse.metrics.influence",
        "from rankcollapse import edge",
        "from rankcollapse.experiments import kit, pipeline",
        "from ..kit import rules",
    ],
)
def test_the_check_finds_an_import_below_the_kit(code: str) -> None:
    assert foreign(ast.parse(code))


def test_the_check_allows_the_kit_the_contract_the_engine_and_third_parties() -> None:
    code = (
        "import math\nimport numpy as np\nimport pandas as pd\nimport torch\n"
        "from rankcollapse.experiments.kit import rules\n"
        "from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES\n"
        "from rankcollapse.experiments.contract.story import Arm\n"
        "from rankcollapse.experiments.engine.store import run_summary\n"
        "from rankcollapse.experiments import kit\n"
    )
    assert foreign(ast.parse(code)) == []
