"""Atomic files: every file rankcollapse writes goes through :func:`atomic_path`.

:func:`atomic_path` / :func:`atomic_write` / :func:`write_json`: a temporary created beside the target
with ``O_EXCL | O_NOFOLLOW`` (unique per process), renamed over the target on success; a target that is
a symbolic link is refused, so no write ever follows a planted link.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import file_kind, os_error, quote_path


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, paths, tuples and numpy/torch scalars into plain JSON values."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return obj


def temporary_sibling(path: Path) -> Path:
    """A temporary name beside ``path``, unique per process and call: ``.NAME.<pid>.<random>.tmp``.

    Two processes (or threads) writing the same file never share a temporary, so neither can
    publish the other's half-written bytes.
    """
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


class LinkRefusedError(RankCollapseError):
    """A path the tool would write is a symbolic link (planted or not): never written through."""


def refuse_link(path: str | Path) -> Path:
    """``path`` if it is absent or a regular file; a symbolic link is :class:`LinkRefusedError`, a
    FIFO, a device, a socket or a folder a RankCollapseError (one line): a file written there would
    go through the link, or replace ``/dev/full`` with a picture."""
    target = Path(path)
    try:
        mode = os.lstat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return target
    except OSError as err:
        raise os_error("output", target, err, verb="write") from None
    if stat.S_ISLNK(mode):
        raise LinkRefusedError(
            f"{quote_path(target)} is a symbolic link; rankcollapse never writes through a link "
            "(remove it, or choose another output)"
        )
    if not stat.S_ISREG(mode):
        raise RankCollapseError(f"{quote_path(target)} is {file_kind(mode)}; allowed: a regular file path")
    return target


def create_exclusive(path: str | Path, mode: int = 0o644) -> int:
    """A new file at ``path`` opened for writing with ``O_CREAT | O_EXCL | O_NOFOLLOW``: an existing
    file or link there is an error (``FileExistsError`` / ``OSError``), never opened."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


@contextmanager
def atomic_path(path: str | Path, fsync: bool = False) -> Iterator[Path]:
    """Yield a unique temporary path beside ``path``; on success rename it over ``path``.

    >>> with atomic_path(out / "fig.png") as tmp:
    ...     figure.savefig(tmp, format="png")

    The temporary is created here (``O_EXCL | O_NOFOLLOW``: a name planted in its place is an
    error, not a file written through); a ``path`` that is a symbolic link is refused
    (:class:`LinkRefusedError`). On an exception the temporary is removed and ``path`` is untouched: a
    crash never leaves a half-written file. ``fsync=True`` flushes the bytes before the rename.
    """
    target = refuse_link(path)
    tmp = temporary_sibling(target)
    os.close(create_exclusive(tmp))
    try:
        yield tmp
        if fsync:
            fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        refuse_link(target)
        os.replace(tmp, target)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def atomic_write(path: str | Path, data: str | bytes, fsync: bool = False) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically (unique temporary + rename)."""
    payload = data if isinstance(data, bytes) else data.encode("utf-8")
    with atomic_path(path, fsync=fsync) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)


def write_json(path: str | Path, obj: Any, fsync: bool = False) -> None:
    """Write JSON atomically (unique temporary + rename): a crash never leaves a half-written file."""
    atomic_write(path, json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n", fsync=fsync)


