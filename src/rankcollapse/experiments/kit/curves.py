"""One curve summary for every story: mean ± std per layer, per-sample log drops, the one "rate".

The paper plots raw ``mu(X(t))`` as the mean ± std over its text samples [paper §5]; the claim
rules need more than that band: how much each sample's curve fell, with an uncertainty. A
:class:`Curve` keeps, per layer ``t`` (row t = X(t), t = 0 the embeddings) and over the ``n``
samples of one condition (model, mode, mask, dtype, ...):

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
**A rate is measured before the floor**: ``b`` is cut to the last layer before any sample reaches the
floor (:meth:`Curve.above_floor`), so no clamped value enters a rate (a curve averaged through the floor
reads the floor's own rate, ``ln(32 eps) / L``, whatever it did above it); where fewer than 2 layers of
``a..b`` lie above the floor the rate is not measured (:attr:`Rate.measured` False, NaN, with the floor's
layer: :meth:`Rate.text` and ``causes.floor_too_early`` say so). Every rule reads its rates here.

**The unit of sampling.** Where the weights are a random draw (a random init, the simulator's
Gaussian or orthogonal matrices) a statement is about networks, so the unit is the *network*: a curve
pooled over runs keeps each run's (each weight draw's) mean log drop (``net_drop``), and its rate is the
mean over networks with the standard error of the per-network rates, ``n`` = the number of networks
(one network: no interval). Pretrained weights are one fixed network: the unit is the excerpt.

**Many conditions, one row.** A rule that reads "any condition fails -> not reproduced" over ``m``
conditions judges each at level ``ALPHA / m`` (Bonferroni over the row's conditions, :func:`conditions`),
on top of the looks of a sequential run (:func:`looks`).

**The floor of raw mu** is the floor of mu_rel on the same samples: raw ``mu <= 32 eps ||X||_F``. A raw
curve read from rows that carry mu_rel counts a sample at the floor when its mu_rel is (or its raw mu
underflowed to 0); ``underflow_share`` keeps the underflows apart (they are drawn differently).

**Underflow to 0, one treatment**: an exact 0 is below the floor, wherever it comes from. Raw mu rounded
to 0 sits at the floor (counted at :meth:`Curve.clamp`); a sample whose whole X rounded to 0 (``zero``:
``||X||_F = 0``, so mu_rel = 0/0 is stored as NaN) has raw ``mu = 0 <= 32 eps ||X||_F = 0``: its mu_rel
is read as at the floor too (0, counted at the floor), never as a non-finite value (Theorem 1's SAN whose
raw mu underflows and Fig. 6's SAN whose float32 ||X||_F rounds to 0 read the same). A 0/0 needs raw
``mu = 0``: a NaN mu_rel beside a non-finite raw mu is an overflow (``inf / inf``: SmolLM2's SAN, whose
token norm grows x19 per layer), not an underflow, and stays non-finite (:func:`curve_rows` and
:meth:`Curve.from_rows` check ``zero`` against raw mu).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
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
_TESTS: ContextVar[int] = ContextVar("rankcollapse_tests", default=1)
#: The units of sampling (see the module docstring); a per-run check (a theorem's bound on each run)
#: counts runs.
SAMPLE, NETWORK, RUN = "samples", "networks", "runs"


@functools.lru_cache(maxsize=4096)
def _quantile(n: int | None, looks: int) -> float:
    from scipy import stats

    p = 1.0 - ALPHA / (2 * looks)
    if n is None:
        return float(stats.norm.ppf(p))
    if n < 2:
        return math.inf
    return float(stats.t.ppf(p, n - 1))


def z(n: int | None = None, tests: int | None = None) -> float:
    """The critical value of an interval over ``n`` samples: the Student t quantile
    ``t(1 - ALPHA / (2 K m), n - 1)`` (the normal one for ``n=None``; inf below 2 samples), with ``K``
    the number of looks at growing samples (1, or what :func:`looks` set: Bonferroni over the looks
    of ``reproduce --until-decided``) and ``m`` the conditions of the row (``tests``, else what
    :func:`conditions` set). ``z(None) = 2`` for one look and one condition; ``z(4) = 3.31``,
    ``z(64) = 2.03``."""
    m = _TESTS.get() if tests is None else max(int(tests), 1)
    return _quantile(None if n is None else int(n), _LOOKS.get() * m)


def current_tests() -> int:
    """The number of conditions the interval being built shares its row with (:func:`conditions`)."""
    return _TESTS.get()


@contextmanager
def conditions(m: int) -> Iterator[int]:
    """Judge ``m`` conditions of one row inside the ``with`` block: every interval built there uses level
    ``ALPHA / (K m)`` (Bonferroni over the row's conditions), so the chance that a row reading "any
    condition fails -> not reproduced" is decided wrongly stays at most ``ALPHA``. Nested blocks
    multiply (conditions per dtype, each with conditions per mask)."""
    token = _TESTS.set(_TESTS.get() * max(int(m), 1))
    try:
        yield m
    finally:
        _TESTS.reset(token)


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


def n_words(n: int | None, unit: str = SAMPLE) -> str:
    """The sample size in its unit: ``4 samples``, ``2 networks`` where the network is the unit, ``12 runs``
    (never ``n``: n counts tokens, ``core.names``)."""
    return f"{n} {unit}"


@dataclass(frozen=True)
class Rate:
    """A mean per-layer log rate with its standard error, over ``n`` units (samples or networks);
    ``tests``: the conditions of the row it belongs to (:func:`conditions`, captured when built).
    ``start``, ``end``: the layers it spans (``end`` cut before the floor, :meth:`Curve.rate`; -1 where not
    said); ``floor_t``: the first layer at the floor where the floor cut the window asked for (None: the
    whole window lies above it)."""

    mean: float
    se: float
    n: int
    unit: str = SAMPLE
    tests: int = field(default_factory=current_tests)
    start: int = -1
    end: int = -1
    floor_t: int | None = None

    @property
    def measured(self) -> bool:
        """False where the curve reached the floor with fewer than 2 layers of the window above it."""
        return not (self.floor_t is not None and self.end <= self.start)

    @property
    def cut(self) -> bool:
        """True where the floor cut the window asked for (the rate spans the layers above it only)."""
        return self.floor_t is not None

    @property
    def half(self) -> float:
        """Half the interval: ``z(n, tests) se`` (inf below 2 units)."""
        crit = z(self.n, self.tests)
        return crit * self.se if math.isfinite(crit) else math.inf

    @property
    def lo(self) -> float:
        return self.mean - self.half

    @property
    def hi(self) -> float:
        return self.mean + self.half

    @property
    def factor(self) -> float:
        """``exp(mean)``: the mean per-layer factor (0.3 = falls to 30% per layer)."""
        return math.exp(self.mean) if math.isfinite(self.mean) else math.nan

    def floor_words(self) -> str:
        """``at the floor from t=2, fewer than 2 layers above it: no rate`` (a rate not measured), ``t=0..5,
        before the floor at t=6`` (a window the floor cut), else ``""``."""
        if not self.measured:
            return f"at the floor from t={self.floor_t}, fewer than 2 layers above it: no rate"
        if self.cut:
            return f"t={self.start}..{self.end}, before the floor at t={self.floor_t}"
        return ""

    def text(self) -> str:
        """``x0.31/layer (log rate -1.2 ± 0.05, 4 samples)`` (± = ``z(n)`` standard errors over the n
        units; ``2 networks`` where the network is the unit; ``; t=0..5, before the floor at t=6`` where the
        floor cut the window; ``no rate (at the floor from t=1, ...)`` where it left no rate to measure)."""
        if not self.measured:
            return f"no rate ({self.floor_words()})"
        units = n_words(self.n, self.unit)
        cut = f"; {self.floor_words()}" if self.cut else ""
        return f"x{self.factor:.3g}/layer (log rate {self.mean:.3g} ± {self.half:.2g}, {units}{cut})"


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
    #: The unit of sampling (``SAMPLE`` or ``NETWORK``, module docstring) and, per network, its mean log
    #: drop [G, L+1] (NaN where the network's samples turned non-finite).
    unit: str = SAMPLE
    net_drop: np.ndarray | None = None
    #: Raw mu only: share of samples whose raw mu rounded to exactly 0 (inside ``floor_share``).
    underflow_share: np.ndarray | None = None
    #: Mean ||X||_F per layer where the rows carry it (the raw floor line is ``32 eps`` times it).
    x_norm: np.ndarray | None = None

    @property
    def networks(self) -> int | None:
        """The number of independent weight draws behind the curve (None where the unit is the sample)."""
        if self.unit != NETWORK:
            return None
        return 1 if self.net_drop is None else int(self.net_drop.shape[0])

    @property
    def units(self) -> int:
        """``n`` in the unit of sampling: networks where the network is the unit, else samples."""
        g = self.networks
        return self.n if g is None else g

    def as_networks(self) -> Curve:
        """This curve (one run: one weight draw) with the network as its unit of sampling."""
        if self.unit == NETWORK:
            return self
        return replace(self, unit=NETWORK, net_drop=self.drop[None, :].copy())

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
        underflowed): its NaN mu_rel (0/0) is read as 0, at the floor (module docstring), never as a
        non-finite value."""
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 2 or v.shape[0] < 1 or v.shape[1] < 1:
            raise ValueError(f"values must be [samples, layers] with both >= 1, got shape {v.shape}")
        if zero is not None:
            v = np.where(np.asarray(zero, dtype=bool) & np.isnan(v), 0.0, v)
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
        """The curve stored in ``rows`` (one per layer, columns of :meth:`columns` and ``finite``).

        Raw ``mu`` read from rows that also carry ``mu_rel``: a sample sits at the floor when its mu_rel
        does (raw ``mu <= 32 eps ||X||_F``) or its raw mu underflowed (module docstring). ``mu_rel`` read
        from rows with ``zero_share``: the samples whose X rounded to 0 (stored as non-finite 0/0) are
        finite and at the floor (module docstring: one treatment of an underflow)."""
        rows = rows.sort_values("layer")
        q = quantity
        get = [np.asarray(rows[f"{q}{s}"], dtype=np.float64) for s in _SUFFIXES]
        zero = np.asarray(rows["zero_share"], dtype=np.float64) if "zero_share" in rows else None
        if zero is not None and "mu_floor_share" in rows:  # a 0/0 needs raw mu = 0 (module docstring)
            zero = np.fmin(zero, np.asarray(rows["mu_floor_share"], dtype=np.float64))
        finite = _finite_column(rows, q)
        underflow = None
        if q == "mu" and "mu_rel_floor_share" in rows:
            underflow = get[6]  # a sample whose X rounded to 0 is in it (raw mu = 0)
            get[6] = np.fmax(underflow, np.asarray(rows["mu_rel_floor_share"], dtype=np.float64))
        if q == "mu_rel" and zero is not None:  # stored 0/0 -> at the floor (counted as finite there)
            z0 = np.nan_to_num(zero)
            finite = np.fmin(finite + z0, 1.0)
            get[6] = np.fmin(np.nan_to_num(get[6]) + z0, 1.0)
        x_norm = np.asarray(rows["x_norm"], dtype=np.float64) if "x_norm" in rows else None
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
            finite,
            get[6],
            zero,
            underflow_share=underflow,
            x_norm=x_norm,
        )

    @classmethod
    def pool(cls, curves: list[Curve], unit: str = SAMPLE) -> Curve:
        """One curve of all samples of several (e.g. one per weight seed): exact pooled mean and std.

        ``unit = NETWORK``: each curve is one network (one weight draw); the pooled curve keeps each
        one's mean log drop, and its rates are judged over networks (module docstring)."""
        if not curves:
            raise ValueError("pool needs at least one curve")
        if unit == NETWORK:
            nets = [c.as_networks() for c in curves]
            net_drop = np.concatenate([c.net_drop for c in nets if c.net_drop is not None], axis=0)
            pooled = cls.pool([replace(c, unit=SAMPLE, net_drop=None) for c in nets])
            return replace(pooled, unit=NETWORK, net_drop=net_drop)
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
            underflow_share=None
            if any(c.underflow_share is None for c in curves)
            else (n * np.stack([c.underflow_share for c in curves])).sum(0) / n.sum(),
            x_norm=None
            if any(c.x_norm is None for c in curves)
            else (n * np.stack([c.x_norm for c in curves])).sum(0) / n.sum(),
        )

    def n_at(self, t: int) -> int:
        """Samples still finite at layer t."""
        return round(float(self.finite[t]) * self.n)

    def above_floor(self) -> int:
        """The last layer ``t`` with no sample at the floor at any layer ``0..t`` (``L`` where none ever is,
        -1 where one is at t = 0): the layers a rate may read (module docstring)."""
        hit = np.nonzero(self.floor_share > 0)[0]
        return self.layers if hit.size == 0 else int(hit[0]) - 1

    def rate(self, start: int, end: int) -> Rate:
        """Mean per-layer log rate from layer ``start`` to ``end``, measured before the floor: ``end`` cut to
        :meth:`above_floor` (not measured where fewer than 2 layers remain; module docstring); where the
        network is the unit: the mean of the networks' rates, with the standard error of that mean."""
        if not 0 <= start < end <= self.layers:
            raise ValueError(f"need 0 <= start < end <= {self.layers}, got {start}, {end}")
        top = self.above_floor()
        floor_t = top + 1 if top < end else None
        end = min(end, top)
        span = {"start": start, "end": end, "floor_t": floor_t}
        if end <= start:  # the floor leaves fewer than 2 layers of the window: no rate
            return Rate(math.nan, math.nan, self.units, self.unit, **span)
        if self.unit == NETWORK:
            nets = self.net_drop if self.net_drop is not None else self.drop[None, :]
            per = (nets[:, end] - nets[:, start]) / (end - start)
            per = per[np.isfinite(per)]
            g = int(per.size)
            if g == 0:
                return Rate(math.nan, math.nan, 0, NETWORK, **span)
            se = float(sample_std(per)) / math.sqrt(g) if g >= 2 else math.nan
            return Rate(float(per.mean()), se, g, NETWORK, **span)
        n = self.n_at(end)
        if n == 0:
            return Rate(math.nan, math.nan, 0, **span)
        sd = float(self.drop_std[end]) + (float(self.drop_std[start]) if start > 0 else 0.0)
        mean = (float(self.drop[end]) - float(self.drop[start])) / (end - start)
        return Rate(mean, sd / math.sqrt(n) / (end - start), n, **span)

    def first_nonfinite(self) -> int | None:
        """First layer where some sample is not finite (None: all finite throughout)."""
        bad = np.nonzero(self.finite < 1.0)[0]
        return int(bad[0]) if bad.size else None

    def nonfinite_cause(self) -> str:
        """``"non-finite (overflow)"``: what stops a curve being a number (an X that underflowed to 0 does
        not: its mu_rel = 0/0 is read at the floor, module docstring)."""
        return "non-finite (overflow)"

    def first_at_floor(self, share: float = 0.5) -> int | None:
        """First layer where at least ``share`` of the samples sit at the floor (mu_rel: the precision
        floor; raw mu: the same floor, or an underflow to 0)."""
        hit = np.nonzero(self.floor_share >= share)[0]
        return int(hit[0]) if hit.size else None

    def first_zero(self) -> int | None:
        """The first layer where some sample's whole X rounded to 0 (``||X||_F = 0``; None: never, or not
        recorded)."""
        if self.zero_share is None:
            return None
        hit = np.nonzero(np.nan_to_num(self.zero_share) > 0)[0]
        return int(hit[0]) if hit.size else None

    def first_underflow(self) -> int | None:
        """Raw mu: the first layer where some sample rounded to exactly 0 (None: never, or not raw mu)."""
        if self.quantity != "mu":
            return None
        share = self.underflow_share if self.underflow_share is not None else self.floor_share
        hit = np.nonzero(share > 0)[0]
        return int(hit[0]) if hit.size else None

    def floor_line(self) -> np.ndarray | None:
        """The precision floor per layer in this curve's units: ``32 eps`` for mu_rel, ``32 eps ||X||_F``
        (the mean token-matrix norm) for raw mu where the rows carry ``x_norm``; None otherwise."""
        if self.quantity == "mu_rel":
            return np.full(self.layers + 1, floor_rel(self.dtype))
        if self.quantity == "mu" and self.x_norm is not None:
            return floor_rel(self.dtype) * self.x_norm
        return None


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


def curve_rows(
    values: dict[str, Any], dtype: str, zero: Any = None, x_norm: Any = None
) -> list[dict[str, Any]]:
    """Per-layer rows of several quantities: ``values[q]`` is [b, L+1]; ``layer`` and ``finite`` first.

    ``zero`` [b, L+1]: where ||X||_F is 0 in the dtype (gives the ``zero_share`` column; only where raw mu,
    when given, is 0 too: a NaN mu_rel beside a non-finite mu is an overflow, module docstring); ``x_norm``
    [b, L+1]: ||X||_F per sample (its mean over the finite samples gives the ``x_norm`` column, from which
    figures draw raw mu's precision floor)."""
    curves = {q: Curve.from_samples(v, q, dtype) for q, v in values.items()}
    first = next(iter(curves.values()))
    finite = np.min([c.finite for c in curves.values()], axis=0)
    if zero is not None and "mu" in values:
        zero = np.asarray(zero, dtype=bool) & (np.asarray(values["mu"], dtype=np.float64) == 0)
    zshare = None if zero is None else np.asarray(zero, dtype=bool).mean(axis=0)
    norms = None if x_norm is None else _nan_stat(np.nanmean, np.where(np.isfinite(x_norm), x_norm, np.nan))
    rows = []
    for t in range(first.layers + 1):
        row: dict[str, Any] = {"layer": t, "samples": first.n, "finite": float(finite[t])}
        if zshare is not None:
            row["zero_share"] = float(zshare[t])
        if norms is not None:
            row["x_norm"] = float(norms[t])
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
