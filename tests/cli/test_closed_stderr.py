"""A command started with stderr closed (``2>&-``): Python sets ``sys.stderr`` to None and every
``print(file=sys.stderr)`` wrote to stdout, mixing error lines (and warnings) into the command's output.
Decided (``cli.main.reopen_stderr``): with a controlling terminal the lines go to it (``/dev/tty``) and
stdout stays the output; with none, fd 2 is ``/dev/null`` and the error line alone goes to stdout, the
one stream left; exit 2 and no traceback either way."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import termios

import pytest

BAD = ["plot", "no-such-run", "--out", "x.png"]


def _run(args: list[str], tty: int | None, cwd: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m rankcollapse ARGS 2>&-`` in a new session (no terminal), or with the pty slave ``tty``
    as its controlling terminal; stdout captured."""

    def child() -> None:
        os.setsid()
        if tty is not None:
            fcntl.ioctl(tty, termios.TIOCSCTTY, 0)
        os.close(2)

    return subprocess.run([sys.executable, "-m", "rankcollapse", *args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, preexec_fn=child, pass_fds=() if tty is None else (tty,),
                          cwd=cwd, timeout=120, check=False)


def _drain(fd: int) -> bytes:
    out = b""
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the last writer closed the pty
            break
        if not chunk:
            break
        out += chunk
    return out


def test_with_a_terminal_the_error_line_goes_to_it_and_stdout_stays_clean(tmp_path):
    master, slave = pty.openpty()
    try:
        proc = _run(BAD, slave, str(tmp_path))
        shown = _drain(master).decode(errors="replace")
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 2
    assert proc.stdout == b"", proc.stdout  # the command's output holds no error line
    lines = [line for line in shown.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error:"), shown
    assert "no-such-run" in lines[0]


def test_without_a_terminal_the_error_line_alone_goes_to_stdout(tmp_path):
    proc = _run(BAD, None, str(tmp_path))
    lines = proc.stdout.decode().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("rankcollapse: error:"), lines
    assert b"Traceback" not in proc.stdout


@pytest.mark.parametrize("terminal", [False, True], ids=["no terminal", "a terminal"])
def test_a_warning_never_lands_in_stdout(tmp_path, terminal):
    """A warning (stderr's; here simulate's overflow line) is not output: with stderr closed it went to
    stdout."""
    args = ["simulate", "--tokens", "8", "--d", "4", "--value", "scaled-identity", "--value-scale", "1000",
            "--dtype", "float32", "--layers", "100", "--samples", "2", "--no-progress",
            "--out", str(tmp_path / "run")]
    master, slave = pty.openpty() if terminal else (None, None)
    try:
        proc = _run(args, slave, str(tmp_path))
        shown = _drain(master).decode(errors="replace") if terminal else ""
    finally:
        for fd in (master, slave):
            if fd is not None:
                os.close(fd)
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert "wrote" in out and "rankcollapse: warning" not in out, out
    assert ("rankcollapse: warning" in shown) == terminal, shown
