"""One writer per output folder, and the folder is ours: reproduce's claim on ``--out``.

:class:`OutputLock` is the shared output layer (:class:`rankcollapse.edge.folder.OutputFolder`) for the
``reproduce`` command, resuming: held for the whole run (an exclusive ``flock`` on ``DIR/.lock``,
opened with ``O_NOFOLLOW``, never truncating a planted link's target); a second process fails at
once with one line naming the holder's pid, or with ``wait=True`` blocks until it is done. A
non-empty folder that rankcollapse did not make, or another command's, is refused; the marker
``DIR/.rankcollapse.json`` says ``complete: true`` only when the block ended cleanly. Folders this
lock created are removed again if the run left nothing in them (no empty folders after a failure).
"""

from __future__ import annotations

from pathlib import Path

from rankcollapse.edge.folder import LOCK_NAME, OutputFolder

__all__ = ["LOCK_NAME", "OutputLock"]


class OutputLock(OutputFolder):
    """``with OutputLock(out_dir, wait=False): ...`` -- see the module docstring."""

    def __init__(self, folder: str | Path, wait: bool = False, command: str = "reproduce") -> None:
        super().__init__(folder, command, option="--out", existing="resume", wait=wait)
        self.folder = self.path
