"""A run's ``metrics.csv`` as ``rankcollapse plot`` reads it: through the one table reader
(``edge.inputs.read_table``), so a missing column, a word or NaN where the layer index goes, a word in
a number column, a ragged row, an empty file or binary junk is one line naming the file, the line and
the column, exit 2 -- never a ValueError / OverflowError traceback from ``float()`` or ``int()`` deep in
the figure code, and never a figure drawn from a table with holes punched by junk."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import read_table


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished simulate run (config.json, metrics.csv, its marker complete)."""
    run = tmp_path_factory.mktemp("finished") / "sim"
    args = ["simulate", "--tokens", "4", "--d", "2", "--layers", "3", "--no-progress", "--out", str(run)]
    assert main(args) == 0
    return run


def _rows(run: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO((run / "metrics.csv").read_text())))


def _table(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def _drop(rows: list[list[str]], name: str) -> list[list[str]]:
    k = rows[0].index(name)
    return [r[:k] + r[k + 1 :] for r in rows]


def _set(rows: list[list[str]], line: int, name: str, value: str) -> list[list[str]]:
    rows = [list(r) for r in rows]
    rows[line - 1][rows[0].index(name)] = value
    return rows


#: name -> (the table's bytes from the intact rows, words the one line must hold)
CASES = {
    "no layer column": (lambda r: _table(_drop(r, "layer")), ["no column layer"]),
    "no mu_rel column": (lambda r: _table(_drop(r, "mu_rel")), ["no column mu_rel"]),
    "a word as a layer": (lambda r: _table(_set(r, 3, "layer", "abc")), ["line 3", "'layer'", "'abc'"]),
    "NaN as a layer": (lambda r: _table(_set(r, 2, "layer", "nan")), ["line 2", "'nan'", "whole number"]),
    "1e400 as a layer": (lambda r: _table(_set(r, 2, "layer", "1e400")), ["'1e400'", "whole number"]),
    "a word in a number column": (lambda r: _table(_set(r, 4, "mu", "zz")), ["line 4", "'mu'", "'zz'"]),
    "NUL bytes in a cell": (lambda r: _table(_set(r, 2, "mu_rel", "\x00\x01")), ["line 2", "'mu_rel'"]),
    "a ragged row": (lambda r: _table([*r[:2], r[2][:3], *r[3:]]), ["line 3 has 3 cells"]),
    "a column named twice": (lambda r: _table([[*x, x[0]] for x in r]), ["column 'layer' twice"]),
    "empty file": (lambda r: b"", ["is empty"]),
    "header only": (lambda r: _table(r[:1]), ["no rows"]),
    "a quote that never closes": (lambda r: b'layer,mu_rel\n"0,0.5\n', ["line 2 has 1 cells"]),
    "binary junk": (lambda r: b"\x89PNG\r\n\x1a\n\x00\xff" * 40, ["not UTF-8"]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_plot_on_a_malformed_metrics_csv_is_one_line_naming_the_cell(finished, tmp_path, capsys, case):
    make, words = CASES[case]
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "metrics.csv").write_bytes(make(_rows(finished)))
    capsys.readouterr()
    code = main(["plot", str(run), "--out", str(tmp_path / "p.png")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error: metrics table"), err
    assert "metrics.csv" in lines[0] and all(w in lines[0] for w in words), lines[0]
    assert not (tmp_path / "p.png").exists()


def test_the_intact_run_plots(finished, tmp_path):
    """The control: the same folder, unharmed, plots (the refusals above are the tables')."""
    assert main(["plot", str(finished), "--out", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_read_table_keeps_what_a_table_may_hold(tmp_path):
    """Numbers in every spelling Python writes (``nan``, ``inf``, ``-1.5e-300``), empty cells (not
    measured), words in the columns the caller does not call numeric, blank lines: read as given."""
    path = tmp_path / "t.csv"
    path.write_text("layer,mu,status,model_layer\n0,nan,ok,\n\n1,-1.5e-300,underflow,0\n12,inf,ok,1\n")
    rows = read_table(path, "metrics table", required=("layer",), integer=("layer",),
                      numeric=lambda c: c != "status")
    assert [r["layer"] for r in rows] == ["0", "1", "12"]
    assert [r["status"] for r in rows] == ["ok", "underflow", "ok"] and rows[0]["model_layer"] == ""
    path.write_text("layer,mu\n0,\u0661\n")  # float() reads Arabic-Indic digits; a table does not
    with pytest.raises(RankCollapseError, match="column 'mu'"):
        read_table(path, "metrics table", numeric=lambda c: True)
