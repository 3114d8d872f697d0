"""The validation layer at the edge of the API: types, shapes, finiteness, ranges, sizes.

Every public entry point (a config's ``__post_init__``, a CLI command) checks its arguments
here before it allocates anything, so a user sees one line naming the bad argument and what is
allowed, never a traceback from deep inside torch. Each helper returns the checked (and, where
stated, normalised) value and raises :class:`~rankcollapse.edge.errors.RankCollapseError` (a
``ValueError``) or :class:`~rankcollapse.edge.errors.RankCollapseTypeError` (also a ``TypeError``).

Sizes: :func:`check_memory` refuses a job whose estimated peak memory exceeds what the machine
has available now (``MemAvailable`` of ``/proc/meminfo``), naming the estimate.

This module imports no heavy library at import time (torch only inside the tensor helpers).
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import functools
import inspect
import math
import numbers
import os
import threading
import types
import typing
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError

#: Longest user string quoted back in an error message.
QUOTE_LIMIT = 60


def plain_text(text: str) -> str:
    """``text`` as matplotlib draws it literally: each ``$`` escaped, so a user's string in a figure (a
    title, a folder or mask name in a label) is never parsed as mathtext (``$\\foo{$`` raised at save)."""
    return str(text).replace("$", r"\$")


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """The one way a user value is quoted back in a message: its ``repr`` on one line, cut to ``limit``
    characters (``'...'`` marks a cut, with the length of a long string: ``'abc...' (100000 chars)``);
    an array as its type and shape."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<{type_name(value)} of shape {tuple(value.shape)}>"
    text = " ".join(repr(value).split())
    if len(text) <= limit:
        return text
    size = f" ({len(value)} chars)" if isinstance(value, str) else ""
    return text[: limit - 3] + "..." + size


def type_name(value: object) -> str:
    """``numpy.ndarray``, ``str``, ``torch.Tensor``: the qualified type name of a value."""
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module.split('.')[0]}.{cls.__qualname__}"


# ---- scalars -------------------------------------------------------------------------------------
def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """An integer (not a bool, not a float) with ``low <= value <= high``; returns it as ``int``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise RankCollapseTypeError(f"{name} must be an integer, got {quote(value)} ({type_name(value)})")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise RankCollapseError(f"{name} must be {_range_words(low, high)}, got {value}")
    return value


def check_float(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    finite: bool = True,
) -> float:
    """A real number (int or float, not a bool); finite unless ``finite=False``; in the range.

    ``low_open=True`` makes the lower bound strict (``value > low``).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise RankCollapseTypeError(f"{name} must be a number, got {quote(value)} ({type_name(value)})")
    value = float(value)
    if math.isnan(value) or (finite and math.isinf(value)):
        raise RankCollapseError(f"{name} must be a finite number, got {value}")
    too_low = low is not None and (value <= low if low_open else value < low)
    if too_low or (high is not None and value > high):
        words = f"> {low:g}" if low_open and high is None else _range_words(low, high)
        raise RankCollapseError(f"{name} must be {words}, got {value:g}")
    return value


#: Largest integer run parameter an estimate reads: a size beyond it is a typo (and no float).
PARAM_MAX = 10**15


def check_param(params: cabc.Mapping[str, Any], key: str, default: Any = None, *, low: float = 1,
                integer: bool = True) -> float:
    """A numeric run parameter (a config's ``base`` or grid point) as an estimate reads it:
    ``params[key]`` (``default`` when absent or null; no default: one line saying it is missing), an
    integer between ``low`` and :data:`PARAM_MAX` (a finite real ``>= low`` with ``integer=False``). The
    line names it ``parameter <key>``: ``parameter n must be between 1 and 1e+15, got -4``."""
    value = params.get(key) if isinstance(params, cabc.Mapping) else None
    if value is None:
        value = default
    if value is None:
        raise RankCollapseError(f"parameter {key} is missing; allowed: {key}: <a number> in base or grid")
    if integer:
        return float(check_int(f"parameter {key}", value, low=int(low), high=PARAM_MAX))
    return check_float(f"parameter {key}", value, low=low)


def param_int(params: cabc.Mapping[str, Any], key: str, default: Any = None, *, low: int = 1) -> int:
    """A whole-number run parameter a task reads (:func:`check_param`: one line naming it), as ``int``."""
    return int(check_param(params, key, default, low=low))


def param_float(params: cabc.Mapping[str, Any], key: str, default: Any = None, *, low: float = 0.0) -> float:
    """A real run parameter a task reads (finite, ``>= low``; :func:`check_param`: one line naming it)."""
    return check_param(params, key, default, low=low, integer=False)


def _range_words(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"between {low:g} and {high:g}"
    if low is not None:
        return f">= {low:g}"
    if high is not None:
        return f"<= {high:g}"
    return "a number"


def check_choice(name: str, value: Any, allowed: Iterable[str]) -> str:
    """One of ``allowed`` (strings); the message lists them."""
    options = tuple(allowed)
    if not isinstance(value, str) or value not in options:
        raise RankCollapseError(f"{name} {quote(value)} is not allowed; allowed: {', '.join(options)}")
    return value


def check_threads(name: str, value: Any) -> int:
    """A thread count between 1 and the number of CPUs of this machine: the one check of every thread
    option (``--threads``, ``--metric-threads``, ``metric_threads=``, a story's ``threads:``), as
    ``--workers`` is capped. More threads than CPUs only slows torch down; 10^5 of them crashed it."""
    return check_int(name, value, low=1, high=os.cpu_count() or 1)


# ---- tensors -------------------------------------------------------------------------------------
def check_tensor(
    name: str,
    value: Any,
    *,
    shapes: Sequence[tuple[int, ...]] | None = None,
    ndim: int | Sequence[int] | None = None,
    floating: bool = True,
    finite: bool = True,
) -> Any:
    """A ``torch.Tensor`` (a numpy array or a list is refused, naming the argument).

    ``shapes``: the allowed shapes (any one of them); ``ndim``: the allowed numbers of dimensions;
    ``floating``: a floating-point (real) dtype; ``finite``: no NaN or infinite entry.
    """
    import torch

    if not isinstance(value, torch.Tensor):
        hint = " (convert with torch.from_numpy)" if type(value).__module__.startswith("numpy") else ""
        raise RankCollapseTypeError(f"{name} must be a torch.Tensor, got {type_name(value)}{hint}")
    shape = tuple(value.shape)
    if shapes is not None and shape not in [tuple(s) for s in shapes]:
        allowed = " or ".join(str(tuple(s)) for s in shapes)
        raise RankCollapseError(f"{name} has shape {shape}; allowed: {allowed}")
    if ndim is not None:
        dims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.ndim not in dims:
            raise RankCollapseError(f"{name} has {value.ndim} dimensions {shape}; allowed: {dims}")
    if floating and (not value.is_floating_point() or value.is_complex()):
        raise RankCollapseError(f"{name} must have a real floating-point dtype, got {value.dtype}")
    if finite:
        check_finite(name, value)
    return value


def check_token_ids(name: str, value: Any, vocab: int | None = None, positions: int | None = None) -> Any:
    """Token ids ``[b, n]`` a model's embedding can read: a ``torch.Tensor`` (a list or a numpy array
    refused, naming the argument), two dimensions, an integer dtype (float values, e.g. images
    ``[b, C, H, W]``, are no token ids), each id in ``0..vocab-1`` and ``n <= positions`` where given.
    The one check of ids at the edge (``analyze``'s ``ids``, a monitor's batch): the library's words
    ("index out of range in self", "Expected tensor for argument #1 'indices'") never reach a user."""
    import torch

    check_tensor(name, value, floating=False, finite=False)
    if value.ndim != 2:
        raise RankCollapseError(f"{name} has {value.ndim} dimensions {tuple(value.shape)}; allowed: token "
                                "ids "
                                "[b, n] (images are given as pixel_values to a vision encoder)")
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise RankCollapseError(f"{name} must hold integer token ids, got {value.dtype} values of shape "
                                f"{tuple(value.shape)}; allowed: a LongTensor [b, n]")
    if value.numel():
        low, high = int(value.min()), int(value.max())
        if low < 0 or (vocab is not None and high >= vocab):
            bad = low if low < 0 else high
            top = f"{vocab - 1}" if vocab is not None else "the vocabulary's last id"
            raise RankCollapseError(f"{name} holds token id {bad}; allowed: 0..{top} (the model's "
                                    "vocabulary)")
    if positions is not None and value.shape[1] > positions:
        raise RankCollapseError(f"{name} has {value.shape[1]} tokens per sample; allowed: at most "
                                f"{positions} "
                                "(the model's positions)")
    return value


def check_finite(name: str, value: Any) -> Any:
    """Refuse a tensor with a NaN or infinite entry, saying how many and where the first is."""
    import torch

    if value.is_floating_point() or value.is_complex():
        bad = ~torch.isfinite(value)
        count = int(bad.sum())
        if count:
            first = tuple(int(i) for i in bad.nonzero()[0].tolist())
            raise RankCollapseError(
                f"{name} has {count} non-finite entr{'y' if count == 1 else 'ies'} (NaN or inf; first at "
                f"index {first}); allowed: finite values only"
            )
    return value


# ---- sizes ---------------------------------------------------------------------------------------
def available_memory() -> int | None:
    """Bytes the machine can give now: ``MemAvailable`` of ``/proc/meminfo`` (None where unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def human_bytes(nbytes: float) -> str:
    """``3.2 GB``, ``41 MB``, ``4e+18 B`` beyond exabytes."""
    for unit, size in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            if nbytes >= 1000 * size and unit == "EB":
                return f"{nbytes:.1e} B"
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} B"


def check_memory(
    what: str, nbytes: float, available: int | None = None, allowed: str = "a smaller size"
) -> None:
    """The one memory check: refuse a job whose estimated peak memory ``nbytes`` exceeds the available
    memory, in one line naming the job and what is ``allowed`` instead.

    ``what`` names the job and its size (``"simulate with n = 2000000000, d = 16"``). Nothing is
    checked where the available memory is unknown (no ``/proc/meminfo``).
    """
    free = available_memory() if available is None else available
    if free is not None and nbytes > free:
        raise RankCollapseError(
            f"{what} needs about {human_bytes(nbytes)} of memory, more than the {human_bytes(free)} "
            f"available; allowed: {allowed}"
        )


# ---- paths ---------------------------------------------------------------------------------------
def _existing_parent(path: Path) -> Path | None:
    for parent in path.absolute().parents:
        if parent.exists():
            return parent
    return None


# ---- the public-function guard -------------------------------------------------------------------
#: Tensor arguments that hold real floating-point values, and the least number of dimensions each needs.
FLOAT_TENSORS: dict[str, int] = {"x": 2, "q": 2, "k": 2, "v": 2, "logits": 2, "r": 2, "s": 1, "mu": 1,
                                 "weight": 1, "bias": 1, "mu_rel": 1, "attn": 2, "before": 2, "after": 2}
#: Tensor arguments that hold booleans (masks).
BOOL_TENSORS: dict[str, int] = {"mask": 2}
#: Integer arguments that count something (at least 1).
SIZES = frozenset({"b", "n", "d", "batch", "heads", "qk_dim", "layers_run"})
#: Real arguments that must be positive.
POSITIVE = frozenset({"d_qk"})
#: Real arguments that must not be negative.
NON_NEGATIVE = frozenset({"std", "margin", "rtol", "eps"})


_TRUST = threading.local()


@contextlib.contextmanager
def trusted() -> Iterator[None]:
    """Inside this block checked functions skip their checks: the arguments come from code that has
    already validated its input at the edge (a checked function's body, the simulator's layer loop)."""
    depth = getattr(_TRUST, "depth", 0)
    _TRUST.depth = depth + 1
    try:
        yield
    finally:
        _TRUST.depth = depth


def checked(fn: Any = None, *, ndim: dict[str, int] | None = None) -> Any:
    """Decorator (``@checked``, ``@checked(ndim={"x": 1})``): check arguments against type hints, by name.

    Each argument must match its annotation (``Tensor``, ``int``, ``float``, ``str``, ``bool``,
    ``torch.Generator``, a class, ``X | None``, ``tuple[str, ...]``, ``Sequence[int]``, ``dict``);
    a tensor named in :data:`FLOAT_TENSORS` must be real floating-point with enough dimensions
    (and, for tokens ``x``, at least one token and one feature), one in :data:`BOOL_TENSORS` boolean;
    sizes (:data:`SIZES`) are >= 1, :data:`POSITIVE` reals > 0, :data:`NON_NEGATIVE` reals >= 0, and
    every real is not NaN; ``shape`` sequences hold no negative size. ``ndim`` overrides the least
    number of dimensions per argument. A failure is a RankCollapseTypeError / RankCollapseError
    naming the argument. Checks run at the edge only: a checked function called from inside another
    (or inside :func:`trusted`) runs unchecked.
    """
    if fn is None:
        return functools.partial(checked, ndim=ndim)
    least = {**FLOAT_TENSORS, **BOOL_TENSORS, **(ndim or {})}
    sig = inspect.signature(fn)
    hints: dict[str, Any] | None = None

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal hints
        if getattr(_TRUST, "depth", 0):
            return fn(*args, **kwargs)
        if hints is None:
            try:
                hints = typing.get_type_hints(fn)
            except Exception:  # an annotation that cannot be resolved: check nothing
                hints = {}
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise RankCollapseTypeError(f"{fn.__name__}(): {err}") from None
        for name, value in bound.arguments.items():
            if name in hints:
                _check_argument(fn.__name__, name, value, hints[name], least)
        with trusted():
            return fn(*args, **kwargs)

    return wrapper


def _check_argument(func: str, name: str, value: Any, annotation: Any, least: dict[str, int]) -> None:
    if not _matches(value, annotation):
        raise RankCollapseTypeError(
            f"{func}(): argument {name} must be {_describe(annotation)}, got {quote(value, 40)} "
            f"({type_name(value)})"
        )
    import torch

    if isinstance(value, torch.Tensor):
        if name in FLOAT_TENSORS:
            if not value.is_floating_point():
                raise RankCollapseError(f"{func}(): argument {name} must be a real floating-point tensor, "
                                        f"got {value.dtype}")
            if value.ndim < least[name]:
                raise RankCollapseError(f"{func}(): argument {name} needs at least {least[name]} "
                                        f"dimensions, got shape {tuple(value.shape)}")
            if least[name] >= 2 and value.ndim >= 2 and (value.shape[-2] == 0 or value.shape[-1] == 0):
                raise RankCollapseError(f"{func}(): argument {name} [..., n, d] needs n >= 1 rows and d >= 1 "
                                        f"columns, got shape {tuple(value.shape)}")
        elif name in BOOL_TENSORS:
            if value.dtype != torch.bool:
                raise RankCollapseError(f"{func}(): argument {name} must be a torch.bool tensor, "
                                        f"got {value.dtype}")
            if value.ndim < least[name]:
                raise RankCollapseError(f"{func}(): argument {name} needs at least {least[name]} "
                                        f"dimensions, got shape {tuple(value.shape)}")
    elif isinstance(value, bool) or value is None:
        return
    elif name == "shape" and isinstance(value, tuple | list) and any(int(v) < 0 for v in value):
        raise RankCollapseError(f"{func}(): argument shape {quote(value)} has a negative size")
    elif isinstance(value, numbers.Integral) and name in SIZES and value < 1:
        raise RankCollapseError(f"{func}(): argument {name} must be an integer >= 1, got {value}")
    elif isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        if math.isnan(value):
            raise RankCollapseError(f"{func}(): argument {name} must be a number, got NaN")
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if name in POSITIVE and not (value > 0 and math.isfinite(value)):
            raise RankCollapseError(f"{func}(): argument {name} must be a finite number > 0, got {value}")
        if name in NON_NEGATIVE and not (value >= 0 and math.isfinite(value)):
            raise RankCollapseError(f"{func}(): argument {name} must be a finite number >= 0, got {value}")


def _matches(value: Any, annotation: Any) -> bool:
    """Whether ``value`` fits ``annotation`` (shallow for containers; unknown forms accept)."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if annotation is None or annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is bool:
        return isinstance(value, bool)
    if origin in (tuple, list, cabc.Sequence):
        container = {tuple: tuple, list: list}.get(origin, (tuple, list))
        if not isinstance(value, container) or isinstance(value, str):
            return False
        item = args[0] if args else Any
        return all(_matches(v, item) for v in value)
    if origin in (dict, cabc.Mapping):
        return isinstance(value, dict)
    if origin is cabc.Callable or annotation is cabc.Callable:
        return callable(value)
    if origin is typing.Literal:
        return value in args
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True


def _describe(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("collections.abc.", "")
    if isinstance(annotation, type) and typing.get_origin(annotation) is None:
        text = annotation.__name__
    text = text.replace("torch.Tensor", "Tensor").replace("Tensor", "a torch.Tensor")
    return text
