"""Dtype names, machine epsilon and the precision floor, defined once.

The project's dtype names are ``float64`` and ``float32`` (``f64`` / ``f32`` are accepted as
input aliases and never written back). The precision floor of a token matrix ``x`` is
``FLOOR_FACTOR * eps(dtype) * ||x||_F``: a ``mu`` below it is rounding noise, so a curve that
stops falling there has collapsed, not stabilised.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked

#: Canonical dtype names, in the order the CLI lists them.
DTYPE_NAMES: tuple[str, ...] = ("float64", "float32")
_DTYPES: dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32}
_ALIASES: dict[str, str] = {"f64": "float64", "f32": "float32", "double": "float64", "float": "float32"}

#: ``c`` in the precision-floor test ``mu <= c * eps(dtype) * ||x||_F``. Computing the mean
#: token and subtracting it leaves a rounding residue of a few ``eps * ||x||_F`` even when all
#: tokens are mathematically equal: in collapsed simulator runs (n = 32..512, complete/causal,
#: with and without sphere normalisation) ``mu / ||x||_F`` jitters between 0 and 9.3 eps in both
#: float64 (up to 2.1e-15) and float32 (up to 5.9e-7). ``c = 32`` flags those with a 3x margin.
FLOOR_FACTOR = 32.0


def canonical_dtype_name(name: str) -> str:
    """``"f64"``, ``"float64"``, ``"double"`` -> ``"float64"`` (likewise float32); else RankCollapseError."""
    key = str(name).strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    if key not in _DTYPES:
        shown = str(name)[:40]
        raise RankCollapseError(f"unknown dtype {shown!r}; allowed: {', '.join(DTYPE_NAMES)}")
    return key


@checked
def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """A dtype name (or a torch float64/float32 dtype) -> the torch dtype."""
    if isinstance(name, torch.dtype):
        return _DTYPES[dtype_name(name)]
    return _DTYPES[canonical_dtype_name(name)]


@checked
def dtype_name(dtype: torch.dtype | str) -> str:
    """The canonical name (``float64`` / ``float32``) of a torch dtype or of any accepted name."""
    if isinstance(dtype, str):
        return canonical_dtype_name(dtype)
    for key, value in _DTYPES.items():
        if value == dtype:
            return key
    raise RankCollapseError(f"unsupported dtype {dtype}; allowed: {', '.join(DTYPE_NAMES)}")


@checked
def eps(dtype: torch.dtype | str) -> float:
    """Machine epsilon of a dtype (``2^-52`` for float64, ``2^-23`` for float32)."""
    return float(torch.finfo(parse_dtype(dtype)).eps)


@checked
def floor_rel(dtype: torch.dtype | str) -> float:
    """The relative precision floor ``FLOOR_FACTOR * eps(dtype)`` (a bound on ``mu / ||x||_F``)."""
    return FLOOR_FACTOR * eps(dtype)


@checked
def precision_floor(x: Tensor) -> Tensor:
    """The floor ``FLOOR_FACTOR * eps(dtype) * ||x||_F`` below which ``mu`` is rounding noise.

    x: [..., n, d] -> [...].
    """
    if x.ndim < 2 or not x.is_floating_point():
        raise ValueError(
            f"expected floating-point tokens x of shape [..., n, d], got {tuple(x.shape)} {x.dtype}"
        )
    return FLOOR_FACTOR * torch.finfo(x.dtype).eps * torch.linalg.vector_norm(x, dim=(-2, -1))
