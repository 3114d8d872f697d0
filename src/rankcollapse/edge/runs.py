"""A run's files: ``config.json`` at once, rows streamed to ``metrics.partial.csv``, and the declaration
of every file a run folder holds, which its writer and its reader both go through.

:class:`RunWriter` renames the rows to ``metrics.csv`` when the run completes: an interrupted run keeps
every layer measured under a name that says it is partial.

The files (:data:`RUN_FILES`, each a :mod:`rankcollapse.edge.schema` declaration):

- ``metrics.csv`` (:data:`METRICS`): one row per hidden state (``analyze``, ``simulate``, ``write_run``);
  ``monitor``'s is its long table (:data:`MONITOR_METRICS`: one row per step, layer and metric);
- ``per_sample.csv`` (:data:`PER_SAMPLE`, ``analyze --per-sample``): one row per hidden state and sample;
- ``config.json`` (:data:`RUN_RECORD`): what ran (``config``: the command's config under its name, for
  ``analyze`` also ``model``), the package versions and the command line;
- ``mask_check.json`` (:data:`MASK_CHECK`, ``analyze --check-masks``);
- ``attention/layer_{k}.npy`` (:data:`ATTENTION`, ``analyze --save-attention``): float32 [b, h, i, j].

:func:`read_run_file` reads any of them from a finished folder through its declaration; figures are
images, declared by name only (:data:`FIGURES`).
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from rankcollapse.edge.atomic import (
    atomic_write,
    create_exclusive,
    to_jsonable,
    write_json,
)
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.folder import Existing, OutputFolder
from rankcollapse.edge.inputs import os_error, quote_path
from rankcollapse.edge.provenance import package_versions
from rankcollapse.edge.schema import Array, Column, Field, Record, Table, write_rows

#: The columns of a row table that are not numbers (every other column of :data:`METRICS` and
#: :data:`PER_SAMPLE` is one: a metric of ``rankcollapse.metrics``, its ``_min`` / ``_max`` / ``_std`` over
#: samples, a per-head ``_h{k}`` or per-document ``_doc{k}`` value, a diagnostic).
ROW_COLUMNS: tuple[Column, ...] = (
    Column("layer", "count", "t: row 0 the input (analyze: the embeddings), row t the output of layer t"),
    Column("hidden_state", "word", "embeddings or layer_{t}_out (analyze)"),
    Column("model_layer", "count", "the model's layer that made the row, 0-based (analyze; empty for the "
           "embeddings)", optional=True),
    Column("hook", "word", "the TransformerLens hook name of the same tensor, empty where it has none"),
    Column("status", "word", "ok, overflow or underflow (analyze)"),
    Column("sink_heads", "counts", "the heads whose first_token_attention_h{k} exceeds the sink threshold "
           "(analyze --diagnostics; empty for the embeddings)"),
    Column("sample", "count", "the sample's index in the batch (per_sample.csv)"),
)
#: Every other column of a row table: a number, or empty where it was not measured.
NUMBER = Column("*", "number", "a metric, a statistic of one over samples, or a diagnostic", optional=True)
METRICS = Table("metrics.csv", "metrics table", ROW_COLUMNS, default=NUMBER, required=("layer",))
PER_SAMPLE = Table("per_sample.csv", "per-sample table", ROW_COLUMNS, default=NUMBER,
                   required=("layer", "sample"))
#: ``monitor``'s ``metrics.csv``: one row per training step, layer and metric (``value`` a number).
MONITOR_METRICS = Table("metrics.csv", "monitor table", (
    Column("step", "count", "the training step"),
    Column("layer", "count", "t, as in analyze"),
    Column("hidden_state", "word", "as in analyze"),
    Column("hook", "word", "as in analyze"),
    Column("metric", "word", "the metric's name"),
    Column("value", "number", "its batch mean", optional=True),
), required=("step", "layer", "metric", "value"))
#: ``config.json``: ``config`` holds the command's config under the command's name (and analyze's
#: ``model`` record and ``notes``); the fields the readers read (``models.finished.read_run``) are declared.
RUN_RECORD = Record("config.json", "run record", (
    Field("config", "mapping"),
    Field("versions", "mapping"),
    Field("command", "list"),
    Field("config.analyze.model", "text", optional=True),
    Field("config.analyze.mode", "text", optional=True),
    Field("config.analyze.dtype", "text", optional=True),
    Field("config.analyze.samples", "count", optional=True),
    Field("config.analyze.tokens", "count", optional=True),
    Field("config.analyze.sink_threshold", "number", optional=True),
    Field("config.read", "mapping", optional=True),
    Field("config.read.samples", "count", optional=True),
    Field("config.read.tokens", "count", optional=True),
    Field("config.model", "mapping", optional=True),
    Field("config.model.model_label", "text", optional=True),
    Field("config.model.mask", "text", optional=True),
    Field("config.model.d_qk", "number", optional=True),
    Field("config.model.d_model", "count", optional=True),
    Field("config.model.dtype", "text", optional=True),
    Field("config.notes", "list", optional=True),
    Field("config.simulate.mask", "text", optional=True),
    Field("config.simulate.mode", "text", optional=True),
    Field("config.simulate.dtype", "text", optional=True),
    Field("config.simulate.d", "count", optional=True),
    Field("config.simulate.tokens", "count", optional=True),
    Field("config.simulate.d_qk", "number", optional=True),
), one_of=("config.analyze", "config.simulate", "config.monitor"))
#: ``mask_check.json`` (``analyze --check-masks``): per layer, the mask the attention kernel applies
#: against the config's.
MASK_CHECK = Record("mask_check.json", "mask check", (
    Field("source", "text"),
    Field("matches", "flag"),
    Field("layers", "list"),
))
#: ``attention/layer_{k}.npy`` (``analyze --save-attention``): each layer's attention weights.
ATTENTION = Array("attention/layer_{k}.npy", "attention weights", "float32", "b h i j")
#: The figures a run may draw (images: no reader parses them).
FIGURES: tuple[str, ...] = ("mu", "geometry", "diagnostics")
#: Every data file a run folder may hold, by name, with its declaration.
RUN_FILES: dict[str, Table | Record | Array] = {
    "metrics.csv": METRICS,
    "per_sample.csv": PER_SAMPLE,
    "config.json": RUN_RECORD,
    "mask_check.json": MASK_CHECK,
    ATTENTION.name: ATTENTION,
}


def run_command(record: dict[str, Any]) -> str:
    """The command whose ``config.json`` record this is (``analyze``, ``simulate``, ``monitor``)."""
    cfg = record.get("config")
    return next((k for k in ("analyze", "simulate", "monitor") if isinstance(cfg, dict) and k in cfg), "")


def declaration(name: str, command: str = "") -> Table | Record | Array:
    """The declaration of a run file by its path in the folder (``attention/layer_003.npy``:
    :data:`ATTENTION`); ``metrics.csv`` of ``command`` ``monitor`` is :data:`MONITOR_METRICS`.
    RankCollapseError for another."""
    if name == "metrics.csv" and command == "monitor":
        return MONITOR_METRICS
    if name in RUN_FILES:
        return RUN_FILES[name]
    if ATTENTION.matches(name):
        return ATTENTION
    raise RankCollapseError(f"no run file {quote_path(name)}; allowed: {', '.join(RUN_FILES)}")


def read_run_file(folder: str | Path, name: str) -> Any:
    """A run file of ``folder`` read through its declaration (:func:`declaration`): a table's rows (each
    cell parsed: numbers as floats, counts as ints, ``sink_heads`` as a tuple of ints), a record's dict,
    an array. One line (RankCollapseError) for a file that is not as declared."""
    path = Path(folder) / name
    command = ""
    if name == "metrics.csv" and (Path(folder) / "config.json").is_file():
        command = run_command(RUN_RECORD.read(Path(folder) / "config.json"))
    return declaration(name, command).read(path)


def write_table(path: str | Path, table: Table, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` to ``path`` through ``table``'s declaration (atomically)."""
    try:
        atomic_write(path, write_rows(table, rows))
    except OSError as err:
        raise os_error(table.what, path, err, verb="write") from None
    return Path(path)


class RunWriter:
    """Writes ``config.json`` and streams rows to ``out/metrics.partial.csv``; when the block ends
    without an exception the rows become ``metrics.csv``, published with the rest of the run.

    >>> with RunWriter(out, {"simulate": {...}}) as w:
    ...     w.write_row({"layer": 0, "mu": 1.0})

    ``out``: an :class:`OutputFolder` already held (the files are staged there and published when it is
    released), or a path (then this writer holds one itself, for ``command``, default the config's first
    key, under ``existing``'s rule, and publishes when the block ends). The CSV header is fixed by the
    first row; later rows must have the same keys. Every row and the record go through their
    declarations (:data:`METRICS` or, for ``monitor``, :data:`MONITOR_METRICS`; :data:`RUN_RECORD`): a
    value a reader would refuse is a ``ValueError`` here, when it is written. Each row is flushed as
    written into the folder itself (:meth:`OutputFolder.partial`), so an interrupted run keeps every row
    under the partial name; one that wrote no row leaves nothing.
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
        record = {"config": cfg, "versions": package_versions(), "command": list(sys.argv)}
        self.table = MONITOR_METRICS if run_command(record) == "monitor" else METRICS
        try:
            RUN_RECORD.check(record)
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
        """Append one row (through the table's declaration) and flush it to disk."""
        clean = self.table.row(row)
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
        self.folder.finish_partial(self.PARTIAL, self.FINAL)
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
