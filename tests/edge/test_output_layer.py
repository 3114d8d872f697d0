"""The one output layer: whose folder it is, no write through a link, a completion marker, resume integrity.

- A non-empty folder rankcollapse did not make (or another command's) is refused by every writing
  command with one line and exit 2, and left byte for byte as it was (not even a ``.lock`` added).
- No write follows a link: a planted ``.lock`` link or hard link is never truncated; ``simulate
  --overwrite`` never writes through a planted ``metrics.csv``; an atomic write refuses a link or a
  special file at its destination and creates its temporary exclusively.
- The marker says ``complete: true`` only after a clean finish; a failed job leaves ``false``.
- The run store checks each run file against its record (row count, size, SHA-256): a run file cut
  in half or deleted is recomputed, never trusted, never a crash, and flagged until then.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.atomic import LinkRefusedError, atomic_write
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.folder import (
    MARKER_NAME,
    OutputFolder,
    OutputLock,
    folder_owner,
    is_complete,
    read_marker,
    write_folder,
)


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def one_line_error(args: list[str]) -> str:
    code, _, err = run_cli(args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error:") and "Traceback" not in err, err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` (links as their target text), to compare before and after."""
    found: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            found[rel] = os.readlink(path).encode()
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel] = None
    return found


#: One quick run of each command that writes a folder, ``OUT`` standing for its folder.
WRITERS = {
    "simulate": ["simulate", "--tokens", "6", "--d", "3", "--layers", "3", "--no-progress", "--out", "OUT"],
    "analyze": ["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", "--out", "OUT"],
    "portrait": ["portrait", "--out", "OUT"],
    "counterexample": ["counterexample", "--out", "OUT"],
    "reproduce": [
        "reproduce",
        "--profile",
        "tiny",
        "--only",
        "theorem1",
        "--workers",
        "1",
        "--no-progress",
        "--out",
        "OUT",
    ],
}


def writer_args(command: str, out: Path, *extra: str) -> list[str]:
    return [str(out) if a == "OUT" else a for a in WRITERS[command]] + list(extra)


def users_folder(root: Path) -> Path:
    """A folder of the user's own work, with the names a run would write."""
    folder = root / "mine"
    (folder / "figures").mkdir(parents=True)
    (folder / "runs.csv").write_text("my,own\n1,2\n")
    (folder / "report.html").write_text("<p>my report</p>")
    (folder / "figures" / "a.png").write_bytes(b"\x89PNG my figure")
    (folder / "metrics.csv").write_text("layer,mu\n0,1\n")
    (folder / "config.json").write_text('{"mine": true}')
    return folder


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_folder_rankcollapse_did_not_make_is_refused_and_left_as_it_was(
    command: str, tmp_path: Path
) -> None:
    folder = users_folder(tmp_path)
    before = snapshot(folder)
    line = one_line_error(writer_args(command, folder))
    assert "did not make" in line and MARKER_NAME in line
    assert snapshot(folder) == before
    if command == "simulate":  # --overwrite replaces only a folder of ours
        one_line_error(writer_args(command, folder, "--overwrite"))
        assert snapshot(folder) == before


def test_another_commands_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run_cli(writer_args("simulate", out))[0] == 0
    before = snapshot(out)
    for command in ("analyze", "portrait", "reproduce"):
        assert "'rankcollapse simulate'" in one_line_error(writer_args(command, out))
    assert snapshot(out) == before


def test_a_rerun_into_its_own_folder_replaces_it_and_marks_it_complete(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run_cli(writer_args("simulate", out, "--plot"))[0] == 0
    marker = read_marker(out)
    assert marker is not None and marker["command"] == "simulate" and marker["complete"] is True
    assert set(marker["files"]) == {"config.json", "metrics.csv", "mu.png"}
    assert "--overwrite" in one_line_error(writer_args("simulate", out, "--seed", "3"))
    assert run_cli(writer_args("simulate", out, "--seed", "3", "--overwrite"))[0] == 0
    assert not (out / "mu.png").exists()  # the earlier run's plot does not pass for this run's
    assert is_complete(out) and folder_owner(out) == "simulate"


def test_a_folder_made_before_markers_is_still_recognised(tmp_path: Path) -> None:
    out = tmp_path / "old"
    assert run_cli(writer_args("simulate", out))[0] == 0
    (out / MARKER_NAME).unlink()
    assert folder_owner(out) == "simulate"
    assert run_cli(writer_args("simulate", out, "--overwrite"))[0] == 0
    repro = tmp_path / "oldrepro"
    (repro / "runs" / "toy").mkdir(parents=True)
    (repro / "runs" / "toy" / "abc.json").write_text("{}")
    assert folder_owner(repro) is None  # the shape alone is not ours
    record = dict.fromkeys(("run_id", "experiment", "task", "params", "status", "csv_sha256"), "x")
    (repro / "runs" / "toy" / "abc.json").write_text(json.dumps(record))
    assert folder_owner(repro) == "reproduce"


def toy_runs():  # type: ignore[no-untyped-def]
    """Four runs of the engine's toy task (2 rates x 2 seeds, 4 layers each)."""
    from rankcollapse.experiments.engine.grid import make_runs

    return make_runs("toy", "toy", {"layers": 4}, {"rate": [0.5, 0.9], "seed": [0, 1]})


# ---- links ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["simulate", "analyze", "portrait", "reproduce"])
def test_a_planted_link_in_the_folder_is_refused_and_its_target_untouched(
    command: str, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".lock").symlink_to(victim)
    assert "symbolic link" in one_line_error(writer_args(command, out))
    assert victim.read_text() == "precious\n"


def test_the_lock_never_follows_or_truncates_a_planted_link(tmp_path: Path) -> None:
    """The lock on its own (below the folder check): ``O_NOFOLLOW``, no ``O_TRUNC``, one link only."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".lock").symlink_to(victim)
    with pytest.raises(LinkRefusedError):
        OutputLock(out).acquire()
    assert victim.read_text() == "precious\n"
    (out / ".lock").unlink()
    os.link(victim, out / ".lock")  # a hard link: truncating it would truncate the victim
    with pytest.raises(RankCollapseError, match="hard link"):
        OutputLock(out).acquire()
    assert victim.read_text() == "precious\n"


def test_simulate_overwrite_never_writes_through_a_planted_metrics_link(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run_cli(writer_args("simulate", out))[0] == 0
    victim = tmp_path / "victim.csv"
    victim.write_text("precious\n")
    for name in ("metrics.csv", "metrics.partial.csv", "config.json"):
        target = out / name
        target.unlink(missing_ok=True)
        target.symlink_to(victim)
        assert "symbolic link" in one_line_error(writer_args("simulate", out, "--overwrite"))
        assert victim.read_text() == "precious\n"
        target.unlink()


def test_an_atomic_write_refuses_a_link_or_a_special_file_at_its_destination(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    with pytest.raises(LinkRefusedError):
        atomic_write(link, "{}")
    assert victim.read_text() == "precious\n" and link.is_symlink()
    fifo = tmp_path / "plot.png"
    os.mkfifo(fifo)
    with pytest.raises(RankCollapseError, match="FIFO"):
        atomic_write(fifo, b"png")
    assert fifo.exists() and not fifo.is_file()


def test_the_temporary_of_an_atomic_write_is_created_exclusively(tmp_path: Path, monkeypatch) -> None:
    """A link planted at the temporary's name is an error, never a file written through."""
    import rankcollapse.edge.atomic as rio

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = tmp_path / ".out.json.planted.tmp"
    planted.symlink_to(victim)
    monkeypatch.setattr(rio, "temporary_sibling", lambda path: planted)
    with pytest.raises(FileExistsError):
        atomic_write(tmp_path / "out.json", "{}")
    assert victim.read_text() == "precious\n"


def test_a_run_store_subfolder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    from rankcollapse.experiments.engine.executors import run_sweep

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "toy").symlink_to(elsewhere)
    with pytest.raises(RankCollapseError, match="symbolic link"):
        run_sweep(toy_runs(), out, workers=1, progress=False)
    assert not list(elsewhere.iterdir())


# ---- completion marker -----------------------------------------------------------------------------------
def test_the_marker_says_complete_only_after_a_clean_finish(tmp_path: Path) -> None:
    out = tmp_path / "fig"

    def fails(folder: Path) -> None:
        (folder / "figure1.png").write_bytes(b"half")
        raise OSError(28, "No space left on device", str(folder / "figure5.png"))

    with pytest.raises(RankCollapseError, match="No space left on device"):
        write_folder(out, "portrait", fails)
    assert not is_complete(out) and not (out / "figure1.png").exists()  # the half file was staged only
    assert write_folder(out, "portrait", lambda folder: 7) == 7
    assert is_complete(out)
    with OutputFolder(tmp_path / "busy", "portrait") as folder:
        folder.file("a.txt").write_text("staged")
        assert not is_complete(folder.path) and not (folder.path / "a.txt").exists()
    assert (tmp_path / "busy" / "a.txt").read_text() == "staged"
    with OutputFolder(tmp_path / "new", "portrait"):
        assert not is_complete(tmp_path / "new")  # while running: not finished
    with pytest.raises(KeyError), OutputFolder(tmp_path / "gone", "portrait"):
        raise KeyError("boom")
    assert not (tmp_path / "gone").exists()  # a failed run leaves no folder it made and left empty


# ---- resume integrity ------------------------------------------------------------------------------------
def _sweep(out: Path):  # type: ignore[no-untyped-def]
    from rankcollapse.experiments.engine.executors import run_sweep

    return run_sweep(toy_runs(), out, workers=1, progress=False)


def _table(out: Path) -> pd.DataFrame:
    from rankcollapse.experiments.engine.store import collect_table

    return collect_table(out).sort_values(["run_id", "row"]).reset_index(drop=True)


@pytest.mark.parametrize("damage", ["cut in half", "deleted", "one byte changed", "legacy record, cut"])
def test_a_damaged_run_file_is_recomputed_never_trusted(tmp_path: Path, damage: str) -> None:
    from rankcollapse.experiments.engine.store import DAMAGED, RunStore, collect_index

    out = tmp_path / "out"
    first = _sweep(out)
    assert first.finished == 4
    full = _table(out)
    victim = sorted((out / "runs" / "toy").glob("*.csv"))[0]
    data = victim.read_bytes()
    if damage == "cut in half":
        victim.write_bytes(data[: len(data) // 2])
    elif damage == "deleted":
        victim.unlink()
    elif damage == "one byte changed":
        victim.write_bytes(data[:-3] + bytes([data[-3] ^ 1]) + data[-2:])
    else:  # a record written before checksums: its row count is what is checked
        record_path = victim.with_suffix(".json")
        record = json.loads(record_path.read_text())
        del record["csv_sha256"], record["csv_bytes"]
        record_path.write_text(json.dumps(record))
        victim.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])  # the last row cut off
    store = RunStore(out)
    assert store.finished() == 3
    flagged = collect_index(out)
    assert (flagged["status"] == DAMAGED).sum() == 1
    assert victim.stem not in set(_table(out)["run_id"])  # left out of the table, never half in it
    again = _sweep(out)
    assert (again.skipped, again.finished) == (3, 1)
    pd.testing.assert_frame_equal(
        _table(out).drop(columns=["wall_s"], errors="ignore"), full.drop(columns=["wall_s"], errors="ignore")
    )
    assert store.finished() == 4 and (collect_index(out)["status"] == "ok").all()


def test_reproduce_recomputes_a_damaged_run_and_rewrites_the_whole_table(tmp_path: Path) -> None:
    out = tmp_path / "repro"
    args = writer_args("reproduce", out)
    code, first, err = run_cli(args)
    assert code == 0, err
    total = int(re.search(r"runs: (\d+) \(0 already finished", first).group(1))
    full = pd.read_csv(out / "runs.csv")
    victim = sorted((out / "runs" / "theorem1.bound").glob("*.csv"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    code, again, err = run_cli(args)
    assert code == 0, err
    assert f"{total - 1} already finished, 1 run now" in again
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), full)
    victim.unlink()
    code, again, err = run_cli(args)
    assert code == 0 and f"{total - 1} already finished, 1 run now" in again, err
    assert is_complete(out)


def test_text_read_from_a_folder_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    """A marker's command and a lock's holder are read from files anyone may write: an escape sequence
    there (retitle or clear the terminal) is quoted, never printed raw."""
    import fcntl

    from rankcollapse.edge.errors import RankCollapseError
    from rankcollapse.edge.folder import LOCK_NAME, MARKER_NAME, OutputLock, check_output_folder

    hostile = "simulate\x1b]0;pwned\x07\x1b[2J"
    folder = tmp_path / "theirs"
    folder.mkdir()
    (folder / MARKER_NAME).write_text(json.dumps({"command": hostile, "complete": True}))
    (folder / "metrics.csv").write_text("layer\n0\n")
    with pytest.raises(RankCollapseError) as err:
        check_output_folder(folder, "analyze")
    assert "\x1b" not in str(err.value) and "\\x1b" in str(err.value)
    held = tmp_path / "held"
    held.mkdir()
    lock = held / LOCK_NAME
    lock.write_text("\x1b[2J\x1b]0;pwned\x07")
    with open(lock, "r+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process holds the folder
        with pytest.raises(RankCollapseError) as err:
            OutputLock(held).acquire()
    line = str(err.value)
    assert "\x1b" not in line and "\x07" not in line and "in use by process" in line


def test_a_folder_of_someone_elses_run_jsons_is_not_taken_for_a_reproduce_folder(tmp_path: Path) -> None:
    """``runs/<x>/<y>.json`` is a common layout in ML projects: without our marker, only our own run
    records make a folder reproduce's (the shape alone silently lost a user's report.html)."""
    from rankcollapse.edge.errors import RankCollapseError
    from rankcollapse.edge.folder import check_output_folder

    theirs = tmp_path / "project"
    (theirs / "runs" / "exp1").mkdir(parents=True)
    (theirs / "runs" / "exp1" / "result.json").write_text(json.dumps({"loss": 0.1, "step": 10}))
    (theirs / "report.html").write_text("<p>my precious report</p>")
    with pytest.raises(RankCollapseError, match="did not make"):
        check_output_folder(theirs, "reproduce", existing="resume")
    ours = tmp_path / "old_reproduce"  # a store written before markers: its records are ours
    (ours / "runs" / "fig2.paper").mkdir(parents=True)
    record = {"run_id": "abc", "experiment": "fig2.paper", "task": "model_curves", "params": {},
              "status": "ok", "csv_sha256": "0" * 64}
    (ours / "runs" / "fig2.paper" / "abc.json").write_text(json.dumps(record))
    assert check_output_folder(ours, "reproduce", existing="resume") == ours


# ---- staging, manifest, publication (issue 25) -----------------------------------------------------------
def test_only_what_the_run_wrote_is_ever_removed(tmp_path: Path) -> None:
    """The marker lists the files a run wrote (subfolders included); a file anyone else puts into the
    folder, during the run or after, is in no manifest and survives every rerun. An earlier run's files
    the new run does not write go at publication, with the folders they leave empty."""
    out = tmp_path / "out"
    with OutputFolder(out, "portrait") as folder:
        folder.file("a.csv").write_text("run 1")
        (folder.subfolder("sub") / "b.npy").write_bytes(b"run 1")
        (out / "notes.txt").write_text("mine, dropped in during the run")
        (out / "mine").mkdir()
        (out / "mine" / "x.txt").write_text("mine too")
    marker = read_marker(out)
    assert marker is not None and marker["complete"] is True
    assert marker["files"] == ["a.csv", "sub/b.npy"]
    with OutputFolder(out, "portrait", existing="replace") as folder:
        folder.file("c.csv").write_text("run 2")
        (out / "later.txt").write_text("mine, dropped in during the second run")
    assert read_marker(out)["files"] == ["c.csv"]  # type: ignore[index]
    assert (out / "notes.txt").read_text() == "mine, dropped in during the run"
    assert (out / "mine" / "x.txt").exists() and (out / "later.txt").exists()
    assert not (out / "a.csv").exists() and not (out / "sub").exists()
    assert (out / "c.csv").read_text() == "run 2"


def test_a_rerun_publishes_at_the_end_and_a_failed_one_leaves_the_earlier_run_whole(tmp_path: Path) -> None:
    """While a rerun writes, the earlier finished run stays whole and marked complete; a rerun that fails
    (here: its figure cannot be drawn) changes nothing; one that succeeds replaces it in one step."""
    out = tmp_path / "out"
    with OutputFolder(out, "portrait") as folder:
        folder.file("figure1.png").write_bytes(b"run 1")
    with OutputFolder(out, "portrait", existing="replace") as folder:
        folder.file("figure1.png").write_bytes(b"run 2")
        assert is_complete(out) and (out / "figure1.png").read_bytes() == b"run 1"
    assert (out / "figure1.png").read_bytes() == b"run 2" and is_complete(out)
    before = read_marker(out)
    with pytest.raises(RankCollapseError, match="cannot write plot"), OutputFolder(
        out, "portrait", existing="replace"
    ) as folder:
        folder.file("figure1.png").write_bytes(b"run 3, half")
        raise RankCollapseError("cannot write plot 'figure5.png': No space left on device (ENOSPC)")
    assert (out / "figure1.png").read_bytes() == b"run 2" and is_complete(out)
    after = read_marker(out)
    assert after is not None and before is not None and after["files"] == before["files"]
    assert after["finished_at"] == before["finished_at"]
    assert sorted(p.name for p in out.iterdir()) == [MARKER_NAME, "figure1.png"]  # no staging, no lock left


def test_a_plot_error_after_the_rows_leaves_nothing_that_looks_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``analyze --plot``: metrics.csv, per_sample.csv and mu.png are published together, after the last
    of them is written; a plot that fails leaves no metrics.csv and no complete marker."""
    import rankcollapse.models.plots as plots

    def broken(*args: object, **kwargs: object) -> None:
        raise RankCollapseError("cannot write plot 'mu.png': No space left on device (ENOSPC)")

    monkeypatch.setattr(plots, "save_figures", broken)
    out = tmp_path / "run"
    assert "No space left" in one_line_error(writer_args("analyze", out, "--plot", "--per-sample"))
    assert not (out / "metrics.csv").exists() and not (out / "per_sample.csv").exists()
    assert not is_complete(out)


def test_plot_refuses_a_run_folder_whose_marker_says_unfinished(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run_cli(writer_args("simulate", out))[0] == 0
    marker = read_marker(out)
    assert marker is not None
    (out / MARKER_NAME).write_text(json.dumps({**marker, "complete": False}))  # e.g. killed mid-publication
    line = one_line_error(["plot", str(out), "--out", str(tmp_path / "p.png")])
    assert "not a finished run" in line and "did not complete" in line
    assert not (tmp_path / "p.png").exists()


def test_an_analyze_rerun_leaves_no_attention_files_of_the_earlier_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code, _, err = run_cli(writer_args("analyze", out, "--diagnostics", "--save-attention", "--no-table"))
    assert code == 0, err
    first = read_marker(out)
    assert first is not None and "attention/layer_001.npy" in first["files"]
    assert (out / "attention" / "layer_001.npy").is_file()
    code, _, err = run_cli(writer_args("analyze", out, "--overwrite", "--no-table"))
    assert code == 0, err
    assert not (out / "attention").exists()
    marker = read_marker(out)
    assert marker is not None and marker["complete"] is True
    assert sorted(marker["files"]) == ["config.json", "metrics.csv"]


#: Per command: what its runs here add, and what makes a second run's files differ from the first's.
RERUNS = {"analyze": (["--no-table"], ["--seed", "1"]), "portrait": ([], ["--w", "3"]),
          "counterexample": ([], ["--w", "3"])}


@pytest.mark.parametrize("command", sorted(RERUNS))
def test_an_earlier_run_is_replaced_only_with_overwrite_one_rule_for_every_command(
    command: str, tmp_path: Path
) -> None:
    """simulate always refused an earlier finished run without --overwrite; analyze, portrait and
    counterexample replaced it with a deprecation warning until 0.2.0. Now one rule: without --overwrite
    the rerun is one line, exit 2, and the first run's files stay byte for byte; with it they are replaced."""
    from rankcollapse.edge.folder import check_output_folder

    out = tmp_path / "run"
    extra, other = RERUNS[command]
    code, _, err = run_cli(writer_args(command, out, *extra))
    assert code == 0 and not err.strip(), err
    first = snapshot(out)
    with pytest.raises(RankCollapseError, match="--overwrite"):
        check_output_folder(out, command)
    line = one_line_error(writer_args(command, out, *extra, *other))
    assert f"holds an earlier finished {command} run; pass --overwrite to replace it" in line, line
    assert snapshot(out) == first  # untouched: no staging left, no lock, the same bytes
    code, _, err = run_cli(writer_args(command, out, *extra, *other, "--overwrite"))
    assert code == 0 and not err.strip(), err
    assert is_complete(out) and snapshot(out) != first


def test_write_run_refuses_an_earlier_run_without_overwrite_and_replaces_it_with(tmp_path: Path) -> None:
    """The Python writer of an analyze result has the same rule: ``overwrite=False`` (the default) is one
    line naming ``overwrite=True``, the first run intact; ``overwrite=True`` replaces it."""
    from rankcollapse.models import AnalyzeConfig, analyze, write_run

    one, two = (analyze(AnalyzeConfig(model="tiny:bert", samples=2, tokens=8, layers=1, seed=s),
                        progress=False) for s in (0, 1))
    out = tmp_path / "run"
    write_run(one, out)
    first = snapshot(out)
    with pytest.raises(RankCollapseError) as info:
        write_run(two, out)
    assert "\n" not in str(info.value)
    assert "holds an earlier finished analyze run; pass overwrite=True to replace it" in str(info.value)
    assert snapshot(out) == first
    write_run(two, out, overwrite=True)
    assert is_complete(out) and (out / "metrics.csv").read_bytes() != first["metrics.csv"]


def test_the_next_writer_removes_the_temporaries_of_a_killed_one(tmp_path: Path) -> None:
    """``kill -9`` inside an atomic write (reproduce drawing ``figures/``) leaves ``.NAME.<pid>.<hex>.tmp``;
    the next writer that takes the folder's lock removes it (and a dead run's staging folder), never a
    live process's."""
    import subprocess
    import sys

    from rankcollapse.experiments.engine.lock import OutputLock as ReproduceLock

    out = tmp_path / "repro"
    with ReproduceLock(out):
        (out / "figures").mkdir()
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from rankcollapse.edge.atomic import atomic_path\n"
        "with atomic_path(Path(sys.argv[1]) / 'figures' / 'fig2.png') as tmp:\n"
        "    tmp.write_bytes(b'half a figure')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, check=False)
    assert killed.returncode == -9, killed.stderr
    litter = list((out / "figures").iterdir())
    assert [p.name for p in litter] and litter[0].name.startswith(".fig2.png.") and litter[0].suffix == ".tmp"
    dead_staging = out / f".rankcollapse.staging.{_dead_pid()}.0123456789ab.tmp"
    dead_staging.mkdir()
    (dead_staging / "metrics.csv").write_text("layer\n0\n")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = out / "figures" / f".fig3.png.{live.pid}.0123456789ab.tmp"
        kept.write_bytes(b"being written")
        mine = out / "figures" / "fig9.png.1.0123456789ab.tmp"  # not a temporary's name: not ours to touch
        mine.write_bytes(b"a user's file")
        with ReproduceLock(out):
            assert not any(p.exists() for p in litter) and not dead_staging.exists()
            assert kept.exists() and mine.exists()
        assert is_complete(out)
    finally:
        live.kill()
        live.wait()


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    return int(proc.stdout)


def test_a_folder_from_before_manifests_loses_only_the_commands_own_outputs(tmp_path: Path) -> None:
    """A marker written before manifests listed every entry, the user's included: such a folder is taken
    to hold the command's own output names only (a folder among them, such as attention/: its files)."""
    out = tmp_path / "old"
    (out / "attention").mkdir(parents=True)
    (out / "attention" / "layer_001.npy").write_bytes(b"old run")
    (out / "metrics.csv").write_text("layer,mu\n0,1\n")
    (out / "notes.txt").write_text("mine")
    legacy = {"rankcollapse": "output folder", "command": "analyze", "complete": True,
              "files": ["attention", "metrics.csv", "notes.txt"]}
    (out / MARKER_NAME).write_text(json.dumps(legacy))
    with OutputFolder(out, "analyze", existing="replace", outputs=("metrics.csv", "attention")) as folder:
        folder.file("metrics.csv").write_text("layer,mu\n0,2\n")
    assert (out / "notes.txt").read_text() == "mine" and not (out / "attention").exists()
    assert read_marker(out)["files"] == ["metrics.csv"]  # type: ignore[index]


# ---- the lock file ---------------------------------------------------------------------------------------
def test_a_finished_or_failed_writer_leaves_no_lock_file_in_its_folder(tmp_path: Path) -> None:
    """``.lock`` exists only while a writer holds it: after simulate, a failed portrait and a reproduce
    lock (resumed in place) the folder holds the run's files and the marker, nothing else of ours."""
    from rankcollapse.edge.folder import LOCK_NAME
    from rankcollapse.experiments.engine.lock import OutputLock as ReproduceLock

    out = tmp_path / "run"
    assert run_cli(writer_args("simulate", out))[0] == 0
    assert not (out / LOCK_NAME).exists() and is_complete(out)
    with OutputFolder(out, "simulate", existing="replace") as folder:
        assert (out / LOCK_NAME).read_text().strip() == str(os.getpid())  # held while writing
        folder.file("metrics.csv").write_text("layer,mu_rel\n0,1.0\n")
    assert not (out / LOCK_NAME).exists()
    with pytest.raises(RankCollapseError), OutputFolder(out, "simulate", existing="replace"):
        raise RankCollapseError("the run failed")
    assert not (out / LOCK_NAME).exists() and is_complete(out)
    repro = tmp_path / "repro"
    with ReproduceLock(repro):
        pass
    assert not (repro / LOCK_NAME).exists() and is_complete(repro)


def test_a_writer_whose_lock_file_was_removed_by_the_holder_locks_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the removal opens: B opens ``.lock``, the holder A finishes (removes the file, lets go),
    B's flock is granted on a file no longer in the folder. B must notice and lock the new file, so that a
    third writer C is refused while B writes (one writer, never two)."""
    import fcntl

    from rankcollapse.edge.folder import LOCK_NAME

    folder = tmp_path / "f"
    holder = OutputLock(folder).acquire()
    real = fcntl.flock
    calls: list[int] = []

    def flock_after_the_holder_let_go(fd: int, op: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            holder.release()  # A removes .lock and lets go between B's open and B's flock
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_the_holder_let_go)
    second = OutputLock(folder, wait=True).acquire()
    monkeypatch.setattr(fcntl, "flock", real)
    try:
        assert len(calls) == 2  # B saw its file gone and locked again
        held = os.fstat(second._fd) if second._fd is not None else None
        assert held is not None and held.st_ino == (folder / LOCK_NAME).stat().st_ino and held.st_nlink == 1
        with pytest.raises(RankCollapseError, match="in use by process"):
            OutputLock(folder).acquire()  # C is refused while B writes
    finally:
        second.release()
    assert not (folder / LOCK_NAME).exists()
