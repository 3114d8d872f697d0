"""The package-root modules moved into ``rankcollapse.edge``; their old names import for one release,
each with one deprecation line that names the new home."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rankcollapse.edge.deprecation import MOVED_MODULES


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_module_name_imports_its_new_home_with_one_warning(old: str) -> None:
    """In a fresh interpreter (the module cache would hide the import): the old name is importable,
    warns once with a RankCollapseDeprecation naming every new home, and holds the new home's names."""
    code = (
        "import warnings, importlib\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        "    importlib.import_module({old!r})\n"
        f"homes = [importlib.import_module(n) for n in {MOVED_MODULES[old]!r}]\n"
        "lines = [str(w.message) for w in caught]\n"
        "assert len(lines) == 1, lines\n"
        "assert type(caught[0].message).__name__ == 'RankCollapseDeprecation', caught[0]\n"
        f"assert all(n in lines[0] for n in {MOVED_MODULES[old]!r}), lines\n"
        "for home in homes:\n"
        "    for name in [n for n in vars(home) if not n.startswith('_')]:\n"
        "        assert getattr(old, name) is getattr(home, name), name\n"
    ).replace("{old!r}", repr(old))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_nothing_in_the_package_imports_an_old_name() -> None:
    """The aliases are for users: the package and its tests import the new homes."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    olds = [name for name in MOVED_MODULES]
    offenders = []
    for folder in ("src", "tests", "benchmarks", "scripts"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            for old in olds:
                if f"from {old} import" in text or f"import {old}\n" in text or f"import {old} as" in text:
                    offenders.append(f"{path.relative_to(root)}: {old}")
    assert not offenders, offenders
