"""Pool-worker set-up: die with the parent, ignore Ctrl-C, send layer ticks, cap BLAS threads.

Every local worker process runs :func:`init_worker` first:

- on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker the moment its
  parent dies, ``kill -9`` included; a watchdog thread that polls the parent pid is the fallback
  (other systems, or a parent that died before ``prctl`` ran);
- SIGINT is ignored: Ctrl-C in a terminal reaches the whole process group, and only the parent
  decides what to do (it stops the pool and reports what it kept);
- ``OMP_NUM_THREADS`` & co. are set to ``threads`` before any task imports torch.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

_PR_SET_PDEATHSIG = 1
_ticks: Any = None  # a multiprocessing queue of layer ticks, set in pool workers


def die_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Make this process exit when ``parent_pid`` dies (prctl on Linux + a watchdog thread)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the watchdog remains
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="rankcollapse-parent-watchdog", daemon=True).start()


def init_worker(ticks: Any, threads: int, parent_pid: int) -> None:
    """Initializer of a local pool worker (see the module docstring)."""
    global _ticks
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _ticks = ticks
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)  # read by torch when a task first imports it


def worker_tick(layer: int, run_id: str = "") -> None:
    """The default ``on_layer`` of a task: one tick of run ``run_id`` to the parent's progress (if any)."""
    if _ticks is not None:
        _ticks.put(run_id)
