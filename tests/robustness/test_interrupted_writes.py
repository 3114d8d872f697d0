"""A full disk and a signal mid-write, for every command that writes a folder: never a finished-looking
half run.

- ``RLIMIT_FSIZE`` (what ``ulimit -f`` sets; writes past it fail with EFBIG, as on a full disk): exit
  2, one line naming the error, and the folder does not look finished (no completion marker, no
  ``metrics.csv``); run again without the limit, the same command completes.
- SIGTERM mid-run: exit 143 (128 + SIGTERM) and one line ``rankcollapse: terminated; ...``; SIGKILL
  mid-run (no clean-up at all): the same folder state. In both the folder does not look finished,
  and a rerun completes it.
- SIGKILL mid-*rerun* (``--overwrite`` into a finished run's folder): the earlier result is whole, byte
  for byte, and still marked complete (the new run was staged aside, never published); the next run
  removes the killed run's staging folder and completes.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from writers import IDS, WRITERS, Writer, assert_finished, error_lines, holding, looks_finished, start

from rankcollapse.edge.folder import is_complete, read_marker

#: Small enough that every command's outputs pass it (figures, reports, metrics), large enough for
#: the first files (the marker, the lock, config.json).
FSIZE = 8 * 1024


def _rerun_completes(writer: Writer, out: Path, extra: tuple[str, ...] = ()) -> None:
    proc = start(writer, out, extra=extra)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert_finished(writer, out)


@pytest.mark.slow
@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_full_disk_is_one_line_and_leaves_nothing_that_looks_finished(
    writer: Writer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = start(writer, out, fsize=FSIZE)
    _, err = proc.communicate(timeout=300)
    lines = error_lines(err)
    assert proc.returncode == 2, err
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error:") and "Traceback" not in err, err
    assert "File too large (EFBIG)" in lines[0], lines[0]
    assert not looks_finished(writer, out)
    _rerun_completes(writer, out)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_signal_mid_run_leaves_nothing_that_looks_finished(
    writer: Writer, sig: int, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = start(writer, out)
    try:
        stopped = holding(proc, out, writer.busy)
        assert stopped, f"the run ended before it could be stopped: {proc.communicate()}"
        proc.send_signal(sig)
    finally:
        proc.send_signal(signal.SIGCONT)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM, err
        lines = error_lines(err)
        assert len(lines) == 1 and lines[0].startswith("rankcollapse: terminated;"), err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert not looks_finished(writer, out)
    _rerun_completes(writer, out)


REPLACING = [w for w in WRITERS if w.command != "reproduce"]  # reproduce resumes: it replaces nothing


@pytest.mark.slow
@pytest.mark.parametrize("writer", REPLACING, ids=[w.command for w in REPLACING])
def test_a_rerun_killed_mid_run_leaves_the_earlier_result_whole(writer: Writer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _rerun_completes(writer, out)
    marker = read_marker(out)
    assert marker is not None
    earlier = {name: (out / name).read_bytes() for name in marker["files"]}
    assert set(writer.finished) <= set(earlier)
    proc = start(writer, out, extra=("--overwrite",))
    try:
        stopped = holding(proc, out, writer.busy)
        assert stopped, f"the rerun ended before it could be stopped: {proc.communicate()}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.send_signal(signal.SIGCONT)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert is_complete(out) and read_marker(out)["files"] == marker["files"]  # type: ignore[index]
    assert {name: (out / name).read_bytes() for name in marker["files"]} == earlier
    assert not (out / "metrics.csv").exists() or (out / "metrics.csv").read_bytes() == earlier["metrics.csv"]
    # the folder still holds the earlier finished run: replacing it is asked for (reproduce resumes)
    _rerun_completes(writer, out, () if writer.command == "reproduce" else ("--overwrite",))
    assert not list(out.glob(".rankcollapse.staging.*"))  # the killed run's staging folder: removed
