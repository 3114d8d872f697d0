"""Rules on per-head values split by a head property: one kind of head set apart from the others.

The data of one network (a pretrained model; a random init's weight draw) is a :class:`HeadValues`: per sample
(an excerpt) and head (every (layer, head) pair of the network), the measure that splits the heads (``by``,
e.g. ``first_token_attention``) and the statistic judged (``value``). A head is *in the group* when its
``by``, averaged over the network's samples, lies above the threshold the rule is told (``split``: the sink
heads, ``first_token_attention`` above ``sink_threshold``). Per sample the rule takes the mean of ``value``
over the group's heads (``inside``) and over the others (``outside``); the unit of sampling is the sample
where one pretrained network is judged, the network where the weights are a random draw (each network's
means over its samples; a network without both kinds of head is left out, and said).

- :func:`set_apart`: the group's statistic beyond 0 in the stated direction (``above``, or ``below``), and
  beyond the other heads' (the paired difference ``inside - outside`` per unit): both for sure -> reproduced;
  either on the other side for sure -> not reproduced; otherwise open (Bonferroni over the two comparisons;
  fewer than ``min_samples`` samples, or 2 networks: sample too small; no head in the group, or none
  outside it: not testable).

Pinned on planted data in ``tests/experiments/test_key_bias_story.py``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts, sample_part
from rankcollapse.experiments.kit.curves import NETWORK, SAMPLE, conditions, n_words, sample_std
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.thresholds import Thresholds


@dataclass(frozen=True)
class HeadValues:
    """One network's per-head values: ``by`` and ``value`` [s, k] over its s samples and k heads (each
    (layer, head) pair one head), the same heads in the same order in both."""

    by: np.ndarray
    value: np.ndarray

    def __post_init__(self) -> None:
        by, value = np.asarray(self.by, dtype=float), np.asarray(self.value, dtype=float)
        if by.ndim != 2 or by.shape != value.shape:
            raise ValueError(f"by and value must be [samples, heads] of one shape, got {by.shape}, "
                             f"{value.shape}")
        object.__setattr__(self, "by", by)
        object.__setattr__(self, "value", value)

    def group(self, threshold: float) -> np.ndarray:
        """bool [k]: the heads whose ``by``, averaged over the samples, lies above ``threshold``."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a head NaN in every sample is in no group
            return np.nanmean(self.by, axis=0) > threshold

    def split(self, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """``(inside, outside)`` [s]: per sample the mean of ``value`` over the group's heads and over the
        others (NaN where a side has no finite value)."""
        inside = self.group(threshold)

        def mean(heads: np.ndarray) -> np.ndarray:
            if not heads.any():
                return np.full(len(self.value), np.nan)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a sample NaN in every head of a side
                return np.nanmean(self.value[:, heads], axis=1)

        return mean(inside), mean(~inside)


@dataclass(frozen=True)
class Split:
    """Per unit (a sample of one pretrained network, or a network) the group's mean (``inside``) and the
    paired difference from the other heads' (``gap = inside - outside``), over the units where both kinds of
    head have a value; ``heads_in`` of ``heads`` heads in the group (summed over the networks),
    ``left_out`` networks without both kinds of head, and the unit."""

    inside: np.ndarray
    gap: np.ndarray
    heads_in: int
    heads: int
    left_out: int
    unit: str

    @property
    def outside(self) -> np.ndarray:
        return self.inside - self.gap

    @property
    def n(self) -> int:
        return int(self.inside.size)


def split_units(networks: Sequence[HeadValues], unit: str, threshold: float) -> Split:
    """The :class:`Split` of ``networks`` at ``threshold`` (module docstring): the units are the samples of
    the networks (``unit`` samples: one pretrained network) or the networks (each its means over its
    samples)."""
    inside, gap, left_out = [], [], 0
    for v in networks:
        a, b = v.split(threshold)
        keep = np.isfinite(a) & np.isfinite(b)
        if not keep.any():
            left_out += 1
            continue
        if unit == SAMPLE:
            inside.append(a[keep])
            gap.append((a - b)[keep])
        else:
            inside.append(np.array([a[keep].mean()]))
            gap.append(np.array([(a - b)[keep].mean()]))
    groups = [v.group(threshold) for v in networks]
    empty = np.zeros(0)
    return Split(np.concatenate(inside) if inside else empty, np.concatenate(gap) if gap else empty,
                 int(sum(g.sum() for g in groups)), int(sum(g.size for g in groups)), left_out, unit)


def unit_margin(values: np.ndarray, what: str, unit: str, tests: int | None = None) -> Margin:
    """``mean ± z se`` of ``values`` (one per unit) against 0 (``tests``: the row's conditions, default the
    current :func:`~rankcollapse.experiments.kit.curves.conditions`)."""
    n = int(values.size)
    se = float(sample_std(values) / math.sqrt(n)) if n >= 2 else math.nan
    mean = float(values.mean()) if n else math.nan
    if tests is None:
        return Margin(what, mean, se, 0.0, n, unit)
    return Margin(what, mean, se, 0.0, n, unit, tests=tests)


def _beyond(m: Margin, below: bool, words: str) -> Judgement:
    """A part: ``m``'s value beyond its threshold in the stated direction for sure (reproduced), on the other
    side for sure (not reproduced), else open."""
    lo, hi = m.bounds()
    ahead, behind = (hi < m.threshold, lo > m.threshold) if below else (lo > m.threshold, hi < m.threshold)
    v = REPRODUCED if ahead else NOT_REPRODUCED if behind else INCONCLUSIVE
    return sample_part(v, words, [m], m.n, m.unit)


#: The comparisons of :func:`set_apart`: the group against 0, the paired difference against 0.
COMPARISONS = 2


def set_apart(networks: Sequence[HeadValues], unit: str, th: Thresholds, *, what: str, group: str,
              split: str, below: bool = False) -> Judgement:
    """The group's ``value`` beyond 0 and beyond the other heads' (module docstring). ``networks``: one
    :class:`HeadValues` per network (one, of a pretrained model, with ``unit`` samples); ``what`` names the
    statistic, ``group`` the heads in the group (``sink heads``), ``split`` the threshold of ``th`` that
    makes it; ``below``: the stated direction is below 0 (and below the others)."""
    threshold = th[split]
    side = "below" if below else "above"
    sp = split_units(networks, unit, threshold)
    head_words = (f"{sp.heads_in} of {sp.heads} heads are {group} ({split} = {threshold:g})"
                  + (f" over {len(networks)} networks" if unit == NETWORK else ""))
    if not sp.n:
        why = (f"{head_words}: no {group}" if sp.heads_in == 0 else
               f"{head_words}: every head is one of them" if sp.heads_in == sp.heads else
               f"{head_words}: no network has both kinds of head")
        return Judgement(INCONCLUSIVE, why, causes.not_testable(why), "not testable")
    need = th.count("min_samples") if unit == SAMPLE else 2
    words = (f"{head_words}; {what}: {sp.inside.mean():+.3g} in them, {sp.outside.mean():+.3g} in the others "
             f"(paired difference {sp.gap.mean():+.3g}), {n_words(sp.n, unit)}"
             + (f" ({sp.left_out} network(s) without both kinds of head left out)" if sp.left_out else ""))
    if sp.n < need:
        return Judgement(INCONCLUSIVE, words, causes.too_few(sp.n, need, unit), "sample too small", sp.n,
                         unit=unit)
    with conditions(COMPARISONS):
        a = unit_margin(sp.inside, f"{what}, {group}", unit)
        b = unit_margin(sp.gap, f"{what}, {group} minus the others", unit)
        parts = [
            (f"{group} {side} 0", _beyond(a, below, f"{what} {sp.inside.mean():+.3g} in the {group}")),
            (f"{group} {side} the others", _beyond(b, below, f"difference {sp.gap.mean():+.3g}")),
        ]
    return combine_parts(parts).amended(before=f"{words} || ")
