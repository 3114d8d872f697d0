"""One output layer for rankcollapse's own lines (issue 39, control bytes; issue 43 item 3, one warning
channel): every ``rankcollapse: warning|note: ...`` line goes through ``edge.messages`` and every CLI error
and standard-output line through ``printable`` / ``printable_stdout``, so a string read from a file, an
exception or a path cannot clear the screen, move the cursor or forge a line. Before, the monitor's
warnings, the run store's warning, ``reproduce --list`` (a custom YAML's title) and the ``--out`` echo wrote
such strings raw, and seven modules wrote warning lines by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge import messages

SRC = Path(__file__).resolve().parents[2] / "src" / "rankcollapse"
HOSTILE = "x\x1b[2J\x07\ry\x9b\nrankcollapse: error: forged"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_no_module_writes_a_warning_or_note_line_by_hand():
    by_hand = re.compile(r"""print\(\s*f?["']rankcollapse: (warning|note)""")
    found = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
             if p.name != "messages.py" and by_hand.search(p.read_text())]
    assert found == []


@pytest.mark.parametrize("emit,kind", [(messages.warning, "warning"), (messages.note, "note")])
def test_a_warning_or_note_is_one_escaped_line(emit, kind, capsys):
    emit(f"about {HOSTILE}")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not RAW.search(err.rstrip("\n"))
    assert err.startswith(f"rankcollapse: {kind}: about x\\x1b[2J\\x07\\ry\\x9b\\nrankcollapse: error")


def test_the_out_echo_and_an_error_quoting_a_path_are_escaped(tmp_path, capsys):
    out = tmp_path / "run\x1b[2J\x07"
    assert main(["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", "--layers", "1",
                 "--out", str(out), "--no-progress", "--no-table"]) == 0
    printed = capsys.readouterr().out
    # on a terminal the escape sequence is escaped; off one click strips it first: either way none is raw
    assert "\\x07" in printed and not RAW.search(printed.replace("\n", ""))
    assert main(["plot", str(tmp_path / "none\x1b[31m"), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not RAW.search(err.rstrip("\n"))


def test_reproduce_list_escapes_a_custom_yamls_title(tmp_path, capsys):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "x.yaml").write_text(
        'title: "clear\\e[2J the screen\\a"\ntask: toy\nbase: {layers: 2}\ngrid: {seed: [0]}\n')
    assert main(["reproduce", "--config-dir", str(tmp_path / "cfg"), "--list"]) == 0
    printed = capsys.readouterr().out
    assert "the screen\\x07" in printed and not RAW.search(printed.replace("\n", ""))


def test_the_monitors_warning_escapes_the_exception_it_quotes(capsys):
    torch = pytest.importorskip("torch")
    from torch import nn

    from rankcollapse.monitor import Monitor

    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4)])

        def forward(self, ids):
            raise RuntimeError(f"bad {HOSTILE}")

    monitor = Monitor(every=1)
    assert monitor.step(Broken(), torch.zeros(2, 3, dtype=torch.long)) == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rankcollapse: warning: monitor:" in err
    assert not RAW.search(err.rstrip("\n"))
