"""One writer per output folder: an exclusive ``flock`` on ``DIR/.lock`` held for the whole run.

The holder writes its pid into the file; a second process either fails at once with one line
naming that pid (``RankCollapseError``, exit 2 on the CLI) or, with ``wait=True``, blocks until
the holder is done. The kernel drops the lock when the holder dies (``kill -9`` included), so a
stale file never blocks anyone. Folders this lock created are removed again if the run left
nothing in them (no empty folders after a failure).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from rankcollapse.errors import RankCollapseError

LOCK_NAME = ".lock"


class OutputLock:
    """``with OutputLock(out_dir, wait=False): ...`` -- see the module docstring."""

    def __init__(self, folder: str | Path, wait: bool = False) -> None:
        self.folder = Path(folder)
        self.wait = wait
        self._fd: int | None = None
        self._created: list[Path] = []

    def _make_folder(self) -> None:
        missing = []
        for parent in (self.folder, *self.folder.parents):
            if parent.exists():
                break
            missing.append(parent)
        if self.folder.exists() and not self.folder.is_dir():
            raise RankCollapseError(f"output folder {self.folder} is a file; choose a folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RankCollapseError(f"cannot create output folder {self.folder}: {err.strerror}") from err
        self._created = missing  # deepest first

    def acquire(self) -> OutputLock:
        self._make_folder()
        path = self.folder / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            self._remove_empty()
            raise RankCollapseError(f"cannot write into output folder {self.folder}: {err.strerror}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RankCollapseError(
                f"output folder {self.folder} is in use by process {holder}; wait for it (--wait) "
                "or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self, failed: bool = False) -> None:
        if self._fd is not None:
            if failed:
                self._remove_empty()
            os.close(self._fd)  # drops the flock
            self._fd = None

    def _remove_empty(self) -> None:
        """Remove the folders this lock created if nothing but the lock file is in them."""
        for folder in self._created:
            try:
                entries = {p.name for p in folder.iterdir()}
                if entries <= {LOCK_NAME}:
                    (folder / LOCK_NAME).unlink(missing_ok=True)
                    folder.rmdir()
            except OSError:
                return

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release(failed=kind is not None)
