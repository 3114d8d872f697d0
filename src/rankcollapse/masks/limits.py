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

from rankcollapse.edge.validate import check_memory

DENSE_BYTES_PER_PAIR = 17
SPARSE_BYTES_PER_EDGE = 24
ANALYSIS_BYTES_PER_EDGE = 64


def require_memory(estimate: float, what: str, hint: str = "") -> None:
    """Raise ``RankCollapseError`` if ``estimate`` bytes exceed the available memory (one line, through
    the one memory check ``validate.check_memory``); ``hint``: what is allowed instead."""
    allowed = hint.removeprefix("allowed: ") if hint else "a smaller n or a sparser mask"
    check_memory(f"{what} (estimate)", estimate, allowed=allowed)

