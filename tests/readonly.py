"""A read-only folder for the writer tests, for every user: its mode 0o555 and, for root (whom permission
bits do not stop), every file created in it refused with EACCES, as on a read-only mount."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest


def read_only(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``folder`` (created if absent) read-only for the rest of the test; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real = os.open
        inside = os.path.realpath(folder)

        def refused(path: str | os.PathLike[str], flags: int, *args: object, **kwargs: object) -> int:
            if flags & os.O_CREAT and os.path.dirname(os.path.realpath(path)) == inside:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
            return real(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", refused)
    return folder
