"""The metrics profile (benchmarks/bench_metrics.py) still runs, at tiny sizes; it times nothing here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_metrics.py"


def test_bench_metrics_prints_one_row_per_length_and_thread_count(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_metrics", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["bench_metrics", "--tokens", "16,40", "--d", "8", "--threads", "1",
                                      "--repeats", "1"])
    assert module.main() == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines if line.split()[:1] in (["16"], ["40"])]
    assert [r[:2] for r in rows] == [["16", "1"], ["40", "1"]]
    assert all(len(r) == 11 for r in rows)
