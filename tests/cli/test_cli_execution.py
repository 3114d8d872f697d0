"""``--device`` and ``--batch-size`` on ``analyze`` and ``reproduce``: every refusal is one line on stderr
with exit code 2, before anything is written. CUDA is faked by monkeypatching torch's answers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import rankcollapse.core.execution as execution
from rankcollapse.cli.main import main

ANALYZE = [
    "analyze",
    "--model",
    "tiny:bert",
    "--layers",
    "2",
    "--samples",
    "3",
    "--tokens",
    "12",
    "--no-table",
    "--no-progress",
]
REPRODUCE = [
    "reproduce",
    "--profile",
    "tiny",
    "--only",
    "theorem2.hemisphere",
    "--workers",
    "1",
    "--no-progress",
]


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("rankcollapse: error:") and "\n" not in err and "Traceback" not in err
    return err


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


@pytest.mark.parametrize("command", [ANALYZE, REPRODUCE], ids=["analyze", "reproduce"])
@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--device", "gpu"], "allowed: cpu, cuda, cuda:K"),
        (["--device", "cpu:1"], "the CPU has no index"),
        (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    ],
)
def test_bad_execution_options_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], options: list[str], needle: str
) -> None:
    out = tmp_path / "out"
    assert needle in _one_line_error([*command, *options, "--out", str(out)], capsys)
    assert not out.exists()


@pytest.mark.parametrize("command", [ANALYZE, REPRODUCE], ids=["analyze", "reproduce"])
def test_cuda_without_a_gpu_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    _fake_gpus(monkeypatch, 0)
    out = tmp_path / "out"
    err = _one_line_error([*command, "--device", "cuda", "--out", str(out)], capsys)
    assert "--device cuda: no CUDA GPU here" in err and torch.__version__ in err
    assert not out.exists()


@pytest.mark.parametrize("command", [ANALYZE, REPRODUCE], ids=["analyze", "reproduce"])
def test_a_gpu_index_beyond_those_visible_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    _fake_gpus(monkeypatch, 1)
    err = _one_line_error([*command, "--device", "cuda:3", "--out", str(tmp_path / "out")], capsys)
    assert "torch sees 1 CUDA GPU here; allowed: cuda:0 .. cuda:0" in err
    assert not (tmp_path / "out").exists()


def test_float64_on_a_device_without_it_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_gpus(monkeypatch, 1)
    monkeypatch.setattr(execution, "supports_float64", lambda device: device.type == "cpu")
    err = _one_line_error(
        [*ANALYZE, "--device", "cuda", "--dtype", "float64", "--out", str(tmp_path / "o")], capsys
    )
    assert "float64 is not supported" in err and "--dtype float32" in err


def test_saving_attention_needs_one_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error(
        [*ANALYZE, "--diagnostics", "--save-attention", "--batch-size", "2", "--out", str(tmp_path / "o")],
        capsys,
    )
    assert "needs one batch" in err and not (tmp_path / "o").exists()


def test_analyze_records_its_device_and_batch_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    assert main([*ANALYZE, "--batch-size", "2", "--device", "cpu", "--out", str(tmp_path / "o")]) == 0
    config = json.loads((tmp_path / "o" / "config.json").read_text())["config"]["analyze"]
    assert config["device"] == "cpu" and config["batch_size"] == 2
