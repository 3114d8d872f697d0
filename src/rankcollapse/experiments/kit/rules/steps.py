"""Curves over training steps (not layers): per-network series, and the rules that judge them.

A training run (``rankcollapse.monitor.trajectory``) is one network: its weights and batches are one
random draw. Its telemetry rows (``kind = trajectory``: ``step, layer, metric, value``) give, per
metric and layer, one value per probe step; :func:`series` gathers them as ``[networks, steps]``.
Every statement is about networks, so every interval here is over the networks of a condition
(Student t, ``kit.curves.z``, Bonferroni over a row's conditions by ``kit.curves.conditions``), and
fewer than 2 networks give no interval (inconclusive, ``causes.too_few``).

Statistics per network (ours):

- the **log ratio** ``log(v(T) / v(0))`` of a positive metric between the last probe and the
  initialisation (:func:`log_ratio`);
- the **onset** of a quantity: the first probe step at which it reaches a level (NaN: never);
- the **phases** of a positive metric ``r``: ``collapse = log(r(t_min) / r(0))`` with ``t_min`` the
  probe of least ``r`` among those up to ``early`` steps; ``expand = log(r(t_peak) / r(t_min))`` with
  ``t_peak`` the probe of largest ``r`` after ``t_min``; ``compress = log(r(T) / r(t_peak))``
  (:func:`phase_ratios`).

Rules: :func:`moved_from_init` (``move_min``), :func:`onset_found` (``onset_level``; the onset step is a
finding, never compared with another model's step count), :func:`phases` (``phase_min``); thresholds from
the story's YAML, none in code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Verdict,
    combine_verdicts,
)
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts
from rankcollapse.experiments.kit.curves import NETWORK, conditions, sample_std
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The rows of a training run's telemetry.
KIND = "trajectory"


@dataclass(frozen=True)
class Series:
    """One metric of one layer over training: ``steps`` [T] and ``values`` [G, T] (one row per
    network, in ``runs`` order; NaN where a probe was skipped)."""

    steps: np.ndarray
    values: np.ndarray
    runs: tuple[str, ...]

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    @property
    def last_step(self) -> int:
        return int(self.steps[-1]) if self.steps.size else 0

    def mean_interval(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, lo, hi) per step over the networks: ``mean ± z(G) se`` (one condition; NaN with one)."""
        from rankcollapse.experiments.kit.curves import z

        mean = np.nanmean(self.values, axis=0)
        if self.n < 2:
            return mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan)
        half = z(self.n, 1) * sample_std(self.values) / math.sqrt(self.n)
        return mean, mean - half, mean + half


def series(frame: pd.DataFrame, metric: str, layer: int | None = None) -> Series:
    """The :class:`Series` of ``metric`` at ``layer`` (None: the mean over layers >= 1, e.g. a
    model-level sink rate) from ``kind = trajectory`` rows of one condition (one row per run, step)."""
    rows = frame[frame["metric"] == metric]
    rows = rows[rows["layer"] >= 1] if layer is None else rows[rows["layer"] == layer]
    table = rows.pivot_table(index="run_id", columns="step", values="value", aggfunc="mean", sort=True)
    return Series(table.columns.to_numpy(dtype=float), table.to_numpy(dtype=float), tuple(table.index))


def log_ratio(s: Series) -> np.ndarray:
    """Per network ``log(v(T) / v(0))`` [G] (NaN where either is not positive and finite)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(s.values[:, -1] / s.values[:, 0])
    return np.where(np.isfinite(r), r, np.nan)


def onsets(s: Series, level: float) -> np.ndarray:
    """Per network the first probe step with value ``>= level`` [G] (NaN: never)."""
    out = np.full(s.n, np.nan)
    for g in range(s.n):
        hit = np.flatnonzero(s.values[g] >= level)
        if hit.size:
            out[g] = s.steps[hit[0]]
    return out


def phase_ratios(s: Series, early: float) -> dict[str, np.ndarray]:
    """Per network ``collapse``, ``expand``, ``compress`` log ratios [G] (module docstring);
    ``t_min`` and ``t_peak`` (steps) and ``start`` (``r(0)``) beside them. ``early``: the last step where
    ``t_min`` may lie."""
    keys = ("collapse", "expand", "compress", "t_min", "t_peak", "start")
    out = {k: np.full(s.n, np.nan) for k in keys}
    window = np.flatnonzero(s.steps <= early)
    if window.size < 2:
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        for g in range(s.n):
            v = s.values[g]
            if not (np.isfinite(v).all() and (v > 0).all()):
                continue
            i_min = int(window[np.argmin(v[window])])
            i_peak = i_min + int(np.argmax(v[i_min:]))
            out["collapse"][g] = math.log(v[i_min] / v[0])
            out["expand"][g] = math.log(v[i_peak] / v[i_min])
            out["compress"][g] = math.log(v[-1] / v[i_peak])
            out["t_min"][g], out["t_peak"][g] = s.steps[i_min], s.steps[i_peak]
            out["start"][g] = v[0]
    return out


def _estimate(values: np.ndarray) -> tuple[float, float, int]:
    """(mean, standard error, n) over the finite networks."""
    v = values[np.isfinite(values)]
    n = int(v.size)
    mean = float(v.mean()) if n else math.nan
    se = float(sample_std(v)) / math.sqrt(n) if n >= 2 else math.nan
    return mean, se, n


def _few(label: str, n: int, words: str) -> Judgement:
    cause = causes.too_few(n, 2, NETWORK, label)
    return Judgement(INCONCLUSIVE, words, cause, "sample too small", n, unit=NETWORK)


def _open(words: str, margins: Sequence[Margin], n: int) -> Judgement:
    """Inconclusive: the margin nearest its threshold is open (the one a larger sample would decide)."""
    m = min(margins, key=lambda x: abs(x.value - x.threshold))
    cause = causes.sample_too_small([m])
    return Judgement(INCONCLUSIVE, words, cause, "sample too small", n, (m,), unit=NETWORK)


def _band(what: str, values: np.ndarray, limit: float) -> tuple[Verdict | None, str, tuple[Margin, ...], int]:
    """Is the mean of ``values`` outside ``[-limit, limit]`` for sure (REPRODUCED), inside for sure
    (NOT_REPRODUCED) or neither (None); its words and its two margins (at ``-limit`` and ``+limit``)."""
    mean, se, n = _estimate(values)
    up = Margin(what, mean, se, limit, n, NETWORK)
    down = Margin(what, mean, se, -limit, n, NETWORK)
    lo, hi = up.bounds()
    words = f"{what} {mean:+.3g} ± {(hi - lo) / 2:.2g} (x{math.exp(mean):.3g}; n = {n} networks)"
    if n < 2:
        return INCONCLUSIVE, words, (), n
    if lo > limit or hi < -limit:
        return REPRODUCED, words, ((up if mean > 0 else down),), n
    if lo > -limit and hi < limit:
        return NOT_REPRODUCED, words, (up, down), n
    return None, words, (up, down), n


def moved_from_init(per_network: Mapping[str, np.ndarray], th: Thresholds) -> Judgement:
    """Training moves a metric away from its value at initialisation: per condition (label) the mean
    over networks of ``log(v(T) / v(0))`` lies outside ``[-move_min, move_min]`` for sure
    (reproduced); inside it for sure (not reproduced: it stayed); else inconclusive, with the n that
    would decide it. Bonferroni over the conditions."""
    limit = th["move_min"]
    parts = []
    with conditions(len(per_network)):
        for label, values in per_network.items():
            verdict, words, margins, n = _band("log(v(T) / v(0))", values, limit)
            if n < 2:
                parts.append((label, _few(label, n, words)))
            elif verdict is None:
                parts.append((label, _open(words, margins, n)))
            elif verdict is NOT_REPRODUCED:
                stays = f"{label}: stays within x{math.exp(limit):.3g} of its initial value"
                why = causes.measured_otherwise(stays)
                kind = "measured otherwise"
                parts.append((label, Judgement(verdict, words, why, kind, n, margins, unit=NETWORK)))
            else:
                parts.append((label, Judgement(verdict, words, n=n, margins=margins, unit=NETWORK)))
    return combine_parts(parts)


def onset_found(per_network: Mapping[str, Series], th: Thresholds, scope: str = "") -> Judgement:
    """Something appears during the run, and when (a finding, compared with no other model's step count):
    per condition (label: a :class:`Series`), every network reaches ``onset_level`` (:func:`onsets`) ->
    reproduced, its mean onset step over networks with its interval in the words and the margins; no
    network by its last step -> not reproduced (nothing appeared in the steps run, said with them); some
    networks only -> inconclusive (no mean onset step, the count said: not testable); at the level already at
    step 0 -> not testable (nothing to emerge); fewer than 2 networks -> too few. ``scope``: where it was
    tested. Bonferroni over the conditions."""
    level = th["onset_level"]
    parts = []
    with conditions(len(per_network)):
        for label, s in per_network.items():
            values, last, n = onsets(s, level), s.last_step, s.n
            never, at_init = int(np.isnan(values).sum()), int((s.values[:, 0] >= level).sum())
            if n < 2:
                parts.append((label, _few(label, n, f"{n} network(s)")))
                continue
            if at_init:
                words = f"{at_init} of {n} networks at {level:g} or more at step 0"
                why = causes.not_testable(f"{label}: {words}: nothing to emerge")
                parts.append((label, Judgement(INCONCLUSIVE, words, why, "not testable", n, unit=NETWORK)))
                continue
            if never == n:
                words = f"no onset by step {last} in any of {n} networks"
                why = causes.measured_otherwise(f"{label}: {words}")
                part = Judgement(NOT_REPRODUCED, words, why, "measured otherwise", n, unit=NETWORK)
                parts.append((label, part))
                continue
            if never:
                words = f"onset in {n - never} of {n} networks (none by step {last} in the others)"
                why = causes.not_testable(f"{label}: {words}: no mean onset step")
                parts.append((label, Judgement(INCONCLUSIVE, words, why, "not testable", n, unit=NETWORK)))
                continue
            mean, se, _ = _estimate(values)
            first = Margin("mean onset step", mean, se, 0.0, n, NETWORK)
            lo, hi = first.bounds()
            words = (
                f"onset in every network: mean onset step {mean:.4g} ({lo:.4g}-{hi:.4g}; networks: "
                f"{', '.join(f'{v:g}' for v in values)}) of {last} steps"
            )
            parts.append((label, Judgement(REPRODUCED, words, n=n, unit=NETWORK)))
    return replace(combine_parts(parts), scope=scope)


def phases(
    per_network: Mapping[str, Mapping[str, np.ndarray]], th: Thresholds, span: str, least: float | None = None
) -> Judgement:
    """An early collapse, then an expansion, then a compression: per condition (label: the arrays of
    :func:`phase_ratios`) the mean ``collapse`` below ``-phase_min`` for sure, ``expand`` above
    ``phase_min`` for sure and ``compress`` below ``-phase_min`` for sure (reproduced). No early
    collapse or no expansion for sure (the mean inside ``[-phase_min, phase_min]``, or of the other
    sign) is not reproduced: the warm-up, where it is reported, lies inside every run. An expansion or
    a compression not seen is never read as refuted: they are reported over long pretraining runs, so a
    short run leaves them open (not testable; ``span`` says the run's length). ``least``: the least value
    ``r`` can take (1 for an effective rank): a network that starts at ``r(0) <= least x exp(phase_min)``
    cannot fall by more than ``phase_min``, so a condition with one such network is not testable
    (nothing to collapse), as a sink present at step 0 is for :func:`onset_found`. Bonferroni over
    the conditions and the three phases."""
    limit = th["phase_min"]
    parts: list[tuple[str, Judgement]] = []
    with conditions(3 * len(per_network)):
        for label, r in per_network.items():
            bits, margins, verdicts, n = [], [], [], 0
            causes_: list[tuple[str, str]] = []
            for phase, sign in (("collapse", -1), ("expand", 1), ("compress", -1)):
                mean, se, n = _estimate(r[phase])
                m = Margin(f"{phase} log ratio", mean, se, sign * limit, n, NETWORK)
                lo, hi = m.bounds()
                bits.append(f"{phase} {mean:+.3g} ± {(hi - lo) / 2:.2g}")
                if n < 2:
                    verdicts.append(INCONCLUSIVE)
                    causes_.append(("sample too small", causes.too_few(n, 2, NETWORK, label)))
                    continue
                margins.append(m)
                seen = hi < -limit if sign < 0 else lo > limit
                absent = lo > -limit if sign < 0 else hi < limit
                if seen:
                    verdicts.append(REPRODUCED)
                elif phase != "collapse":
                    verdicts.append(INCONCLUSIVE)
                    causes_.append(("not testable", causes.not_testable(
                        f"{label}: no {phase} for sure ({span}); it is reported over long pretraining "
                        "runs, which a run this short cannot show absent")))
                elif absent:
                    verdicts.append(NOT_REPRODUCED)
                    no = causes.measured_otherwise(f"{label}: no {phase}")
                    causes_.insert(0, ("measured otherwise", no))
                else:
                    verdicts.append(INCONCLUSIVE)
                    causes_.append(("sample too small", causes.sample_too_small([m])))
            words = "; ".join(bits) + f" (n = {n} networks)"
            start = np.asarray(r.get("start", ()), dtype=float)
            low = 0 if least is None else int((start <= least * math.exp(limit)).sum())
            if low:
                within = f"{low} of {start.size} networks start within x{math.exp(limit):.3g} of {least:g}"
                why = causes.not_testable(f"{label}: {within}, the least value: nothing to collapse")
                parts.append((label, Judgement(INCONCLUSIVE, f"{words}; {within}", why, "not testable", n,
                                               tuple(margins), unit=NETWORK)))
                continue
            v = combine_verdicts(verdicts)
            if v is REPRODUCED:
                parts.append((label, Judgement(v, words, n=n, margins=tuple(margins), unit=NETWORK)))
            else:
                kind, sentence = causes_[0]
                parts.append((label, Judgement(v, words, sentence, kind, n, tuple(margins), unit=NETWORK)))
    return combine_parts(parts)


__all__ = [
    "KIND",
    "Series",
    "log_ratio",
    "moved_from_init",
    "onset_found",
    "onsets",
    "phase_ratios",
    "phases",
    "series",
]
