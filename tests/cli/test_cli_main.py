"""The CLI shell: every command has --help, and user errors are one line with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rankcollapse.cli.main import main

COMMANDS = ["mask", "simulate", "equilibria", "portrait", "analyze", "reproduce"]


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert "Usage" in capsys.readouterr().out


def test_unknown_command_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rankcollapse: error:")
    assert len(err.splitlines()) == 1


def test_unknown_option_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mask", "complete", "--no-such-option"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no-such-option" in err
    assert len(err.splitlines()) == 1


def test_console_script_runs_as_module_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rankcollapse", "mask", "nonsense-family", "--tokens", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _default_sigint() -> None:
    """In the child: SIGINT back to its default. A job started in the background of a script (as CI
    may start this suite) inherits SIGINT ignored, and Python then installs no Ctrl-C handler."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args: list[str]) -> subprocess.Popen[str]:
    import os

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "rankcollapse", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_default_sigint)


@pytest.mark.parametrize("delay", [0.3, 1.5, "rows"])
def test_ctrl_c_at_any_moment_is_one_line_and_exit_130(tmp_path: Path, delay: float | str) -> None:
    """SIGINT during start-up (imports), during the run, or once rows are being written."""
    import signal
    import time

    out = tmp_path / "run"
    proc = _start(["simulate", "--tokens", "8", "--d", "4", "--layers", "100000", "--metrics", "mu",
                   "--no-progress", "--out", str(out)])
    if delay == "rows":
        deadline = time.time() + 60
        partial = out / "metrics.partial.csv"  # rows stream here; metrics.csv only once complete
        while not partial.exists() or partial.stat().st_size < 200:
            assert time.time() < deadline and proc.poll() is None, "the run never wrote rows"
            time.sleep(0.05)
    else:
        time.sleep(float(delay))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == ["rankcollapse: interrupted; results already written are kept"], err
    if delay == "rows":
        rows = (out / "metrics.partial.csv").read_text().splitlines()
        assert len(rows) >= 3 and rows[0].startswith("layer,mu")
        assert not (out / "metrics.csv").exists()  # an interrupted run never looks finished


HEAVY = ("torch", "transformers", "matplotlib", "pandas", "dask", "scipy")
_PROBE = """
import sys
from rankcollapse.cli.main import main
main({args!r})
print("HEAVY=" + ",".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize(("args", "allowed"), [(["--help"], ()), (["mask", "--help"], ()),
                                               (["simulate", "--help"], ()), (["analyze", "--help"], ()),
                                               (["mask", "causal", "--tokens", "32"], ("scipy",))])
def test_start_up_imports_no_heavy_library(args: list[str], allowed: tuple[str, ...]) -> None:
    """The front door stays fast: help and a small mask load none of the heavy libraries."""
    code = _PROBE.format(args=args, heavy=HEAVY)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("HEAVY="), proc.stdout[-500:]
    loaded = set(filter(None, last[len("HEAVY=") :].split(",")))
    assert loaded <= set(allowed), f"rankcollapse {' '.join(args)} imported {sorted(loaded)}"


def test_lazy_loading_imports_only_the_command_run() -> None:
    code = ("import sys\nfrom rankcollapse.cli.main import main\nmain(['mask', 'causal', '--tokens', '4'])\n"
            "print('LOADED=' + ','.join(m for m in ('simulate', 'analyze', 'equilibria', 'reproduce') "
            "if 'rankcollapse.cli.' + m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "LOADED="


@pytest.mark.parametrize("args", [
    ["equilibria", "--tokens", "4", "--d", "3", "--starts", "256", "--layers", "20000"],
    # 24 s and 0.5 GB (p=0.5 needs 9 GB: refused, exit 2, where another job holds the memory)
    ["mask", "random:p=0.02,seed=1", "--tokens", "20000"],
    ["counterexample", "--measure"],
    pytest.param(["analyze", "--model", "tiny:gpt2", "--samples", "4", "--tokens", "64", "--layers", "200",
                  "--out", "OUT"], marks=pytest.mark.slow),
    # the surrogate: 4.9 s on an idle machine; the paper's construction (2.4 s) ended while the interrupt
    # at 2 s came, inside the interpreter's shutdown (SIG_DFL again: a death by SIGINT, no line)
    pytest.param(["portrait", "--construction", "ours", "--out", "OUT"], marks=pytest.mark.slow),
], ids=lambda a: a[0])
def test_ctrl_c_in_every_command_is_one_line_and_exit_130(args: list[str], tmp_path: Path) -> None:
    import signal
    import time

    proc = _start([str(tmp_path / "out") if a == "OUT" else a for a in args])
    time.sleep(2.0)
    assert proc.poll() is None, "the command finished before the interrupt; make it longer"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert [line for line in err.splitlines() if line.strip()] == [
        "rankcollapse: interrupted; results already written are kept"], err


_IMPORT_PROBE = """
import os, pathlib, signal, sys, tempfile, time
from rankcollapse.cli import main as m
signal.signal(signal.SIGINT, m._on_sigint)
folder = tempfile.mkdtemp()
pathlib.Path(folder, "slowmod.py").write_text(
    "import os, signal, time\\nos.kill(os.getpid(), signal.SIGINT)\\n"
    "t = time.time()\\nwhile time.time() - t < 0.5:\\n    pass\\nDONE = True\\n"
)
sys.path.insert(0, folder)
try:
    import slowmod  # noqa: F401
    time.sleep(10)
    print("never interrupted")
except KeyboardInterrupt:
    done = getattr(sys.modules.get("slowmod"), "DONE", False)
    print("interrupted after the import" if done else "interrupted inside the import")
"""


def test_a_ctrl_c_inside_an_import_is_raised_once_the_import_is_done() -> None:
    """Under load, a Ctrl-C 1.5 s into `simulate` landed inside torch's import, where a KeyboardInterrupt
    raised through pybind11 aborts the process ('terminate called after throwing ...', no exit 130).
    The handler sends the signal again until the import is done: the module finishes, then the
    interrupt comes."""
    proc = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "interrupted after the import", (proc.stdout, proc.stderr)


def test_version_prints_the_package_version_and_runs_no_command(capsys) -> None:
    from rankcollapse import __version__
    from rankcollapse.cli.main import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rankcollapse {__version__}"


@pytest.mark.parametrize(
    ("command", "args", "line"),
    [
        ("simulate", ["--tokens", "4", "--d", "4", "--layers", "2", "--temperature", "2", "--no-progress"],
         "No such option: --temperature"),
        ("simulate", ["--tokens", "4", "--d", "4", "--layers", "2", "--mode", "attn+ln", "--no-progress"],
         "unknown mode 'attn+ln'"),
        ("analyze", ["--model", "tiny:bert", "--mode", "attn", "--temperature", "4", "--layers", "1",
                     "--samples", "2", "--tokens", "8", "--no-progress"], "No such option: --temperature"),
    ],
)
def test_an_old_spelling_is_one_error_line_and_nothing_is_written(
    command, args, line, tmp_path, capsys
) -> None:
    """0.2.0 retired the one-release spellings (CHANGELOG.md): the CLI has no deprecation path left, an
    old spelling is refused like any unknown one, in one line (exit 2), before anything is written."""
    from rankcollapse.cli.main import main

    code = main([command, *args, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"rankcollapse: error: {line}"), err
    assert not (tmp_path / "o").exists()
