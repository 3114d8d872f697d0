"""Run outputs: ``config.json`` (everything needed to rerun) and a streamed ``metrics.csv``.

Rows are appended and flushed one at a time, so an interrupted run keeps every layer already
measured. ``config.json`` is written before the first row and records package versions.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any

from rankcollapse.errors import RankCollapseError

_VERSIONED = ("rankcollapse", "torch", "numpy", "scipy", "transformers", "networkx")


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages that change numbers (absent ones omitted)."""
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


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


@contextmanager
def atomic_path(path: str | Path, fsync: bool = False) -> Iterator[Path]:
    """Yield a unique temporary path beside ``path``; on success rename it over ``path``.

    >>> with atomic_path(out / "fig.png") as tmp:
    ...     figure.savefig(tmp, format="png")

    On an exception the temporary is removed and ``path`` is untouched: a crash never leaves a
    half-written file. ``fsync=True`` flushes the bytes to disk before the rename.
    """
    target = Path(path)
    tmp = temporary_sibling(target)
    try:
        yield tmp
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write(path: str | Path, data: str | bytes, fsync: bool = False) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically (unique temporary + rename)."""
    with atomic_path(path, fsync=fsync) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")


def write_json(path: str | Path, obj: Any, fsync: bool = False) -> None:
    """Write JSON atomically (unique temporary + rename): a crash never leaves a half-written file."""
    atomic_write(path, json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n", fsync=fsync)


class RunWriter:
    """Writes ``out_dir/config.json`` at once and ``out_dir/metrics.csv`` row by row.

    >>> with RunWriter(out, {"mask": "causal"}) as w:
    ...     w.write_row({"layer": 0, "mu": 1.0})

    The CSV header is fixed by the first row; later rows must have the same keys.
    """

    def __init__(self, out_dir: str | Path, config: dict[str, Any] | Any) -> None:
        self.out_dir = Path(out_dir)
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RankCollapseError(f"cannot create output folder {self.out_dir}: {err.strerror}") from err
        cfg = to_jsonable(config)
        record = {
            "config": cfg,
            "versions": package_versions(),
            "command": sys.argv,
        }
        write_json(self.out_dir / "config.json", record)
        self.metrics_path = self.out_dir / "metrics.csv"
        self._file = self.metrics_path.open("w", newline="")
        self._writer: csv.DictWriter[str] | None = None

    def write_row(self, row: dict[str, Any]) -> None:
        """Append one row and flush it to disk."""
        clean = {k: to_jsonable(v) for k, v in row.items()}
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(clean))
            self._writer.writeheader()
        self._writer.writerow(clean)
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
