"""Where telemetry rows go while training runs: a CSV appended as it goes, Parquet, TensorBoard, wandb.

Every row is tidy: ``step, layer, hidden_state, hook, metric, value`` (:data:`COLUMNS`).

- ``out`` (a folder, through the one output layer :mod:`rankcollapse.edge.folder`): ``config.json`` and
  ``metrics.partial.csv`` from the first probe on, each row flushed as written
  (:class:`rankcollapse.edge.runs.RunWriter`), renamed ``metrics.csv`` when the monitor is closed;
  ``metrics.parquet`` too (written atomically at close) where ``pyarrow`` is installed.
- ``tensorboard``: an object with ``add_scalar(tag, value, step)`` (a ``SummaryWriter``), or a log
  folder for one (used only where ``tensorboard`` is installed). Tag ``rankcollapse/{metric}/{hidden_state}``.
- ``wandb``: an object with ``log(dict, step=)`` (a wandb run), or ``True`` for the ``wandb``
  module's active run (used only where ``wandb`` is installed). Same keys as TensorBoard's tags.

A sink that fails (a disk that fills, a read-only folder, a logger that raises) is reported in one
line through ``warn`` and switched off; the rows stay in memory and training goes on.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import error_line

COLUMNS: tuple[str, ...] = ("step", "layer", "hidden_state", "hook", "metric", "value")
PARQUET = "metrics.parquet"


describe = error_line  # one line for an error (``edge.errors.error_line``)


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
        self.tensorboard = self._tensorboard(tensorboard)
        self.wandb = self._wandb(wandb)

    def _tensorboard(self, given: Any) -> Any:
        if given is None or hasattr(given, "add_scalar"):
            return given
        if importlib.util.find_spec("tensorboard") is None:
            self.warn(f"tensorboard={str(given)[:80]!r} ignored: the tensorboard package is not installed")
            return None
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(str(given))

    def _wandb(self, given: Any) -> Any:
        if given is None or given is False or hasattr(given, "log"):
            return None if given is False else given
        if given is True:
            if importlib.util.find_spec("wandb") is None:
                self.warn("wandb=True ignored: the wandb package is not installed")
                return None
            import wandb

            return wandb
        self.warn(f"wandb={type(given).__name__} ignored; allowed: True or an object with log(dict, step=)")
        return None

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
                    f"CSV in {self.out} switched off at step {step} ({describe(err)}); rows are kept in "
                    "memory (Monitor.to_frame())"
                )
                self._abandon()
        if self.tensorboard is not None:
            try:
                for row in rows:
                    self.tensorboard.add_scalar(scalar_tag(row), row["value"], step)
            except Exception as err:
                self.tensorboard = None
                self.warn(f"TensorBoard scalars switched off at step {step} ({describe(err)})")
        if self.wandb is not None:
            try:
                self.wandb.log({scalar_tag(row): row["value"] for row in rows}, step=step)
            except Exception as err:
                self.wandb = None
                self.warn(f"wandb scalars switched off at step {step} ({describe(err)})")

    def _open(self) -> None:
        """Claim the folder (:class:`edge.folder.OutputFolder`, command ``monitor``) and start the CSV."""
        from rankcollapse.edge.folder import OutputFolder
        from rankcollapse.edge.runs import RunWriter

        folder = OutputFolder(
            self.out,
            "monitor",
            option="out",
            outputs=("config.json", RunWriter.FINAL, RunWriter.PARTIAL, PARQUET),
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

    def close(self, frame: Callable[[], Any]) -> list[Path]:
        """Publish ``metrics.csv`` (and ``metrics.parquet`` where pyarrow is installed; ``frame()``
        gives the table) and flush TensorBoard. Returns the files written."""
        written: list[Path] = []
        if self._writer is not None:
            writer, folder, self._writer, self._folder = self._writer, self._folder, None, None
            failed = True
            try:
                written.append(folder.published(writer.finish()))
                if importlib.util.find_spec("pyarrow") is not None:
                    from rankcollapse.edge.atomic import atomic_path

                    with atomic_path(folder.file(PARQUET)) as tmp:
                        frame().to_parquet(tmp, index=False)
                    written.append(folder.path / PARQUET)
                failed = False
            except Exception as err:
                self.warn(
                    f"could not finish the files in {self.out} ({describe(err)}); rows are kept in "
                    "memory (Monitor.to_frame())"
                )
            finally:
                writer.close()
                try:
                    folder.release(failed=failed)
                except Exception as err:
                    self.warn(f"could not mark {self.out} complete ({describe(err)})")
        if self.tensorboard is not None and hasattr(self.tensorboard, "flush"):
            try:
                self.tensorboard.flush()
            except Exception as err:
                self.warn(f"TensorBoard flush failed ({describe(err)})")
        return written
