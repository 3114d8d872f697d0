"""The CLI shell: every command has --help, and user errors are one line with exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rankcollapse.cli.main import main

COMMANDS = ["mask", "simulate", "equilibria", "portrait", "analyze", "reproduce"]


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert "Usage" in capsys.readouterr().out


def test_unknown_command_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rankcollapse: error:")
    assert len(err.splitlines()) == 1


def test_unknown_option_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mask", "complete", "--no-such-option"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no-such-option" in err
    assert len(err.splitlines()) == 1


def test_console_script_runs_as_module_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rankcollapse", "mask", "nonsense-family", "--n", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
