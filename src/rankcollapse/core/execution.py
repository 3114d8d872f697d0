"""Where a computation runs and in how many pieces: the device, parsed once, and the sample batches.

- :func:`parse_device`: ``cpu``, ``cuda`` or ``cuda:K`` -> ``torch.device``, refused with one line
  (:class:`~rankcollapse.edge.errors.RankCollapseError`) for an unknown spelling, CUDA where torch sees
  none, an index beyond the GPUs visible, and ``float64`` on a device that lacks it
  (:func:`supports_float64`). Every entry point (``analyze``, ``simulate``, ``reproduce``) calls it
  once, before anything is computed or written.
- :func:`check_batch_size` and :func:`batch_slices`: ``samples`` drawn once, then streamed through a
  model ``B`` at a time, in order (``B >= samples``: one batch).

These are execution settings: a result computed on another device or in other batches is the same
result (on the CPU, to the last bit: ``tests/models/test_batches.py``), so they are never part of a
run's identity.
"""

from __future__ import annotations

import re

import torch

from rankcollapse.core.precision import parse_dtype
from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.edge.validate import quote

#: The device spellings accepted (``cuda:K``: the K-th GPU torch sees).
DEVICE_SPELLINGS: tuple[str, ...] = ("cpu", "cuda", "cuda:K")
_SPELLING = re.compile(r"^(cpu|cuda)(?::(\d{1,4}))?$")


def supports_float64(device: torch.device) -> bool:
    """Whether torch computes float64 on ``device``: CPU and CUDA do; on any other device a float64
    tensor is made there, and a refusal by torch (Apple's MPS) means no."""
    if device.type in ("cpu", "cuda"):
        return True
    try:
        torch.zeros(1, dtype=torch.float64, device=device)
    except (TypeError, RuntimeError):
        return False
    return True


def _no_cuda_reason() -> str:
    version = torch.__version__
    if torch.version.cuda is None:
        return f"torch {version} is built without CUDA"
    return f"torch {version} with CUDA {torch.version.cuda}, but no GPU is visible"


def parse_device(device: str | torch.device, dtype: str | torch.dtype | None = None) -> torch.device:
    """``cpu``, ``cuda`` (the current GPU) or ``cuda:K`` -> ``torch.device``; with ``dtype``, also
    check the device computes in it.

    RankCollapseError (one line) for an unknown spelling, ``cuda`` when ``torch.cuda.is_available()``
    is False (saying why: a torch built without CUDA, or no GPU visible), ``cuda:K`` with ``K`` not
    below ``torch.cuda.device_count()``, and ``float64`` where :func:`supports_float64` says no.
    """
    if isinstance(device, torch.device):
        text = str(device)
    elif isinstance(device, str):
        text = device.strip().lower()
    else:
        raise RankCollapseTypeError(f"device must be a name (cpu, cuda, cuda:K), got {type(device).__name__}")
    match = _SPELLING.match(text)
    if match is None:
        raise RankCollapseError(
            f"--device {quote(str(device), 40)} is not a device; allowed: {', '.join(DEVICE_SPELLINGS)} "
            "(K: a GPU index)"
        )
    kind, index = match.group(1), match.group(2)
    if kind == "cpu" and index is not None:
        raise RankCollapseError(f"--device {text!r}: the CPU has no index; allowed: cpu")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RankCollapseError(f"--device {text}: no CUDA GPU here ({_no_cuda_reason()})")
        count = torch.cuda.device_count()
        if index is not None and int(index) >= count:
            raise RankCollapseError(
                f"--device {text}: torch sees {count} CUDA GPU{'s' if count != 1 else ''} here; "
                f"allowed: cuda:0 .. cuda:{count - 1}"
            )
    parsed = torch.device(kind if index is None else f"{kind}:{int(index)}")
    if dtype is not None and parse_dtype(dtype) == torch.float64 and not supports_float64(parsed):
        raise RankCollapseError(
            f"--device {parsed}: float64 is not supported there by torch {torch.__version__}; "
            "allowed: --dtype float32, or --device cpu"
        )
    return parsed


def device_memory(device: torch.device) -> int | None:
    """Bytes free on a GPU (``torch.cuda.mem_get_info``); None on the CPU (the caller reads the
    machine's own, ``validate.available_memory``)."""
    if device.type != "cuda":
        return None
    return int(torch.cuda.mem_get_info(device)[0])


def check_batch_size(batch_size: int | None) -> int | None:
    """``batch_size`` as an int >= 1, or None (one batch of every sample); RankCollapseError else."""
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise RankCollapseTypeError(
            f"batch_size must be a whole number >= 1 (or None: one batch), got {type(batch_size).__name__}"
        )
    if batch_size < 1:
        raise RankCollapseError(f"--batch-size must be >= 1, got {batch_size}")
    return int(batch_size)


def batch_slices(samples: int, batch_size: int | None) -> list[slice]:
    """The batches of ``samples`` samples, ``batch_size`` consecutive ones each, in order; the last may
    be shorter. ``batch_size`` None or at least ``samples``: one batch (a larger one is clamped).

    >>> batch_slices(7, 3)
    [slice(0, 3, None), slice(3, 6, None), slice(6, 7, None)]
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise RankCollapseError(f"samples must be a whole number >= 0, got {samples!r}"[:80])
    size = check_batch_size(batch_size)
    size = samples if size is None else min(size, samples)
    if samples == 0:
        return []
    return [slice(lo, min(lo + size, samples)) for lo in range(0, samples, size)]
