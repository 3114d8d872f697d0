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
    counts = [r for r in rows if r[1] == "forward"]  # the multiply-add table, then the timed one
    timed = [r for r in rows if r[1] != "forward"]
    assert [r[0] for r in counts] == ["16", "40"]
    assert [r[:2] for r in timed] == [["16", "1"], ["40", "1"]]
    assert all(len(r) == 15 for r in timed)


def test_the_multiply_add_counts_are_the_closed_forms() -> None:
    """One causal forward layer of SmolLM2's shape and each metric's count, by hand at N = 8,192."""
    spec = importlib.util.spec_from_file_location("bench_metrics", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    n, d, d_ff, d_kv = 8192, 576, 1536, 192
    m = module.multiply_adds(n, d, d_ff, d_kv)
    layer = n * d * d + 2 * n * d * d_kv + n * d * d + 3 * n * d * d_ff + n * n * d  # Q, K+V, O, MLP, attn
    assert m["forward layer"] == layer
    assert m["|cos|"] == n * (n - 1) * d / 2 + n * d / 2  # every pair once, the diagonal's half
    assert m["gram (f64)"] == 0.75 * n * d * d and m["eigvalsh (f64)"] == 2 * d**3 / 3
    assert 0.28 < m["|cos|"] / layer < 0.30  # the exact all-pairs |cos| alone is past a 25 % share
