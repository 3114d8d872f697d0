"""Every file every command writes into a run folder, under every option, read back by every reader.

A run file has one declaration (``edge.runs``: a ``Table`` per CSV, a ``Record`` per JSON, an ``Array`` per
``.npy``), which its writer writes by and its readers read by. Here each command runs under the options
that change what it writes (diagnostics with two sink heads in a layer, saved attention, the mask check,
per-sample rows, per-document columns, figures in two formats, a subset of metrics, batches, a vision
encoder, an ablation, simulate's runs, ``write_run`` from Python), and then:

- every file the folder's manifest lists is declared (a data file) or a figure of a declared name;
- every data file reads through its declaration, and a table written again through it is the same
  bytes (no cell changes on the way: the reader gives back exactly what the writer meant);
- every reader of the package reads the folder: ``read_run`` (the same rows), its figures, and
  ``rankcollapse plot``;
- a value the declaration does not allow is refused by the writer, when it is written.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.folder import read_marker
from rankcollapse.edge.runs import (
    ATTENTION,
    FIGURES,
    METRICS,
    PER_SAMPLE,
    RUN_RECORD,
    RunWriter,
    declaration,
    read_run_file,
    run_command,
)
from rankcollapse.edge.schema import Array, Record, Table, write_rows

TEXT = "It was the best of times, it was the worst of times, it was the age of wisdom. " * 20


def _analyze(model: str, *more: str) -> list[str]:
    return ["analyze", "--model", model, "--samples", "2", "--no-table", "--no-progress", *more]


#: Each command under the options that change what it writes (name -> its arguments; TEXT = a text file).
CASES: dict[str, list[str]] = {
    "analyze": _analyze("tiny:gpt2", "--text-file", "TEXT", "--tokens", "16"),
    "analyze, every file, two sink heads": _analyze(
        "tiny:gpt2", "--text-file", "TEXT", "--tokens", "16", "--diagnostics", "--sink-threshold", "0.01",
        "--save-attention", "--check-masks", "--per-sample", "--plot", "--plot-format", "png,pdf"),
    "analyze, documents": _analyze(
        "tiny:bert", "--text-file", "TEXT", "--tokens", "16", "--mode", "attn+ln",
        "--mask", "document:lengths=6,10", "--diagnostics", "--per-sample"),
    "analyze, some metrics, batches": _analyze(
        "tiny:gemma3_text", "--text-file", "TEXT", "--tokens", "16", "--metrics", "mu,mu_rel",
        "--batch-size", "1", "--layers", "3", "--plot"),
    "analyze, ablation, float64": _analyze(
        "tiny:bert", "--text-file", "TEXT", "--tokens", "16", "--diagnostics", "--ablation", "sinks",
        "--sink-damping", "0.5", "--dtype", "float64"),
    "analyze, vision encoder": _analyze("tiny:vit", "--diagnostics", "--per-sample", "--save-attention"),
    "simulate": ["simulate", "--mask", "causal", "--tokens", "8", "--d", "4", "--layers", "3",
                 "--no-progress"],
    "simulate, documents, plot": ["simulate", "--mask", "document:lengths=3,5", "--tokens", "8", "--d", "4",
                                  "--layers", "3", "--plot", "--no-progress"],
}
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def _run(args: list[str], text: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(text) if a == "TEXT" else a for a in args])
    assert code == 0, err.getvalue()[-2000:]


def _check_every_file_and_reader(folder: Path) -> None:
    """The checks of the module docstring on one finished folder."""
    from rankcollapse.models.finished import read_run
    from rankcollapse.models.plots import figures

    marker = read_marker(folder)
    assert marker is not None and marker["complete"] is True
    record = RUN_RECORD.read(folder / "config.json")
    command = run_command(record)
    assert record == json.loads((folder / "config.json").read_text())
    for name in marker["files"]:
        if Path(name).suffix in FIGURE_SUFFIXES:
            assert Path(name).stem in FIGURES and "/" not in name, name  # an image of a declared name
            continue
        spec = declaration(name, command)
        got = read_run_file(folder, name)
        if isinstance(spec, Table):
            text = (folder / name).read_bytes().decode("utf-8")
            assert write_rows(spec, got) == text, name  # every cell back as it was written
        elif isinstance(spec, Record):
            assert got == json.loads((folder / name).read_text()), name
        else:
            assert isinstance(spec, Array) and spec is ATTENTION
            assert got.dtype.name == "float32" and got.ndim == 4 and got.shape[-1] == got.shape[-2], name
    run = read_run(folder)
    assert _nan_equal(run.rows, read_run_file(folder, "metrics.csv"))
    assert set(figures(run)) <= set(FIGURES)
    _run(["plot", str(folder), "--out", str(folder.parent / f"{folder.name}-plot.png")], folder)


@pytest.mark.parametrize("case", list(CASES))
def test_every_file_a_command_writes_reads_back_through_its_declaration(case: str, tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    out = tmp_path / "run"
    _run([*CASES[case], "--out", str(out)], text)
    _check_every_file_and_reader(out)


def test_the_reported_run_with_two_sink_heads_in_a_layer_is_read_and_plotted(tmp_path: Path) -> None:
    """Issue 42: ``rankcollapse plot`` refused the tool's own ``--diagnostics`` run (``sink_heads`` is
    '0 2 3 4 5 6 7 8'; allowed: a number)."""
    from rankcollapse.models.finished import read_run

    out = tmp_path / "d"
    _run(["analyze", "--model", "tiny:gpt2", "--diagnostics", "--sink-threshold", "0.01", "--out", str(out),
          "--no-table", "--no-progress"], out)
    rows = read_run(out).rows
    assert any(len(r["sink_heads"]) >= 2 for r in rows[1:]) and rows[0]["sink_heads"] == ()
    assert all(isinstance(h, int) for r in rows for h in r["sink_heads"])
    _run(["plot", str(out), "--out", str(tmp_path / "d.png")], out)


def test_write_run_from_python_reads_back_as_the_rows_it_wrote(tmp_path: Path) -> None:
    """``write_run`` (the Python API's writer): every value of every row and per-sample row comes back as
    its declaration says it reads (numbers as floats, counts as ints, ``sink_heads`` as a tuple)."""
    from rankcollapse.models import AnalyzeConfig, analyze, write_run

    result = analyze(AnalyzeConfig(model="tiny:gpt2", samples=2, tokens=12, diagnostics=True,
                                   sink_threshold=0.01))
    write_run(result, tmp_path / "run", per_sample=True)
    _check_every_file_and_reader(tmp_path / "run")
    for table, rows in ((METRICS, result.rows), (PER_SAMPLE, result.per_sample_rows())):
        got = read_run_file(tmp_path / "run", table.name)
        want = [{k: table.value(k, v) for k, v in row.items()} for row in rows]
        assert _nan_equal(got, want), table.name


def _nan_equal(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_nan_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_nan_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize(("column", "value"), [
    ("mu_rel", "0.5"),          # a number as text
    ("layer", -1),              # a count below 0
    ("layer", 1.5),             # a count that is not whole
    ("sink_heads", "0, 2"),     # not space-separated whole numbers
    ("sink_heads", [0, -2]),
    ("hook", "a\nb"),           # a word over two lines
])
def test_the_writer_refuses_a_value_its_reader_would_refuse(column: str, value: object,
                                                            tmp_path: Path) -> None:
    with RunWriter(tmp_path / "run", {"simulate": {"mask": "causal"}}) as writer:
        writer.write_row({"layer": 0, "mu_rel": 1.0, "sink_heads": "", "hook": ""})
        with pytest.raises(ValueError, match=f"column '{column}' cannot hold"):
            writer.write_row({"layer": 1, "mu_rel": 1.0, "sink_heads": "", "hook": "", column: value})


def test_a_reader_refuses_a_cell_its_declaration_does_not_allow_in_one_line(tmp_path: Path) -> None:
    from rankcollapse.edge.errors import RankCollapseError

    path = tmp_path / "metrics.csv"
    path.write_text("layer,mu_rel,sink_heads\n0,1.0,\n1,0.5,0 x\n")
    with pytest.raises(RankCollapseError, match=r"line 3, column 'sink_heads' is '0 x'; allowed: whole num"):
        METRICS.read(path)
    path.write_text("layer,mu_rel\n0,abc\n")
    with pytest.raises(RankCollapseError, match=r"line 2, column 'mu_rel' is 'abc'; allowed: a number"):
        METRICS.read(path)
