"""The package's import graph: no cycle, and no module imports from a floor above its own.

Every ``import`` / ``from ... import`` in every module of ``rankcollapse`` is read with ``ast``
(function-level imports included, relative imports resolved). Each module sits on the floor of the
longest prefix of its name in ``FLOORS``; an import may only reach the same floor or a lower one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "rankcollapse"

#: Floors, lowest first: a module may import from its own floor or a lower one, never a higher one.
FLOORS: list[tuple[str, ...]] = [
    (
        "rankcollapse",
        "rankcollapse.core",
        "rankcollapse.edge",
        "rankcollapse.__main__",
    ),
    ("rankcollapse.masks", "rankcollapse.metrics"),
    ("rankcollapse.dynamics", "rankcollapse.models", "rankcollapse.equilibria", "rankcollapse.monitor"),
    ("rankcollapse.experiments", "rankcollapse.experiments.engine"),  # the sweep engine: nothing of the paper
    ("rankcollapse.experiments.contract",),  # the judging contract: Story, Claim, Verdict, words, tally
    ("rankcollapse.experiments.kit",),  # the judging kit: one way to summarise, judge and draw
    ("rankcollapse.experiments.stories",),
    ("rankcollapse.pipeline",),  # reproduce and the report, above every story
    ("rankcollapse.cli",),
]
#: Allowed exceptions: (importer, imported) with the reason. ``__main__`` runs the CLI.
EXCEPTIONS = {("rankcollapse.__main__", "rankcollapse.cli.main"): "python -m rankcollapse runs the CLI"}


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str], source: str | None = None) -> set[str]:
    """Every ``rankcollapse`` module ``name`` imports (a ``from pkg import x`` of a submodule counts
    as importing ``pkg.x``). ``source``: the code (default: read ``path``)."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] != PACKAGE:
                continue
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name:
                found.add(target)
    return found


def floor(name: str) -> int:
    best, level = -1, -1
    for i, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), i
    if level < 0:
        raise AssertionError(f"module {name} is on no floor; add it to FLOORS")
    return level


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} (floor {floor(a)}) imports {b} (floor {floor(b)})"
        for a, targets in edges.items()
        for b in targets
        if floor(b) > floor(a) and (a, b) not in EXCEPTIONS
    )


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first = last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_every_module_is_on_a_floor():
    for name in modules():
        floor(name)


def test_no_module_imports_from_a_higher_floor():
    assert upward_imports(graph()) == []


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle (function-level imports count): " + " -> ".join(cycle or [])


@pytest.mark.parametrize(
    "edges,upward,cycle",
    [
        ({"rankcollapse.core.a": {"rankcollapse.cli.main"}}, True, False),
        ({"rankcollapse.experiments.engine.x": {"rankcollapse.experiments.stories.s"}}, True, False),
        ({"rankcollapse.experiments.stories.s": {"rankcollapse.experiments.engine.x"}}, False, False),
        (
            {
                "rankcollapse.masks.a": {"rankcollapse.masks.b"},
                "rankcollapse.masks.b": {"rankcollapse.masks.a"},
            },
            False,
            True,
        ),
    ],
)
def test_the_checks_catch_an_upward_import_and_a_cycle(edges, upward, cycle):
    assert bool(upward_imports(edges)) is upward
    assert (find_cycle(edges) is not None) is cycle


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between top-level packages (``rankcollapse.<x>``): a module edge a -> b is a package
    edge when they sit in different packages."""

    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {}
    for a, targets in edges.items():
        for b in targets:
            if top(a) != top(b) and top(b) != PACKAGE:
                out.setdefault(top(a), set()).add(top(b))
    return out


def test_no_two_packages_import_each_other():
    """e.g. experiments and the report importing each other, even through different modules."""
    cycle = find_cycle(package_edges(graph()))
    assert cycle is None, "package cycle: " + " -> ".join(cycle or [])
    assert (
        find_cycle(
            package_edges(
                {
                    "rankcollapse.experiments.a": {"rankcollapse.pipeline.b"},
                    "rankcollapse.pipeline.c": {"rankcollapse.experiments.d"},
                }
            )
        )
        is not None
    )


def test_function_level_and_relative_imports_are_seen():
    code = "import os\n\ndef f():\n    from rankcollapse.cli import main\n    from . import b\n"
    path = SRC / PACKAGE / "core" / "fake.py"
    known = {"rankcollapse.cli.main", "rankcollapse.core.b", "rankcollapse.core", "rankcollapse.cli"}
    found = imports_of("rankcollapse.core.fake", path, known, source=code)
    assert found == {"rankcollapse.cli", "rankcollapse.cli.main", "rankcollapse.core", "rankcollapse.core.b"}
    assert upward_imports({"rankcollapse.core.fake": found})


#: The judging contract's names: what a story is and how its rows are judged and counted.
CONTRACT_NAMES = {
    "Story", "Statement", "Arm", "StoryData", "Claim", "Verdict", "Origin", "MAIN_PAPER", "PAPERS",
    "combine_verdicts", "verdict_word", "tally",
}


def test_the_engine_knows_nothing_about_the_paper() -> None:
    """The sweep engine (grid, identity, store, executors, workers, locks, progress) neither defines nor
    imports a name of the judging contract: those live one floor up, in ``experiments.contract``."""
    engine = "rankcollapse.experiments.engine"
    found = []
    for name, path in modules().items():
        if name != engine and not name.startswith(engine + "."):
            continue
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assigned = [t for n in tree.body if isinstance(n, ast.Assign) for t in n.targets]
        defined |= {t.id for t in assigned if isinstance(t, ast.Name)}
        froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported = {a.asname or a.name for n in froms for a in n.names}
        found += [f"{name}: {x}" for x in sorted((defined | imported) & CONTRACT_NAMES)]
    assert not found, found
