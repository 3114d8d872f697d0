"""Two writers into one folder, for every command that writes one: the second gets exit 2 and one
line naming the first's pid; the first finishes with its result intact and complete.

The first writer is stopped (SIGSTOP) as soon as it holds the folder's lock and has written its
marker, so the second surely meets it mid-run; it is continued after the second has been refused.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from writers import IDS, WRITERS, Writer, assert_finished, error_lines, holding, start


@pytest.mark.slow
@pytest.mark.parametrize("writer", WRITERS, ids=IDS)
def test_a_second_writer_is_refused_and_the_first_result_is_intact(writer: Writer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = start(writer, out)
    try:
        assert holding(first, out), (
            f"the first writer ended before it could be stopped: {first.communicate()}"
        )
        second = start(writer, out)
        _, err = second.communicate(timeout=120)
        lines = error_lines(err)
        assert second.returncode == 2, err
        assert len(lines) == 1 and lines[0].startswith("rankcollapse: error:"), err
        assert f"in use by process {first.pid}" in lines[0], lines[0]
    finally:
        first.send_signal(signal.SIGCONT)
    try:
        _, err = first.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        first.kill()
        raise
    assert first.returncode == 0, err
    assert_finished(writer, out)
