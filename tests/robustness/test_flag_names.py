"""Issue 39: a config error caused by a flag names the flag (``--d-qk``), not the field (``d_qk``).

The configs validate under their field names, the Python API's words; ``cli.main.flag_named`` rewrites the
opening field of an error line to the flag the user typed, for every command at once.
"""

from __future__ import annotations

import pytest

from rankcollapse.cli.main import flag_named, main


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("value", ["0", "-1"])
def test_simulate_d_qk_out_of_range_names_the_flag(value, tmp_path, capsys):
    code = main(["simulate", f"--d-qk={value}", "--out", str(tmp_path / "o")])
    assert code == 2
    line = _line(capsys)
    assert line.startswith("rankcollapse: error: --d-qk must be > 0"), line
    assert not (tmp_path / "o").exists()


def test_a_field_the_user_did_not_type_keeps_its_name():
    import typer

    from rankcollapse.cli.app import app
    from rankcollapse.cli.main import load_commands

    load_commands(["simulate"])
    command = typer.main.get_command(app)
    text = "d_qk must be > 0, got 0"
    assert flag_named(text, command, ["simulate", "--layers", "3"]) == text
    assert flag_named(text, command, ["simulate", "--d-qk", "0"]) == "--d-qk must be > 0, got 0"
    # a word that is no field of the command is left alone, whatever the flags
    assert flag_named("layersx must be", command, ["simulate", "--layers", "3"]) == "layersx must be"
    assert flag_named(text, command, []) == text
