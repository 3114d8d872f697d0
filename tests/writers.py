"""Helpers of the writer tests (concurrency, full disk, SIGTERM): each command that writes a folder,
run as a real process, and what a finished run of it looks like."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rankcollapse.edge.folder import LOCK_NAME, is_complete, read_marker


@dataclass(frozen=True)
class Writer:
    """A command writing ``OUT``: a long run (``slow``, seconds: time to stop it mid-run) and the files
    a finished run holds."""

    command: str
    slow: tuple[str, ...]
    finished: tuple[str, ...]
    busy: str  # a glob that matches once the run is writing its results (mid-run from then on)
    rows: int = 0  # metrics.csv rows of a finished simulate / analyze run


#: Where a run writes before it is published (the output layer's staging folder), as a glob.
STAGED = ".rankcollapse.staging.*.tmp/"

WRITERS = (
    Writer("simulate", ("simulate", "--tokens", "8", "--d", "4", "--layers", "3000", "--metrics", "mu",
                        "--no-progress", "--overwrite", "--out", "OUT"),
           ("config.json", "metrics.csv"), "metrics.partial.csv", 3001),
    Writer("analyze", ("analyze", "--model", "tiny:gpt2", "--samples", "4", "--tokens", "64",
                       "--layers", "60", "--out", "OUT"),
           ("config.json", "metrics.csv"), "metrics.partial.csv", 61),
    Writer("portrait", ("portrait", "--out", "OUT"),
           ("paper_figure1.png", "paper_figure5.pdf", "paper_counterexample.json"),
           STAGED + "paper_figure1.png"),
    Writer("counterexample", ("counterexample", "--out", "OUT"),
           ("paper_figure1.png", "paper_figure5.pdf", "paper_counterexample.json"),
           STAGED + "paper_figure1.png"),
    Writer("reproduce", ("reproduce", "--profile", "tiny", "--only", "theorem1,theorem2", "--workers", "1",
                         "--no-progress", "--out", "OUT"),
           ("runs.csv", "claims.csv", "report.html"), "runs/*/*.json"),
)
IDS = [w.command for w in WRITERS]


def _child_setup(fsize: int | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job may inherit SIGINT ignored
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if fsize is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))


def start(writer: Writer, out: Path, fsize: int | None = None,
          extra: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    """``python -m rankcollapse <writer's slow run> <extra>`` into ``out`` (with ``RLIMIT_FSIZE`` when
    given)."""
    args = [str(out) if a == "OUT" else a for a in writer.slow] + [a for a in extra if a not in writer.slow]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "rankcollapse", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: _child_setup(fsize),
    )


def holding(proc: subprocess.Popen[str], out: Path, busy: str | None = None,
            deadline_s: float = 120.0) -> bool:
    """Wait (polling, no sleep) until ``proc`` holds ``out``'s lock, has written its marker and, with
    ``busy``, has begun writing its results (a file matching that glob, not empty); then stop it
    (SIGSTOP) so it stays mid-run. False if it ended first."""
    end = time.monotonic() + deadline_s
    lock = out / LOCK_NAME
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            pid = lock.read_text().strip()
        except OSError:
            pid = ""
        marker = read_marker(out)
        started = busy is None or any(p.is_file() and p.stat().st_size > 0 for p in out.glob(busy))
        if pid == str(proc.pid) and marker is not None and marker.get("pid") == proc.pid and started:
            proc.send_signal(signal.SIGSTOP)
            return proc.poll() is None
    return False


def error_lines(stderr: str) -> list[str]:
    """stderr's lines but reproduce's pre-sweep estimate (a note, not an error)."""
    return [line for line in stderr.splitlines() if line.strip() and " of CPU time for " not in line]


def looks_finished(writer: Writer, out: Path) -> bool:
    """What a reader (a person, pandas, a resume) would take for a finished run: the completion marker,
    or for simulate / analyze a ``metrics.csv``."""
    if is_complete(out):
        return True
    return writer.command in ("simulate", "analyze") and (out / "metrics.csv").exists()


def assert_finished(writer: Writer, out: Path) -> None:
    assert is_complete(out), read_marker(out)
    for name in writer.finished:
        assert (out / name).is_file(), f"{name} missing in {sorted(p.name for p in out.iterdir())}"
    if writer.command in ("simulate", "analyze"):
        import pandas as pd

        rows = pd.read_csv(out / "metrics.csv")
        assert len(rows) == writer.rows
        assert not (out / "metrics.partial.csv").exists()
