"""Dtype names, machine epsilon and the precision floor, defined once.

The project's dtype names are ``float64`` and ``float32`` (full precision: every command computes in
them) and ``bfloat16`` and ``float16`` (half precision: a model's weights and hidden states in
``analyze`` and the monitor, never a reduction: the metrics measure a half-precision state in float32,
:func:`rankcollapse.metrics.measures.working`). ``f64`` / ``f32`` / ``bf16`` / ``fp16`` (and
``double``, ``float``, ``half``) are accepted as input aliases and never written back. A command
checks its user's name with :func:`dtype_name` (``half=True`` where it runs in half precision; a half
name elsewhere is one line saying which commands do), and converts it with :func:`parse_dtype`.

The precision floor of a token matrix ``x`` is ``FLOOR_FACTOR * eps(dtype) * ||x||_F``, ``dtype`` the
one ``x`` was computed in (a run's hidden states: the model's dtype, whatever the metrics' arithmetic):
a ``mu`` below it is rounding noise, so a curve that stops falling there has collapsed, not
stabilised. ``eps``: ``2^-52`` (float64), ``2^-23`` (float32), ``2^-10`` (float16), ``2^-7``
(bfloat16), so ``FLOOR_FACTOR * eps`` is 7.1e-15, 3.8e-6, 0.031 and 0.25.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.edge.validate import checked, quote

#: Full-precision dtype names, in the order the CLI lists them: every command computes in these.
DTYPE_NAMES: tuple[str, ...] = ("float64", "float32")
#: Half-precision dtype names: a model run in them (``analyze --dtype``, the monitor's probe of a model
#: in them); its metrics are reduced in float32 against the floor of its own dtype.
HALF_DTYPE_NAMES: tuple[str, ...] = ("bfloat16", "float16")
#: Every dtype name, full then half precision.
ALL_DTYPE_NAMES: tuple[str, ...] = DTYPE_NAMES + HALF_DTYPE_NAMES
_DTYPES: dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32,
                                   "bfloat16": torch.bfloat16, "float16": torch.float16}
_ALIASES: dict[str, str] = {"f64": "float64", "f32": "float32", "double": "float64", "float": "float32",
                            "fp64": "float64", "fp32": "float32", "bf16": "bfloat16", "f16": "float16",
                            "fp16": "float16", "half": "float16"}
#: What a half-precision name is refused with where a command computes in full precision only.
HALF_ONLY_IN = ("analyze and the monitor run a model in half precision; the simulator, the equilibria, the "
                "experiments and trajectory training compute in float64 or float32")

#: ``c`` in the precision-floor test ``mu <= c * eps(dtype) * ||x||_F``. Computing the mean
#: token and subtracting it leaves a rounding residue of a few ``eps * ||x||_F`` even when all
#: tokens are mathematically equal: in collapsed simulator runs (n = 32..512, complete/causal,
#: with and without sphere normalisation) ``mu / ||x||_F`` jitters between 0 and 9.3 eps in both
#: float64 (up to 2.1e-15) and float32 (up to 5.9e-7). ``c = 32`` flags those with a 3x margin.
FLOOR_FACTOR = 32.0


def canonical_dtype_name(name: str, *, half: bool = False) -> str:
    """``"f64"``, ``"float64"``, ``"double"`` -> ``"float64"`` (likewise float32; with ``half``: ``bf16``
    -> ``bfloat16``, ``fp16`` / ``half`` -> ``float16``); RankCollapseError (one line) for an unknown
    name, and for a half-precision one unless ``half`` (the command computes in full precision only)."""
    key = str(name).strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    allowed = ALL_DTYPE_NAMES if half else DTYPE_NAMES
    shown = str(name)[:40]
    if key in HALF_DTYPE_NAMES and not half:
        raise RankCollapseError(f"dtype {shown!r} is half precision, refused here ({HALF_ONLY_IN}); "
                                f"allowed: {', '.join(allowed)}")
    if key not in _DTYPES:
        raise RankCollapseError(f"unknown dtype {shown!r}; allowed: {', '.join(allowed)}")
    return key


@checked
def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """A dtype name of :data:`ALL_DTYPE_NAMES` (or its alias, or a torch dtype of one) -> the torch dtype.

    The conversion, not the check of a user's choice: a command checks the name first with
    :func:`dtype_name` (which refuses half precision where the command computes in full precision)."""
    if isinstance(name, torch.dtype):
        return _DTYPES[dtype_name(name, half=True)]
    return _DTYPES[canonical_dtype_name(name, half=True)]


@checked
def dtype_name(dtype: torch.dtype | str, *, half: bool = False) -> str:
    """The canonical name (``float64`` / ``float32``; with ``half`` also ``bfloat16`` / ``float16``) of a
    torch dtype or of any accepted name; RankCollapseError (one line) else (:func:`canonical_dtype_name`)."""
    if isinstance(dtype, str):
        return canonical_dtype_name(dtype, half=half)
    for key, value in _DTYPES.items():
        if value == dtype:
            return canonical_dtype_name(key, half=half)
    allowed = ALL_DTYPE_NAMES if half else DTYPE_NAMES
    raise RankCollapseError(f"unsupported dtype {dtype}; allowed: {', '.join(allowed)}")


def is_half(dtype: torch.dtype | str) -> bool:
    """Whether ``dtype`` is a half-precision one (:data:`HALF_DTYPE_NAMES`)."""
    return dtype_name(dtype, half=True) in HALF_DTYPE_NAMES


def check_half_device(dtype: torch.dtype | str, device: torch.device | str) -> None:
    """Refuse, in one line, a half-precision dtype the device cannot compute in: ``bfloat16`` on a CUDA GPU
    without it (compute capability below 8.0: torch would emulate it, or fail inside a kernel). The CPU
    runs both (bfloat16 and float16 matrix products are slower than float32's where the CPU has no
    instructions for them: docs/models.md, "Half precision"). Full-precision dtypes pass (float64 on a
    device: :func:`rankcollapse.core.execution.parse_device`)."""
    name = dtype_name(dtype, half=True)
    if isinstance(device, bool) or not isinstance(device, str | torch.device):
        raise RankCollapseTypeError(f"device must be a name (cpu, cuda, cuda:K) or a torch.device, got "
                                    f"{type(device).__name__}")
    try:
        where = torch.device(device)
    except (RuntimeError, ValueError):
        raise RankCollapseError(f"device {quote(str(device))} is not a device; allowed: cpu, cuda or "
                                "cuda:K") from None
    if name != "bfloat16" or where.type != "cuda":
        return
    if not torch.cuda.is_available():
        raise RankCollapseError(f"--device {where}: no GPU is visible here; allowed: --device cpu")
    index = where.index if where.index is not None else torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    if major < 8:
        raise RankCollapseError(
            f"--device {where}: bfloat16 is not supported there ({torch.cuda.get_device_name(index)}, "
            f"compute capability {major}.{minor}, below 8.0); allowed: --dtype float16 or float32, or "
            "--device cpu"
        )


@checked
def eps(dtype: torch.dtype | str) -> float:
    """Machine epsilon of a dtype: ``2^-52`` (float64), ``2^-23`` (float32), ``2^-10`` (float16), ``2^-7``
    (bfloat16): the spacing of the dtype's numbers at 1, twice the unit roundoff."""
    return float(torch.finfo(parse_dtype(dtype)).eps)


@checked
def floor_rel(dtype: torch.dtype | str) -> float:
    """The relative precision floor ``FLOOR_FACTOR * eps(dtype)`` (a bound on ``mu / ||x||_F``): 7.1e-15
    (float64), 3.8e-6 (float32), 0.031 (float16), 0.25 (bfloat16). ``dtype``: the one the hidden states
    were computed in, not the one the metrics reduce them in."""
    return FLOOR_FACTOR * eps(dtype)


@checked
def precision_floor(x: Tensor) -> Tensor:
    """The floor ``FLOOR_FACTOR * eps(dtype) * ||x||_F`` below which ``mu`` is rounding noise, ``dtype``
    x's own (a half-precision x: its norm summed in float32, the floor of its own eps).

    x: [..., n, d] -> [...] (float32 for a half-precision x, else x's dtype).
    """
    if x.ndim < 2 or not x.is_floating_point():
        raise ValueError(
            f"expected floating-point tokens x of shape [..., n, d], got {tuple(x.shape)} {x.dtype}"
        )
    wide = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
    return FLOOR_FACTOR * torch.finfo(x.dtype).eps * torch.linalg.vector_norm(wide, dim=(-2, -1))
