"""Size guards for mask work: refuse, before allocating, a form whose memory estimate exceeds the machine.

Estimates (bytes, ours; deliberately a little generous so a refusal is never a surprise OOM):

- dense form ``dense(n)``: ``DENSE_BYTES_PER_PAIR * n^2`` (the index grids of the vectorised rule are
  int64, plus the bool result);
- sparse form ``sparse(n)``: ``SPARSE_BYTES_PER_EDGE * nnz`` (int64 indices plus the COO row ids that
  builders and ``&`` / ``|`` use on the way);
- graph analysis: ``ANALYSIS_BYTES_PER_EDGE * nnz`` (the sparse form, scipy CSR copies in both
  directions with float64 data, COO row ids, labels);

where ``nnz`` is the family's own estimate of allowed pairs (``Mask._nnz_hint``). The budget is the
memory the operating system reports as available (``MemAvailable`` in ``/proc/meminfo``; elsewhere
the physical memory), read at each check.
"""

from __future__ import annotations

import os

from rankcollapse.errors import RankCollapseError

DENSE_BYTES_PER_PAIR = 17
SPARSE_BYTES_PER_EDGE = 24
ANALYSIS_BYTES_PER_EDGE = 64


def available_memory() -> int:
    """Bytes the OS reports as available now (``MemAvailable``), else physical memory, else 2**40."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 2**40


def format_bytes(size: float) -> str:
    """``1.5 GB``-style text (powers of 1024)."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if size < 1024 or unit == "PB":
            return f"{size:.3g} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.3g} PB"  # pragma: no cover


def require_memory(estimate: float, what: str, hint: str = "") -> None:
    """Raise ``RankCollapseError`` if ``estimate`` bytes exceed the available memory (one line)."""
    budget = available_memory()
    if estimate > budget:
        tail = f"; {hint}" if hint else "; allowed: a smaller n or a sparser mask"
        raise RankCollapseError(
            f"{what} needs about {format_bytes(estimate)} (estimate), more than the "
            f"{format_bytes(budget)} of memory available{tail}"
        )

