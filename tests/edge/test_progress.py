"""Progress off a terminal: plain lines at a fixed schedule, never a carriage return or cursor code."""

from __future__ import annotations

import io

from rankcollapse.edge.progress import Progress, progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_after_the_delay_then_every_period_and_once_at_close():
    stream, clock = io.StringIO(), Clock()
    bar = Progress(100, "analyze m", "layers", stream=stream, delay=2.0, every=10.0, clock=clock)
    for step in range(100):
        clock.now = 0.5 * step  # 0.5 s per layer: 50 s in all
        bar.update(1)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()
    # the first once 2 s have passed (layer 5 at 2.0 s), then every 10 s (2, 12, 22, 32, 42), and the last
    assert len(lines) == 6 and lines[0] == "rankcollapse: analyze m: 5/100 layers (5%), 2 s, about 38 s left"
    assert lines[-1] == "rankcollapse: analyze m: 100/100 layers (100%), 50 s"


def test_a_short_run_prints_nothing_and_a_disabled_one_never():
    stream, clock = io.StringIO(), Clock()
    with Progress(10, "x", stream=stream, clock=clock) as bar:
        for _ in range(10):
            clock.now += 0.1
            bar.update()
    assert stream.getvalue() == ""
    quiet = progress(10, "x", enabled=False, stream=stream)
    quiet.update(10)
    quiet.close()
    assert stream.getvalue() == ""


def test_on_a_terminal_it_is_a_bar():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    bar = Progress(3, "x", stream=Tty(), delay=0.0)
    assert bar._bar is not None
    bar.close()


def test_a_terminal_that_reports_no_size_still_shows_the_bar() -> None:
    """Under ``script`` (a pseudo-terminal of 0 x 0) tqdm took every row as off-screen and drew nothing:
    an 18 s analyze showed no progress at all. A new pty reports 0 x 0 too."""
    import os
    import pty
    import subprocess
    import sys

    code = (
        "from rankcollapse.edge.progress import Progress\n"
        "p = Progress(10, 'demo', 'layers', delay=0.0)\n"
        "for _ in range(10):\n    p.update(1)\n"
        "p.close()\n"
    )
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-c", code], stderr=slave, stdout=slave, timeout=60,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0 and b"demo:" in out and b"/10 [" in out  # the bar was drawn


def test_one_progress_rule_the_command_line_shows_it_python_asks_for_it() -> None:
    """Every command that runs long shows progress by default (``--no-progress`` hides it); every Python
    entry point is silent by default (``progress=True`` shows it): a program's stderr stays its own."""
    import dataclasses
    import inspect

    from rankcollapse.experiments.engine.executors import run_sweep
    from rankcollapse.models.analyze import analyze
    from rankcollapse.pipeline.reproduce import ReproduceConfig

    python = {
        "analyze": inspect.signature(analyze).parameters["progress"].default,
        "run_sweep": inspect.signature(run_sweep).parameters["progress"].default,
        "ReproduceConfig": {f.name: f.default for f in dataclasses.fields(ReproduceConfig)}["progress"],
    }
    assert python == dict.fromkeys(python, False)
    from rankcollapse.cli import analyze as cli_analyze
    from rankcollapse.cli import reproduce as cli_reproduce
    from rankcollapse.cli import simulate as cli_simulate

    commands = {
        "analyze": cli_analyze.analyze_command,
        "reproduce": cli_reproduce.reproduce_command,
        "simulate": cli_simulate.simulate_command,
    }
    shown = {name: inspect.signature(fn).parameters["progress"].default.default
             for name, fn in commands.items()}
    assert shown == dict.fromkeys(commands, True)
