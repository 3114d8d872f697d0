"""A run's files: ``config.json`` at once, rows streamed to ``metrics.partial.csv``.

:class:`RunWriter` renames the rows to ``metrics.csv`` when the run completes: an interrupted run keeps
every layer measured under a name that says it is partial.
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from rankcollapse.edge.atomic import (
    create_exclusive,
    to_jsonable,
    write_json,
)
from rankcollapse.edge.folder import Existing, OutputFolder
from rankcollapse.edge.inputs import os_error
from rankcollapse.edge.provenance import package_versions


class RunWriter:
    """Writes ``config.json`` and streams rows to ``out/metrics.partial.csv``; when the block ends
    without an exception the rows become ``metrics.csv``, published with the rest of the run.

    >>> with RunWriter(out, {"simulate": {...}}) as w:
    ...     w.write_row({"layer": 0, "mu": 1.0})

    ``out``: an :class:`OutputFolder` already held (the files are staged there and published when it is
    released), or a path (then this writer holds one itself, for ``command``, default the config's first
    key, under ``existing``'s rule, and publishes when the block ends). The CSV header is fixed by the
    first row; later rows must have the same keys. Each row is flushed as written into the folder itself
    (:meth:`OutputFolder.partial`), so an interrupted run keeps every row under the partial name; one
    that wrote no row leaves nothing.
    """

    PARTIAL = "metrics.partial.csv"
    FINAL = "metrics.csv"

    def __init__(
        self,
        out: str | Path | OutputFolder,
        config: dict[str, Any] | Any,
        command: str | None = None,
        existing: Existing = "refuse",
    ) -> None:
        cfg = to_jsonable(config)
        self._own: OutputFolder | None = None
        if isinstance(out, OutputFolder):
            folder = out
        else:
            name = command or (next(iter(cfg)) if isinstance(cfg, dict) and cfg else "run")
            folder = self._own = OutputFolder(
                out,
                str(name),
                option="output folder",
                existing=existing,
                outputs=("config.json", self.FINAL, self.PARTIAL),
            ).acquire()
        self.folder = folder
        self.out_dir = folder.path
        self.metrics_path = self.out_dir / self.FINAL  # where the rows are once published
        self.rows = 0
        record = {"config": cfg, "versions": package_versions(), "command": sys.argv}
        try:
            write_json(folder.file("config.json"), record)
            self.partial_path = folder.partial(self.PARTIAL)
            fd = create_exclusive(self.partial_path)
        except OSError as err:
            self._fail()
            raise os_error("output folder", self.out_dir, err, verb="write into") from None
        except BaseException:
            self._fail()
            raise
        self._file = os.fdopen(fd, "w", newline="", encoding="utf-8")
        self._writer: csv.DictWriter[str] | None = None

    def _fail(self) -> None:
        if self._own is not None:
            self._own.release(failed=True)
            self._own = None

    def write_row(self, row: dict[str, Any]) -> None:
        """Append one row and flush it to disk."""
        clean = {k: to_jsonable(v) for k, v in row.items()}
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(clean))
            self._writer.writeheader()
        self._writer.writerow(clean)
        self._file.flush()
        self.rows += 1

    def finish(self) -> Path:
        """Close the rows and stage them as ``metrics.csv`` (published when the folder is released);
        returns where they are published."""
        self.close()
        os.replace(self.partial_path, self.folder.file(self.FINAL))
        return self.metrics_path

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
        failed = exc_type is not None
        try:
            if failed:
                self.close()
                if not self.rows:  # a run that wrote no row leaves no partial file saying nothing
                    self.partial_path.unlink(missing_ok=True)
            else:
                self.finish()
        except OSError as err:
            failed = True
            raise os_error("output folder", self.out_dir, err, verb="write into") from None
        finally:
            if self._own is not None:
                self._own.release(failed=failed)
                self._own = None
