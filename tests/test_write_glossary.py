"""scripts/write_glossary.py renders the report's one glossary as docs/glossary.md, and says clearly
when that glossary is not there."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "write_glossary.py"


@pytest.fixture
def script():
    spec = importlib.util.spec_from_file_location("write_glossary", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_lists_every_term_once_sorted_with_its_definition(script, tmp_path, monkeypatch):
    fake = types.ModuleType(script.SOURCE)
    fake.GLOSSARY = {"vacuous": "the bound says nothing", "SAN": "self-attention only | no MLP",
                     "at floor": "mu_rel below 32 eps"}
    monkeypatch.setitem(sys.modules, script.SOURCE, fake)
    out = tmp_path / "glossary.md"
    assert script.main(["--out", str(out)]) == 0
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["| at floor | mu_rel below 32 eps |", "| SAN | self-attention only \\| no MLP |",
                    "| vacuous | the bound says nothing |"]
    assert script.main(["--out", str(out), "--check"]) == 0
    fake.GLOSSARY["new"] = "a new term"
    assert script.main(["--out", str(out), "--check"]) == 1


def test_without_the_glossary_module_it_stops_with_one_clear_line(script, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, script.SOURCE, None)  # import fails
    with pytest.raises(SystemExit) as stop:
        script.main(["--out", str(tmp_path / "g.md")])
    assert stop.value.code == 2 and not (tmp_path / "g.md").exists()
    err = capsys.readouterr().err.strip()
    assert err.startswith("write_glossary: error: cannot import") and "\n" not in err
