"""Process-level memory settings for long runs (glibc only; no-ops elsewhere).

Deep runs allocate and free the same large temporaries every layer. glibc then either returns
them to the OS on every call (slow: float64 runs ~2x slower) or, once the mmap threshold is
raised, keeps them in a heap that fragments and grows by ~0.2 MB per layer. We do both right:
raise the threshold at start (:func:`raise_mmap_threshold`) and hand free heap pages back every
``TRIM_EVERY`` layers (:func:`trim_heap`), so memory does not grow with depth.
"""

from __future__ import annotations

import ctypes
import functools

TRIM_EVERY = 64
_M_MMAP_THRESHOLD = -3


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018  (glibc only)
    except (OSError, AttributeError):
        return None
    return libc


def raise_mmap_threshold(nbytes: int = 1 << 30) -> None:
    """Keep temporaries below ``nbytes`` in the heap instead of mmap/munmap on every call."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, nbytes)


def trim_heap() -> None:
    """Return free heap pages to the OS (``malloc_trim(0)``)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def trim_heap_every(step: int, every: int = TRIM_EVERY) -> None:
    """Call :func:`trim_heap` when ``step`` is a positive multiple of ``every`` (layer loops)."""
    if step > 0 and step % every == 0:
        trim_heap()
