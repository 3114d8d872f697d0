"""reproduce as a process: workers die with it (kill -9), one writer per folder, options refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.engine.executors import check_executor, run_sweep
from rankcollapse.experiments.engine.lock import OutputLock
from rankcollapse.experiments.engine.store import write_tables
from rankcollapse.experiments.stories import load_experiments

ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def _ppid_map() -> dict[int, int]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            out[int(entry.name)] = int(fields[1])
    return out


def _descendants(pid: int) -> set[int]:
    parents = _ppid_map()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _mentions(folder: Path) -> set[int]:
    """Processes whose command line names ``folder``."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if str(folder).encode() in (entry / "cmdline").read_bytes() and _alive(int(entry.name)):
                    out.add(int(entry.name))
            except OSError:
                continue
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_reproduce_leaves_no_process_of_its_run(tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "rankcollapse",
        "reproduce",
        "--profile",
        "tiny",
        "--only",
        "fig2.gaussian_san",
        "--workers",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline, family = time.monotonic() + 90, set()
        while time.monotonic() < deadline:  # the pool is up: two workers (and the resource tracker)
            family = _descendants(proc.pid)
            if len(family) >= 3 or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None and len(family) >= 2, "the pool never started"
        time.sleep(1.0)  # workers past start-up, importing torch or running
        family |= _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # the parent only: nobody tells the workers
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (any(_alive(p) for p in family) or _mentions(out)):
            time.sleep(0.1)
        assert not [p for p in family if _alive(p)], "workers outlived their parent"
        assert not _mentions(out)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


_SLOW_TOY = """
title: toy runs that take a while
task: toy
base: {layers: 3, sleep_s: 0.25}
grid: {rate: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], seed: [0]}
"""


@pytest.mark.slow
def test_two_reproduce_on_one_folder_one_exits_2_naming_the_holder_and_wait_waits(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "slow_toy.yaml").write_text(textwrap.dedent(_SLOW_TOY))
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "rankcollapse",
        "reproduce",
        "--config-dir",
        str(configs),
        "--full",
        "--workers",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    first = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # meanwhile, the same sweep in this process, into its own folder
    exp = load_experiments("full", folder=configs)[0]
    run_sweep(exp.runs(), tmp_path / "single", workers=1, progress=False)
    write_tables(tmp_path / "single")
    results = [(p, *p.communicate(timeout=120)) for p in (first, second)]
    codes = sorted(p.returncode for p, _, _ in results)
    assert codes == [0, 2], [(p.returncode, err) for p, _, err in results]
    winner = next(p for p, _, _ in results if p.returncode == 0)
    _, _, err = next(r for r in results if r[0].returncode == 2)
    assert len(err.strip().splitlines()) == 1 and f"in use by process {winner.pid}" in err
    waiter = subprocess.Popen(
        [*cmd, "--wait"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(0.5)
    holder = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder.communicate(timeout=120)
    w_out, w_err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, w_err
    assert "6 already finished" in w_out
    expected = (
        pd.read_csv(tmp_path / "single" / "runs.csv").sort_values(["run_id", "row"]).reset_index(drop=True)
    )
    got = pd.read_csv(out / "runs.csv").sort_values(["run_id", "row"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected)
    assert not list(out.rglob("*.tmp"))


def test_a_second_lock_on_a_folder_names_the_holder_and_a_failed_run_leaves_no_empty_folder(tmp_path):
    folder = tmp_path / "a" / "b"
    with OutputLock(folder):
        assert (folder / ".lock").read_text().strip() == str(os.getpid())
        with pytest.raises(RankCollapseError, match=f"in use by process {os.getpid()}"):
            OutputLock(folder).acquire()
    assert folder.is_dir()  # a successful run keeps its folder
    other = tmp_path / "c" / "d"
    with pytest.raises(RuntimeError), OutputLock(other):
        raise RuntimeError("boom")
    assert not (tmp_path / "c").exists()
    with pytest.raises(RankCollapseError, match="is a file"):
        (tmp_path / "file").write_text("x")
        OutputLock(tmp_path / "file").acquire()


@pytest.mark.parametrize(
    "args,words",
    [
        (["--only", ""], ["--only"]),
        (["--only", ","], ["--only"]),
        (["--scheduler", "tcp://127.0.0.1:8786"], ["--scheduler", "local"]),
        (["--executor", "dask", "--scheduler", "notaurl"], ["--scheduler", "notaurl"]),
        (["--executor", "dask"], ["--scheduler"]),
        (["--executor", "dask", "--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"], ["--workers"]),
        (["--workers", "0"], ["--workers"]),
        (["--executor", "ray"], ["ray", "allowed"]),
    ],
)
def test_options_that_do_not_apply_are_refused_in_one_line_and_nothing_is_written(
    tmp_path, capsys, args, words
):
    out = tmp_path / "out"
    code = main(["reproduce", "--profile", "tiny", "--no-progress", "--out", str(out), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert all(w in err for w in words), err
    assert not out.exists()


def test_an_empty_out_is_refused(capsys):
    assert main(["reproduce", "--profile", "tiny", "--out", ""]) == 2
    assert "--out" in capsys.readouterr().err


def test_check_executor_accepts_scheduler_addresses():
    for address in (
        "tcp://10.0.0.5:8786",
        "127.0.0.1:8786",
        "tls://host.example:8786",
        "inproc://1.2.3.4/5/6",
    ):
        check_executor("dask", address, None)
    for address in ("notaurl", "tcp://", "http//x:1", "tcp://host"):
        with pytest.raises(RankCollapseError, match="scheduler"):
            check_executor("dask", address, None)
