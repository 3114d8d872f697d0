"""The options several commands share are declared once (issue 43 item 3, a thin CLI): ``cli.options``
holds ``--out``, ``--overwrite``, ``--progress``, ``--threads``, ``--seed``, ``--dtype``, ``--device`` and
``--download``;
no command module spells them itself (two named exceptions: ``plot --out`` is a figure file, not a run
folder, and ``reproduce --out`` a resumable sweep folder, not one replaced by ``--overwrite``). Every
command that has one of them shows the same rule in its help, and ``--overwrite`` means one policy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rankcollapse.cli.main import main
from rankcollapse.cli.options import existing

CLI = Path(__file__).resolve().parents[2] / "src" / "rankcollapse" / "cli"
SHARED = ("--out", "--overwrite", "--progress/--no-progress", "--threads", "--seed", "--dtype", "--device",
          "--download")
EXCEPTIONS = {("plot.py", "--out"), ("reproduce.py", "--out")}


def test_no_command_declares_a_shared_option_itself():
    found = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "options.py":
            continue
        text = path.read_text()
        for flag in SHARED:
            # a typer.Option whose flag is the shared one, on its line or the next
            if re.search(r"typer\.Option\([^)]*?\n?\s*[^)]*?\"" + re.escape(flag) + "\"", text) and (
                    path.name, flag) not in EXCEPTIONS:
                found.append((path.name, flag))
    assert found == []


@pytest.mark.parametrize("command", ["analyze", "simulate", "portrait"])
def test_the_shared_options_read_the_same_in_every_command(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "earlier run of this command with --overwrite" in text
    assert "never replaced" in text


def test_one_overwrite_policy():
    assert existing(True) == "replace" and existing(False) == "refuse"


@pytest.mark.parametrize("command", ["analyze", "reproduce"])
def test_download_reads_the_same_in_every_command(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--download Allow the network: " in text
    assert "Same as RANKCOLLAPSE_DOWNLOAD=1. Without it nothing is downloaded." in text
