"""Where telemetry rows go while training runs: a CSV appended as it goes, Parquet, TensorBoard, wandb.

Every row is tidy: ``step, layer, hidden_state, hook, metric, value`` (:data:`COLUMNS`).

- ``out`` (a folder, through the one output layer :mod:`rankcollapse.edge.folder`): ``config.json`` and
  ``metrics.partial.csv`` from the first probe on, each row flushed as written
  (:class:`rankcollapse.edge.runs.RunWriter`), renamed ``metrics.csv`` when the monitor is closed;
  ``metrics.parquet`` too (written atomically at close) where ``pyarrow`` is installed.
- ``tensorboard``: an object with ``add_scalar(tag, value, step)`` (a ``SummaryWriter``), or a log
  folder (a path): event files written there by ``torch.utils.tensorboard.SummaryWriter``, closed with
  the monitor. Tag ``rankcollapse/{metric}/{hidden_state}``.
- ``wandb``: an object with ``log(dict, step=)`` (a wandb run); ``True`` for the ``wandb`` module's
  active run; or a folder (a path): an offline run written there (``wandb.init(dir=, mode="offline")``,
  ``wandb sync`` uploads it later), finished with the monitor. Same keys as TensorBoard's tags.

Neither library is required: a path (or ``True``) given where the library cannot be imported is refused
when the monitor is made, in one line (:func:`scalar_sink_error`), before training starts. A sink that
fails later (a disk that fills, a read-only folder, a logger that raises) is reported in one line through
``warn`` and switched off; the rows stay in memory and training goes on.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import error_line

COLUMNS: tuple[str, ...] = ("step", "layer", "hidden_state", "hook", "metric", "value")
PARQUET = "metrics.parquet"


def scalar_sink_error(option: str, value: Any, err: BaseException) -> RankCollapseError:
    """The one line refusing ``option=value`` when its library cannot be imported (``err``)."""
    from rankcollapse.edge.validate import quote

    what = {"tensorboard": "torch.utils.tensorboard (the tensorboard package)", "wandb": "the wandb package"}
    return RankCollapseError(
        f"{option}={quote(value, 80)} needs {what[option]}, which cannot be imported here "
        f"({error_line(err)}); allowed: install it, or leave {option} out "
        "(the rows are in memory and in out=)"
    )


def _is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike) and not isinstance(value, bool)


def scalar_tag(row: dict[str, Any]) -> str:
    """``rankcollapse/{metric}/{hidden_state}``: the TensorBoard tag and wandb key of a row."""
    return f"rankcollapse/{row['metric']}/{row['hidden_state']}"


class Outputs:
    """The sinks of one monitor (module docstring). ``record``: what ``config.json`` holds;
    ``warn(message)``: how a failing sink is reported (one line)."""

    def __init__(
        self,
        out: str | Path | None,
        record: dict[str, Any],
        warn: Callable[[str], None],
        tensorboard: Any = None,
        wandb: Any = None,
    ) -> None:
        self.out = None if out is None else Path(out)
        self.record = record
        self.warn = warn
        self._writer: Any = None
        self._folder: Any = None
        self._csv_ok = self.out is not None
        self._owned: list[Any] = []  # the writer / run made here from a path: closed with the monitor
        self.tensorboard = self._tensorboard(tensorboard)
        try:
            self.wandb = self._wandb(wandb)
        except RankCollapseError:
            self._close_owned()
            raise

    def _tensorboard(self, given: Any) -> Any:
        if given is None or hasattr(given, "add_scalar"):
            return given
        if not _is_path(given):
            raise RankCollapseError(
                f"tensorboard={type(given).__name__} is invalid; allowed: a log folder or an object with "
                "add_scalar(tag, value, step)"
            )
        try:
            from torch.utils.tensorboard import SummaryWriter
        except Exception as err:  # ImportError, or a tensorboard/protobuf pair that does not load
            raise scalar_sink_error("tensorboard", os.fspath(given), err) from None
        try:
            writer = SummaryWriter(os.fspath(given))
        except OSError as err:
            raise RankCollapseError(f"tensorboard: cannot write the log folder ({error_line(err)})") from None
        self._owned.append(writer)
        return writer

    def _wandb(self, given: Any) -> Any:
        if given is None or given is False or hasattr(given, "log"):
            return None if given is False else given
        if given is not True and not _is_path(given):
            raise RankCollapseError(
                f"wandb={type(given).__name__} is invalid; allowed: True (the active run), a folder for an "
                "offline run, or an object with log(dict, step=)"
            )
        shown = True if given is True else os.fspath(given)
        try:
            import wandb
        except Exception as err:
            raise scalar_sink_error("wandb", shown, err) from None
        if given is True:
            return wandb
        try:
            run = wandb.init(dir=os.fspath(given), mode="offline", project="rankcollapse",
                             config={"monitor": self.record})
        except Exception as err:
            why = error_line(err)
            raise RankCollapseError(f"wandb: cannot start an offline run in {given} ({why})") from None
        self._owned.append(run)
        return run

    def write(self, rows: list[dict[str, Any]], step: int) -> None:
        """Append ``rows`` (one probe's) to every sink; a sink that fails is reported and switched off."""
        if not rows:
            return
        if self._csv_ok:
            try:
                if self._writer is None:
                    self._open()
                for row in rows:
                    self._writer.write_row(row)
            except Exception as err:  # a disk that fills, a folder that went read-only: never stop training
                self._csv_ok = False
                self.warn(
                    f"CSV in {self.out} switched off at step {step} ({error_line(err)}); rows are kept in "
                    "memory (Monitor.to_frame())"
                )
                self._abandon()
        if self.tensorboard is not None:
            try:
                for row in rows:
                    self.tensorboard.add_scalar(scalar_tag(row), row["value"], step)
            except Exception as err:
                self.tensorboard = None
                self.warn(f"TensorBoard scalars switched off at step {step} ({error_line(err)})")
        if self.wandb is not None:
            try:
                self.wandb.log({scalar_tag(row): row["value"] for row in rows}, step=step)
            except Exception as err:
                self.wandb = None
                self.warn(f"wandb scalars switched off at step {step} ({error_line(err)})")

    def _open(self) -> None:
        """Claim the folder (:class:`edge.folder.OutputFolder`, command ``monitor``) and start the CSV."""
        from rankcollapse.edge.folder import OutputFolder
        from rankcollapse.edge.runs import RunWriter

        folder = OutputFolder(
            self.out,
            "monitor",
            option="out",
            outputs=("config.json", RunWriter.FINAL, RunWriter.PARTIAL, PARQUET),
            keep_interrupted=True,  # an interrupted training's telemetry cannot be measured again
        ).acquire()
        self._folder = folder
        try:
            self._writer = RunWriter(folder, {"monitor": self.record})
        except BaseException:
            self._folder = None
            folder.release(failed=True)
            raise

    def _abandon(self) -> None:
        """Close a failed CSV writer, keeping what reached the disk under the partial name."""
        writer, folder, self._writer, self._folder = self._writer, self._folder, None, None
        try:
            if writer is not None:
                writer.close()
        except Exception:
            pass
        finally:
            if folder is not None:
                folder.release(failed=True)

    def close(self, frame: Callable[[], Any], interrupted: bool = False) -> list[Path]:
        """Publish ``metrics.csv`` (and ``metrics.parquet`` where pyarrow is installed; ``frame()``
        gives the table) and flush TensorBoard. Returns the files written. ``interrupted``: the training
        did not finish (an exception left the ``with`` block): nothing is published, the rows stay in
        ``metrics.partial.csv`` as after a kill, and the folder's lock is let go."""
        written: list[Path] = []
        if interrupted and self._writer is not None:
            self._abandon()
        elif self._writer is not None:
            writer, folder, self._writer, self._folder = self._writer, self._folder, None, None
            staged: list[Path] = []
            error: BaseException | None = None
            try:
                staged.append(folder.published(writer.finish()))
                if importlib.util.find_spec("pyarrow") is not None:
                    from rankcollapse.edge.atomic import atomic_path

                    with atomic_path(folder.file(PARQUET)) as tmp:
                        frame().to_parquet(tmp, index=False)
                    staged.append(folder.path / PARQUET)
            except Exception as err:
                error = err
            finally:
                writer.close()
                try:
                    folder.release(failed=error is not None)
                except Exception as err:
                    error = error or err
            failed = error is not None
            if error is not None:
                self._unfinished(error)
            written = [] if failed else staged  # a failed close publishes nothing: no path that is not there
        if self.tensorboard is not None and hasattr(self.tensorboard, "flush"):
            try:
                self.tensorboard.flush()
            except Exception as err:
                self.warn(f"TensorBoard flush failed ({error_line(err)})")
        self._close_owned()
        return written

    def _unfinished(self, err: BaseException) -> None:
        """The one line of a close that could not publish: where the rows are (a failed write never
        removes the rows already on disk: ``edge.folder.OutputFolder.finish_partial``)."""
        from rankcollapse.edge.runs import RunWriter

        partial = self.out / RunWriter.PARTIAL if self.out is not None else None
        kept = f"{partial} and memory (Monitor.to_frame())" if partial and partial.is_file() else (
            "memory (Monitor.to_frame())")
        self.warn(f"could not finish the files in {self.out} ({error_line(err)}); nothing was published, "
                  f"the rows are kept in {kept}")

    def _close_owned(self) -> None:
        """Finish what was made here from a path (an event file, an offline run); it takes no more rows."""
        owned, self._owned = self._owned, []
        for sink in owned:
            if sink is self.tensorboard:
                self.tensorboard = None
            if sink is getattr(self, "wandb", None):
                self.wandb = None
            try:
                (getattr(sink, "finish", None) or sink.close)()
            except Exception as err:
                self.warn(f"could not close {type(sink).__name__} ({error_line(err)})")
