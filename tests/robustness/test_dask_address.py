"""A malformed Dask address is our one line and nothing after it (issue 39, tracebacks): the line was
followed, 20 s later, by a ``Client.__del__`` traceback (``TimeoutError: timed out after 20 s``) from the
half-built Client a failed constructor left behind (the estimate's worker count, then the sweep's). Each
is stopped where its constructor fails (``engine.executors._release_half_built``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("distributed")


@pytest.mark.parametrize("address", ["inproc://x", "tcp://[[::1:80"])
def test_a_malformed_dask_address_is_one_line_and_no_traceback_after_it(tmp_path, address):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "x.yaml").write_text("title: t\ntask: toy\nbase: {sleep_s: 0, layers: 2, rate: 0.5}\n"
                                               "grid: {seed: [0]}\n")
    done = subprocess.run(
        [sys.executable, "-m", "rankcollapse", "reproduce", "--config-dir", str(tmp_path / "cfg"),
         "--executor", "dask", "--scheduler", address, "--no-progress", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert lines[-1].startswith("rankcollapse: error: cannot reach Dask scheduler"), done.stderr
