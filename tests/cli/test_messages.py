"""Messages that say what is wrong: the cause a user can act on, never an internal name or a wrong guess.

Each case was a misleading line before: a memory estimate for a context overflow, an internal
function's argument for an overflowing ``--qk-scale``, a "zero token" for an overflow, "does not
exist" for a FIFO or a device, "offline" for a folder transformers does not know, a schedule's
internal name for ``--layers``; and a read-only or foreign ``--out`` found only after the model
had loaded.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from rankcollapse.cli.main import main


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def one_line(args: list[str]) -> str:
    code, _, err = run_cli(args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rankcollapse: error:"), err
    return lines[0]


def test_tokens_beyond_the_context_say_the_context_before_any_memory_estimate(tmp_path: Path) -> None:
    line = one_line(
        ["analyze", "--model", "random:bert-base-uncased", "--tokens", "100000", "--out", str(tmp_path / "o")]
    )
    assert "context" in line and "512" in line and "memory" not in line


def test_an_overflowing_qk_scale_is_an_overflow_not_an_internal_argument(tmp_path: Path) -> None:
    code, out, err = run_cli(
        [
            "simulate",
            "--qk-scale",
            "1e200",
            "--tokens",
            "4",
            "--d",
            "2",
            "--layers",
            "3",
            "--json",
            "--no-progress",
            "--out",
            str(tmp_path / "a"),
        ]
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["state"] == "overflow" and not summary["theory"]["applicable"]
    assert "argument" not in err and "overflow" in err
    code, _, err = run_cli(
        [
            "simulate",
            "--mode",
            "attn+sphere",
            "--qk-scale",
            "1e200",
            "--tokens",
            "4",
            "--d",
            "2",
            "--layers",
            "3",
            "--no-progress",
            "--out",
            str(tmp_path / "b"),
        ]
    )
    assert code == 0 and "zero token" not in err and "overflow" in err, err


@pytest.mark.parametrize(
    ("make", "words"), [(os.mkfifo, "FIFO"), (lambda p: p.symlink_to("/dev/zero"), "character device")]
)
def test_a_special_file_is_named_as_what_it_is(tmp_path: Path, make, words: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "w.npy"
    make(path)
    for args in (
        ["equilibria", "--tokens", "2", "--d", "2", "--value", str(path)],
        ["mask", f"file:{path}", "--tokens", "2"],
        ["mask", "--hf-config", str(path), "--tokens", "2"],
    ):
        line = one_line(args)
        assert words in line and "not exist" not in line and "not found" not in line, line


def test_analyze_layers_out_of_range_names_the_flag(tmp_path: Path) -> None:
    line = one_line(
        ["analyze", "--model", "tiny:bert", "--layers", "100000000", "--out", str(tmp_path / "o")]
    )
    assert "--layers" in line and "schedule" not in line


def test_a_hub_name_without_download_says_how_to_download_not_offline(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    line = one_line(["analyze", "--model", "someone/some-model", "--out", str(tmp_path / "o")])
    assert "--download" in line and "offline" not in line and "minilm" in line


@pytest.mark.parametrize("problem", ["not ours", "not writable", "under a file"])
def test_a_bad_out_is_found_before_the_model_loads(tmp_path: Path, monkeypatch, problem: str) -> None:
    import rankcollapse.edge.folder as rio
    import rankcollapse.models.loading as loading

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr(loading, "load_model", never)
    out = tmp_path / "out"
    if problem == "not ours":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif problem == "not writable":  # as on a read-only file system (root passes permission bits)
        out.mkdir()
        real = os.access
        monkeypatch.setattr(
            rio.os, "access", lambda p, mode: real(p, mode) and not (Path(p) == out and mode & os.W_OK)
        )
    else:
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "out"
    line = one_line(["analyze", "--model", "tiny:bert", "--out", str(out)])
    words = {"not ours": "did not make", "not writable": "not writable", "under a file": "ENOTDIR"}[problem]
    assert words in line, line


def test_a_simulation_that_overflows_is_one_warning_line_and_its_rows_are_kept(tmp_path: Path) -> None:
    """The overflow goes through the one warning channel (``rankcollapse: warning: ...``), exit 0, and the
    rows up to the overflow are written, the last one marked."""
    out = tmp_path / "ovf"
    code, _, err = run_cli(["simulate", "--dtype", "float32", "--value-scale", "1000", "--layers", "60",
                            "--mode", "attn+skip", "--no-progress", "--out", str(out)])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 0 and len(lines) == 1, err
    assert lines[0].startswith("rankcollapse: warning: the run turned non-finite at layer ")
    rows = (out / "metrics.csv").read_text().splitlines()
    assert 2 < len(rows) < 62  # stopped early, the rows before it kept
