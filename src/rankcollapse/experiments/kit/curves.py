"""One curve summary for every story: mean ± std per layer, per-sample log drops, the one "rate".

The paper plots raw ``mu(X(t))`` as the mean ± std over its text samples [paper §5]; the claim
rules need more than that band: how much each sample's curve fell, with an uncertainty. A
:class:`Curve` keeps, per layer ``t`` (row t = X(t), t = 0 the embeddings) and over the ``n``
samples of one condition (model, variant, mask, dtype, ...):

- ``mean, std, lo, hi``: the raw values' mean, sample standard deviation, minimum and maximum;
- ``drop, drop_std``: mean and std of the per-sample log drop ``log q_k(t) - log q_k(0)``, with
  ``q`` clamped from below at :meth:`Curve.clamp` (``floor_rel(dtype)`` for ``mu_rel``, the
  dtype's smallest normal number for raw ``mu``), so a curve at the floor counts as having fallen
  to the floor, never as "undefined";
- ``finite``: share of samples whose value is finite at ``t`` (a sample that overflowed once
  counts as non-finite from then on: overflow is marked, never cut);
- ``floor_share``: share of samples at or below the clamp (the precision floor for ``mu_rel``,
  an underflow to 0 for ``mu``).

**One std**: every ``std`` here is the sample standard deviation ``sqrt(sum (v - mean)^2 / (n - 1))``
(:func:`sample_std`; NaN for one sample), stored so in every curve row and pooled exactly.
**One rate**: :meth:`Curve.rate` gives the mean per-layer log rate between two layers with a
standard error (ours): ``(drop(b) - drop(a)) / (b - a)``, standard error
``(sd(b) + sd(a)) / sqrt(n) / (b - a)`` (an upper bound on the std of the difference; exact for
``a = 0``); it is printed as the per-layer factor ``x exp(rate)`` with the log rate beside it.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from rankcollapse.core.precision import dtype_name, floor_rel

#: The two collapse quantities: the paper's raw mu and the scale-free mu_rel = mu / ||X||_F.
QUANTITIES: tuple[str, ...] = ("mu", "mu_rel")
#: The error level of one decision: the two-sided tail of 2 standard errors of a normal mean
#: (4.55 %). Every interval of the kit is ``mean ± z(n) se`` with :func:`z`.
ALPHA = math.erfc(2.0 / math.sqrt(2.0))
_LOOKS: ContextVar[int] = ContextVar("rankcollapse_looks", default=1)


@functools.lru_cache(maxsize=4096)
def _quantile(n: int | None, looks: int) -> float:
    from scipy import stats

    p = 1.0 - ALPHA / (2 * looks)
    if n is None:
        return float(stats.norm.ppf(p))
    if n < 2:
        return math.inf
    return float(stats.t.ppf(p, n - 1))


def z(n: int | None = None) -> float:
    """The critical value of an interval over ``n`` samples: the Student t quantile
    ``t(1 - ALPHA / (2 K), n - 1)`` (the normal one for ``n=None``; inf below 2 samples), with ``K``
    the number of looks at growing samples (1, or what :func:`looks` set: Bonferroni over the looks
    of ``reproduce --until-decided``). ``z(None) = 2`` for one look; ``z(4) = 3.31``, ``z(64) = 2.03``."""
    return _quantile(None if n is None else int(n), _LOOKS.get())


def looks_note() -> str:
    """``", Bonferroni over 7 looks"`` inside :func:`looks` with ``k > 1``, else ``""``."""
    k = _LOOKS.get()
    return f", Bonferroni over {k} looks" if k > 1 else ""


@contextmanager
def looks(k: int) -> Iterator[int]:
    """Judge as one of ``k`` planned looks inside the ``with`` block: every interval uses level
    ``ALPHA / k`` (Bonferroni), so the chance that any of the ``k`` looks decides wrongly stays at most
    ``ALPHA``. The previous value is restored after."""
    if not (isinstance(k, int) and k >= 1):
        raise ValueError(f"the number of looks must be a positive integer, got {k!r}")
    token = _LOOKS.set(k)
    try:
        yield k
    finally:
        _LOOKS.reset(token)


#: Suffixes of the per-layer columns of a curve (the mean has none: column ``mu`` is the mean of mu).
_SUFFIXES = ("", "_std", "_min", "_max", "_drop", "_drop_std", "_floor_share")


def sample_std(values: Any, axis: int = 0) -> np.ndarray:
    """The one std of the project: ``sqrt(sum (v - mean)^2 / (n - 1))`` over the finite entries along
    ``axis`` (NaN where fewer than 2 are finite)."""
    a = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(a)
    n = finite.sum(axis=axis)
    mean = np.where(finite, a, 0.0).sum(axis=axis) / np.maximum(n, 1)
    dev = np.where(finite, a - np.expand_dims(mean, axis), 0.0)
    ss = (dev**2).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n >= 2, np.sqrt(ss / np.maximum(n - 1, 1)), np.nan)


def _all_nan_ok(reduce: Any, arrays: list[np.ndarray]) -> np.ndarray:
    """``reduce`` (``np.nanmin`` / ``np.nanmax``) over runs, per layer; a layer where every run is NaN
    (all samples overflowed) stays NaN without numpy's "All-NaN slice" warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return reduce(np.stack(arrays), axis=0)


@dataclass(frozen=True)
class Rate:
    """A mean per-layer log rate with its standard error, over ``n`` samples."""

    mean: float
    se: float
    n: int

    @property
    def lo(self) -> float:
        return self.mean - z(self.n) * self.se

    @property
    def hi(self) -> float:
        return self.mean + z(self.n) * self.se

    @property
    def factor(self) -> float:
        """``exp(mean)``: the mean per-layer factor (0.3 = falls to 30% per layer)."""
        return math.exp(self.mean) if math.isfinite(self.mean) else math.nan

    def text(self) -> str:
        """``x0.31/layer (log rate -1.2 ± 0.05, n=4)`` (± = ``z(n)`` standard errors)."""
        return f"x{self.factor:.3g}/layer (log rate {self.mean:.3g} ± {z(self.n) * self.se:.2g}, n={self.n})"


@dataclass(frozen=True)
class Curve:
    """Per-layer summary over samples of one quantity (``mu`` or ``mu_rel``) of one condition.

    Arrays have one entry per layer t = 0..L; ``n`` is the number of samples.
    """

    quantity: str
    dtype: str
    n: int
    mean: np.ndarray
    std: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    drop: np.ndarray
    drop_std: np.ndarray
    finite: np.ndarray
    floor_share: np.ndarray
    zero_share: np.ndarray | None = None  # share of samples whose X is exactly 0 (mu_rel = 0/0 undefined)

    @property
    def layers(self) -> int:
        """L: the index of the last layer."""
        return len(self.mean) - 1

    @property
    def clamp(self) -> float:
        return clamp_value(self.quantity, self.dtype)

    @classmethod
    def from_samples(cls, values: Any, quantity: str, dtype: str, zero: Any = None) -> Curve:
        """Summarise ``values`` [b, L+1] (sample k, layer t) of ``quantity`` in ``dtype``.

        ``zero`` [b, L+1] (optional): True where the sample's ||X||_F is 0 in its dtype (the tokens
        underflowed), so a NaN mu_rel there reads "undefined (0/0)", not "overflow"."""
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 2 or v.shape[0] < 1 or v.shape[1] < 1:
            raise ValueError(f"values must be [samples, layers] with both >= 1, got shape {v.shape}")
        dtype = dtype_name(dtype)
        ok = np.cumprod(np.isfinite(v), axis=1).astype(bool)  # non-finite once = non-finite after
        clamp = clamp_value(quantity, dtype)
        x = np.where(ok, v, np.nan)
        logs = np.log(np.maximum(x, clamp))
        drops = logs - logs[:, :1]
        return cls(
            quantity=quantity,
            dtype=dtype,
            n=v.shape[0],
            mean=_nan_stat(np.nanmean, x),
            std=sample_std(x),
            lo=_nan_stat(np.nanmin, x),
            hi=_nan_stat(np.nanmax, x),
            drop=_nan_stat(np.nanmean, drops),
            drop_std=sample_std(drops),
            finite=ok.mean(axis=0),
            floor_share=np.where(ok, x <= clamp, False).sum(axis=0) / v.shape[0],
            zero_share=None if zero is None else np.asarray(zero, dtype=bool).mean(axis=0),
        )

    def columns(self) -> dict[str, np.ndarray]:
        """The per-layer columns ``{q, q_std, q_min, q_max, q_drop, q_drop_std, q_floor_share}``."""
        q = self.quantity
        arrays = (self.mean, self.std, self.lo, self.hi, self.drop, self.drop_std, self.floor_share)
        return {**{f"{q}{s}": a for s, a in zip(_SUFFIXES, arrays, strict=True)}, f"{q}_finite": self.finite}

    @classmethod
    def from_rows(cls, rows: pd.DataFrame, quantity: str, dtype: str, n: int) -> Curve:
        """The curve stored in ``rows`` (one per layer, columns of :meth:`columns` and ``finite``)."""
        rows = rows.sort_values("layer")
        q = quantity
        get = [np.asarray(rows[f"{q}{s}"], dtype=np.float64) for s in _SUFFIXES]
        return cls(
            q,
            dtype_name(dtype),
            int(n),
            get[0],
            get[1],
            get[2],
            get[3],
            get[4],
            get[5],
            _finite_column(rows, q),
            get[6],
            np.asarray(rows["zero_share"], dtype=np.float64) if "zero_share" in rows else None,
        )

    @classmethod
    def pool(cls, curves: list[Curve]) -> Curve:
        """One curve of all samples of several (e.g. one per weight seed): exact pooled mean and std."""
        if not curves:
            raise ValueError("pool needs at least one curve")
        if len(curves) == 1:
            return curves[0]
        c0 = curves[0]
        n = np.array([c.n for c in curves], dtype=float)[:, None]
        fin = np.stack([c.finite for c in curves])
        w = n * fin
        wsum = np.where(w.sum(0) > 0, w.sum(0), np.nan)

        def pooled(means: list[np.ndarray], stds: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
            # sample std of the union: (sum_k (w_k - 1) sd_k^2 + sum_k w_k (m_k - m)^2) / (W - 1)
            m, sd = np.nan_to_num(np.stack(means)), np.nan_to_num(np.stack(stds))
            mean = (w * m).sum(0) / wsum
            ss = (np.maximum(w - 1, 0) * sd**2 + w * (m - mean) ** 2).sum(0)
            with np.errstate(invalid="ignore", divide="ignore"):
                std = np.where(wsum >= 2, np.sqrt(ss / np.maximum(wsum - 1, 1)), np.nan)
            return mean, std

        mean, std = pooled([c.mean for c in curves], [c.std for c in curves])
        drop, drop_std = pooled([c.drop for c in curves], [c.drop_std for c in curves])
        return cls(
            c0.quantity,
            c0.dtype,
            int(n.sum()),
            mean,
            std,
            _all_nan_ok(np.nanmin, [c.lo for c in curves]),
            _all_nan_ok(np.nanmax, [c.hi for c in curves]),
            drop,
            drop_std,
            (n * fin).sum(0) / n.sum(),
            (n * np.stack([c.floor_share for c in curves])).sum(0) / n.sum(),
            None
            if any(c.zero_share is None for c in curves)
            else (n * np.stack([c.zero_share for c in curves])).sum(0) / n.sum(),
        )

    def n_at(self, t: int) -> int:
        """Samples still finite at layer t."""
        return round(float(self.finite[t]) * self.n)

    def rate(self, start: int, end: int) -> Rate:
        """Mean per-layer log rate from layer ``start`` to ``end`` (see the module docstring)."""
        if not 0 <= start < end <= self.layers:
            raise ValueError(f"need 0 <= start < end <= {self.layers}, got {start}, {end}")
        n = self.n_at(end)
        if n == 0:
            return Rate(math.nan, math.nan, 0)
        sd = float(self.drop_std[end]) + (float(self.drop_std[start]) if start > 0 else 0.0)
        mean = (float(self.drop[end]) - float(self.drop[start])) / (end - start)
        return Rate(mean, sd / math.sqrt(n) / (end - start), n)

    def first_nonfinite(self) -> int | None:
        """First layer where some sample is not finite (None: all finite throughout)."""
        bad = np.nonzero(self.finite < 1.0)[0]
        return int(bad[0]) if bad.size else None

    def nonfinite_cause(self) -> str:
        """``"overflow"`` or, where ||X||_F underflowed to 0 in the dtype, ``"||X|| underflowed to 0"``."""
        t = self.first_nonfinite()
        if t is not None and self.zero_share is not None and self.zero_share[t] > 0:
            return "||X||_F underflowed to 0 (mu_rel = 0/0, undefined)"
        return "non-finite (overflow)"

    def first_at_floor(self, share: float = 0.5) -> int | None:
        """First layer where at least ``share`` of the samples sit at the clamp."""
        hit = np.nonzero(self.floor_share >= share)[0]
        return int(hit[0]) if hit.size else None


def _finite_column(rows: pd.DataFrame, q: str) -> np.ndarray:
    """``q_finite`` where the rows have it (runs of older versions: the shared ``finite``)."""
    col = rows[f"{q}_finite"] if f"{q}_finite" in rows else None
    if col is None or col.isna().any():
        col = rows["finite"]
    return np.asarray(col, dtype=np.float64)


def _nan_stat(fn: Any, a: np.ndarray) -> np.ndarray:
    """``fn(a, axis=0)`` with NaN (not a warning) for an all-NaN column."""
    out = np.full(a.shape[1], np.nan)
    has = ~np.all(np.isnan(a), axis=0)
    if has.any():
        out[has] = fn(a[:, has], axis=0)
    return out


def clamp_value(quantity: str, dtype: str) -> float:
    """Lower clamp of a quantity before taking logs: the precision floor for ``mu_rel``, the
    smallest normal number of the dtype for raw ``mu`` (an underflow to 0)."""
    if quantity == "mu_rel":
        return floor_rel(dtype)
    return float(torch.finfo(torch.float64 if dtype_name(dtype) == "float64" else torch.float32).tiny)


def curve_rows(values: dict[str, Any], dtype: str, zero: Any = None) -> list[dict[str, Any]]:
    """Per-layer rows of several quantities: ``values[q]`` is [b, L+1]; ``layer`` and ``finite`` first.

    ``zero`` [b, L+1]: where ||X||_F is 0 in the dtype (gives the ``zero_share`` column)."""
    curves = {q: Curve.from_samples(v, q, dtype) for q, v in values.items()}
    first = next(iter(curves.values()))
    finite = np.min([c.finite for c in curves.values()], axis=0)
    zshare = None if zero is None else np.asarray(zero, dtype=bool).mean(axis=0)
    rows = []
    for t in range(first.layers + 1):
        row: dict[str, Any] = {"layer": t, "samples": first.n, "finite": float(finite[t])}
        if zshare is not None:
            row["zero_share"] = float(zshare[t])
        for c in curves.values():
            row.update({k: float(a[t]) for k, a in c.columns().items()})
        rows.append(row)
    return rows


def sample_stats(name: str, values: Any) -> dict[str, float]:
    """``{name: mean, name_std, name_min, name_max}`` over the finite entries of ``values`` [b]
    (``name_std``: :func:`sample_std`)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {name: math.nan, f"{name}_std": math.nan, f"{name}_min": math.nan, f"{name}_max": math.nan}
    return {
        name: float(v.mean()),
        f"{name}_std": float(sample_std(v)),
        f"{name}_min": float(v.min()),
        f"{name}_max": float(v.max()),
    }
