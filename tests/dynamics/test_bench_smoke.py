"""The dynamics benchmark still runs (tiny sizes, targets not judged)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_dynamics.py"


def test_bench_dynamics_quick_run(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_dynamics", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "complete float32" in out and "speed-up" in out and "targets not judged" in out
