"""From an arm's run tables to curves and per-layer arrays (every story reads its data through these).

- :func:`rows_of`: the rows of one ``kind`` (``curve``, ``geometry``, ``sv``, ``cos_hist``, ``phi0``)
  of the finished runs;
- :func:`curves_by`: ``kind = curve`` rows as :class:`~rankcollapse.experiments.kit.curves.Curve`
  objects, pooled over runs (weight seeds);
- :func:`model_groups`: one group per model, random init first; :func:`pooled_layer`: per-layer
  mean and sample std over all samples of all runs;
- :func:`layered`: one column per layer as an estimate with its standard error, in the unit of
  sampling (networks where the weights are a random draw, samples where they are pretrained);
- :func:`sample_note`: the samples, seeds and uncertainty behind a verdict, in words;
- :func:`head_arrays`: per-head rows as one ``[samples, heads]`` array per network;
- :func:`norm_rates`: the per-layer change of the token norm, raw μ's rate minus μ_rel's;
- :func:`model_depth`, :func:`depth_words`: a model's own depth and the run's (``30 layers cycled to 128``);
- the words for modes (block assemblies) and masks, as the paper names them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Data, StoryData
from rankcollapse.experiments.kit.curves import NETWORK, SAMPLE, Curve, looks_note, sample_std, z
from rankcollapse.experiments.kit.judgement import Margin

#: Words for the modes (block assemblies: ``core.names`` ``mode``), as the paper names them.
MODE_WORDS: dict[str, str] = {
    "attn": "SAN (attention only)",
    "attn+skip": "SAN + skip",
    "attn+ln": "SAN + LayerNorm",
    "attn+skip+ln": "SAN + skip + LayerNorm (post-LN)",
    "full": "full transformer",
    "attn+sphere": "SAN + the theory's LayerNorm (x / ||x||)",
}
#: Words for the paper's four masks.
MASK_WORDS: dict[str, str] = {
    "complete": "complete",
    "causal": "causal",
    "window:w=1": "sliding window (w = 1)",
    "causal-window:w=1": "uni-directional sliding window (w = 1)",
    "own": "the model's own mask",
}
QUANTITY_WORDS: dict[str, str] = {"mu": "raw mu (the paper's quantity)", "mu_rel": "mu_rel with the floor"}


def words(mapping: dict[str, str], key: Any) -> str:
    return mapping.get(str(key), str(key))


def mask_radius(mask: str, n: int) -> float:
    """The graph radius of ``mask`` at ``n`` tokens (Definition 5); ``n`` where there is no center, NaN for
    a model's own mask (not one graph)."""
    from rankcollapse.masks import parse_mask

    if mask == "own":
        return math.nan
    radius = parse_mask(mask).radius(n)
    return float(n if radius is None else radius)


def rows_of(data: Data, kind: str) -> pd.DataFrame:
    """Rows of ``kind`` of the finished runs (empty frame if none)."""
    t = data.table
    if t.empty or "kind" not in t or data.ok.empty:
        return pd.DataFrame()
    t = t[t["run_id"].isin(set(data.ok["run_id"]))]
    return t[t["kind"] == kind]


def unit_of(frame: pd.DataFrame) -> str:
    """The unit of sampling of a model's rows: ``networks`` unless every row is of pretrained weights
    (one fixed network, whose excerpts are the samples). A random init, the simulator's random
    matrices: each run (each weight seed) is one network. A row that does not say (NaN) is not of
    pretrained weights (``astype(bool)`` would read NaN as True)."""
    if "pretrained" in frame and not frame.empty:
        pretrained = frame["pretrained"]
        if pretrained.notna().all() and pretrained.astype(bool).all():
            return SAMPLE
    return NETWORK


def curves_by(frame: pd.DataFrame, quantity: str, keys: Sequence[str]) -> dict[tuple, Curve]:
    """``{key tuple: Curve}`` of ``quantity``, one per group of ``keys`` (+ dtype), pooled over runs (each
    run one network where the unit is the network, :func:`unit_of`)."""
    out: dict[tuple, Curve] = {}
    if frame.empty:
        return out
    unit = unit_of(frame)
    for key, grp in frame.groupby([*keys, "dtype"], sort=False, dropna=False):
        per_run = [
            Curve.from_rows(g, quantity, str(key[-1]), int(g["samples"].iloc[0]))
            for _, g in grp.groupby("run_id", sort=False)
        ]
        out[tuple(key)] = Curve.pool(per_run, unit)
    return out


@dataclass(frozen=True)
class Layered:
    """One column per layer as an estimate: ``mean`` and its standard error ``se`` [L+1] over ``n`` units
    (``unit``: samples, or networks: then the mean and se are over the runs' own means), the sample std
    ``std`` over all samples (descriptive), and ``share``: the column is a proportion of samples (with
    samples as the unit its interval is Wilson's)."""

    column: str
    mean: np.ndarray
    se: np.ndarray
    std: np.ndarray
    n: int
    unit: str
    share: bool = False
    samples: int | None = None  # all samples behind it (the networks' samples together)

    def margin(self, t: int, threshold: float, what: str, scale: float = 1.0) -> Margin:
        """The comparison of layer ``t``'s mean (times ``scale``) with ``threshold`` (a share: Wilson's
        interval over the samples, and over the networks the wider of it and the t interval)."""
        share = self.share and scale == 1.0
        return Margin(
            what,
            float(self.mean[t]) * scale,
            float(self.se[t]) * scale,
            threshold,
            self.n,
            self.unit,
            share=share,
            samples=self.samples,
        )


def layered(frame: pd.DataFrame, column: str, share: bool = False) -> Layered:
    """:class:`Layered` of ``column`` (rows: one per run and layer, each with the run's mean ``column``
    and sample std ``column_std`` over its ``samples``), in the unit of :func:`unit_of`."""
    mean, std, total = pooled_layer(frame, column)
    if unit_of(frame) == SAMPLE:
        with np.errstate(invalid="ignore"):
            se = std / math.sqrt(total) if total > 0 else np.full_like(mean, np.nan)
        if share:  # a proportion's se from the proportion itself (std of 0/1 values)
            se = np.sqrt(np.clip(mean * (1 - mean), 0, None) / max(total, 1))
        return Layered(column, mean, se, std, total, SAMPLE, share, total)
    runs = [
        g.sort_values("layer")[column].to_numpy(dtype=float) for _, g in frame.groupby("run_id", sort=False)
    ]
    depth = min(len(r) for r in runs)
    per = np.stack([r[:depth] for r in runs])  # [G, L+1]: each network's mean
    g = per.shape[0]
    se = sample_std(per) / math.sqrt(g) if g >= 2 else np.full(depth, np.nan)
    return Layered(column, per.mean(axis=0), se, std[:depth], g, NETWORK, share, total)


def by_label(
    curves: dict[tuple, Curve], mode: str, masks: Sequence[str], dtypes: Sequence[str]
) -> dict[str, Curve]:
    """``{"<mask>, <dtype>": Curve}`` of one mode, keys ``(mode, mask, dtype)`` of ``curves``."""
    out: dict[str, Curve] = {}
    for dt in dtypes:
        for m in masks:
            c = curves.get((mode, m, dt))
            if c is not None:
                out[f"{m}, {dt}"] = c
    return out


def sample_note(runs: pd.DataFrame, frame: pd.DataFrame) -> str:
    """``8 samples per condition (2 excerpt seed(s) 0, 1 x 4 excerpts each); ± = 2.36 standard errors
    (Student t, 7 df)``; where the network is the unit (a random init, the simulator's random
    matrices): ``4 networks (weight seeds 0, 1, 2, 3) x 2 excerpts each (8 samples); intervals over
    the networks, ± = 3.18 standard errors (Student t, 3 df)``, before Bonferroni over a row's conditions."""
    if runs.empty:
        return "no runs"
    seeds = sorted({int(s) for s in runs["seed"].dropna()}) if "seed" in runs else []
    if "samples" in frame and not frame.empty and pd.notna(frame["samples"].iloc[0]):
        per_run = int(frame["samples"].iloc[0])
    else:  # rows of one sample each (phi0): count them
        per_run = len(frame) // max(int(frame["run_id"].nunique()), 1) if not frame.empty else 0
    n = per_run * max(len(seeds), 1)
    listed = ", ".join(map(str, seeds))
    if unit_of(frame) == NETWORK:
        g = max(len(seeds), 1)
        return (
            f"{g} networks (weight seeds {listed}) x {per_run} excerpts each ({n} samples); intervals "
            f"over the networks, ± = {z(g, 1):.3g} standard errors (Student t, {g - 1} df{looks_note()}), "
            "before Bonferroni over a row's conditions"
        )
    return (
        f"{n} samples per condition ({len(seeds)} excerpt seed(s) {listed} x {per_run} excerpts each); "
        f"± = {z(n, 1):.3g} standard errors (Student t, {n - 1} df{looks_note()}), before Bonferroni over a "
        "row's conditions"
    )


def model_depth(frame: pd.DataFrame) -> int | None:
    """The model's own depth (``model_layers``, ``core.names``: what a run's ``layers`` cycle past it) of the
    rows' model: the rows' ``model_layers`` column where they carry it, else the model's config read without
    weights (``models.registry.model_config`` of ``model_name``); None where neither says."""
    if frame.empty:
        return None
    if "model_layers" in frame and frame["model_layers"].notna().any():
        return int(frame["model_layers"].dropna().iloc[0])
    if "model_name" not in frame or not isinstance(frame["model_name"].iloc[0], str):
        return None
    return _config_depth(str(frame["model_name"].iloc[0]))


@functools.lru_cache(maxsize=64)
def _config_depth(name: str) -> int | None:
    from rankcollapse.edge.errors import RankCollapseError
    from rankcollapse.models.families import FAMILIES
    from rankcollapse.models.registry import model_config

    try:
        cfg = model_config(name)
    except (RankCollapseError, OSError, ValueError, KeyError):
        return None
    family = FAMILIES.get(str(cfg.get("model_type")))
    keys = (family.depth_key,) if family is not None else ()
    for key in (*keys, "num_hidden_layers", "num_layers", "n_layer"):
        if isinstance(cfg.get(key), int):
            return int(cfg[key])
    return None


def depth_words(frame: pd.DataFrame) -> str:
    """The depth of a model's run: ``30 layers cycled to 128`` where the run cycles the model's own layers
    past its depth (:func:`model_depth`), else ``128 layers``."""
    run = int(frame["layer"].max()) if "layer" in frame and not frame.empty else 0
    own = model_depth(frame)
    if own is not None and 0 < own < run:
        return f"{own} layers cycled to {run}"
    return f"{run} layers"


def norm_rates(mu: dict[str, Curve], rel: dict[str, Curve]) -> str:
    """Per-layer factor of ``||X||_F`` per condition: ``exp(rate of log mu - rate of log mu_rel)`` over the
    layers where both curves stay above their floors (``Curve.rate``, the same layers for both), where both
    stay finite and neither is at its floor ("" when none does)."""
    bits = []
    for label, c_mu in mu.items():
        c_rel = rel.get(label)
        if (
            c_rel is None
            or c_rel.first_at_floor() is not None
            or c_mu.first_nonfinite() is not None
            or c_mu.first_at_floor() is not None
            or c_rel.first_nonfinite() is not None
        ):
            continue
        end = min(c_mu.above_floor(), c_rel.above_floor(), c_mu.layers, c_rel.layers)
        if end < 1:
            continue
        r = c_mu.rate(0, end).mean - c_rel.rate(0, end).mean
        if math.isfinite(r):
            bits.append(f"x{math.exp(r):.3g} ({label})")
    return ", ".join(bits)


def runs_of(data: Data, frame: pd.DataFrame) -> pd.DataFrame:
    """Index rows of the runs behind ``frame``."""
    ok = data.ok
    return ok[ok["run_id"].isin(set(frame["run_id"]))] if not frame.empty else ok.iloc[0:0]


def model_groups(frame: pd.DataFrame) -> list[tuple[str, bool, pd.DataFrame]]:
    """``(model_label, pretrained, rows)`` per model, random-init first."""
    if frame.empty:
        return []
    out = [
        (str(label), bool(g["pretrained"].iloc[0]), g)
        for label, g in frame.groupby("model_label", sort=False)
    ]
    return sorted(out, key=lambda x: (x[1], x[0]))


def arm_models(
    sd: StoryData, arms: Sequence[str], kind: str
) -> Iterator[tuple[str, Data, str, bool, pd.DataFrame]]:
    """``(arm, data, model label, pretrained?, rows)`` for every model of every arm (in ``arms``' order)
    that has finished runs with rows of ``kind``; random-init models first within an arm."""
    for arm in arms:
        data = sd.arm(arm)
        if data is None:
            continue
        for label, pretrained, frame in model_groups(rows_of(data, kind)):
            yield arm, data, label, pretrained, frame


def head_arrays(frame: pd.DataFrame, column: str, by: str) -> tuple[list[tuple[np.ndarray, np.ndarray]], str]:
    """Per network, ``(by [s, k], column [s, k])`` of per-head rows (one per ``run_id``, ``sample``, ``layer``
    and ``head``): its samples (each run's excerpts, in order) by its heads (every (layer, head) pair, in
    order), the same heads in both; and the unit (:func:`unit_of`). One network of every run where the
    weights are pretrained (the seeds draw other excerpts of it), one per run (a weight draw) otherwise."""
    if frame.empty:
        return [], unit_of(frame)
    unit = unit_of(frame)
    groups = [frame] if unit == SAMPLE else [g for _, g in frame.groupby("run_id", sort=False)]
    out = []
    for g in groups:
        table = g.set_index(["run_id", "sample", "layer", "head"])[[by, column]].unstack(["layer", "head"])
        table = table.sort_index(axis=1)
        out.append((table[by].to_numpy(dtype=float), table[column].to_numpy(dtype=float)))
    return out, unit


def ordered_masks(frame: pd.DataFrame, exp: Any) -> list[str]:
    """The masks of ``frame`` in the order of the experiment's config (``masks`` or the ``mask`` axis)."""
    wanted = list(exp.base.get("masks") or (exp.grid or {}).get("mask") or [])
    present = list(dict.fromkeys(frame["mask"]))
    return [m for m in wanted if m in present] + [m for m in present if m not in wanted]


def pooled_layer(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Per layer: mean and sample std over all samples of all runs (each run stores the mean
    ``column`` and the sample std ``column_std`` of its ``samples``), and the total number of samples."""
    means, stds, ns = [], [], []
    for _, g in frame.groupby("run_id", sort=False):
        g = g.sort_values("layer")
        means.append(g[column].to_numpy(dtype=float))
        stds.append(g[f"{column}_std"].to_numpy(dtype=float))
        ns.append(float(g["samples"].iloc[0]))
    depth = min(len(m) for m in means)
    m = np.stack([a[:depth] for a in means])
    sd = np.nan_to_num(np.stack([a[:depth] for a in stds]))
    w = np.asarray(ns)[:, None]
    total = float(w.sum())
    mean = (w * m).sum(0) / total
    ss = (np.maximum(w - 1, 0) * sd**2 + w * (m - mean) ** 2).sum(0)
    std = np.sqrt(ss / (total - 1)) if total > 1 else np.full(depth, np.nan)
    return mean, std, int(total)


def sample_layered(frame: pd.DataFrame, column: str, share: bool = False) -> Layered:
    """:class:`Layered` (one "layer") of a column stored once per sample (rows of one sample each, e.g.
    ``phi0``): over the samples where they are the unit, else over each run's (network's) own mean."""
    v = frame[column].to_numpy(dtype=float)
    if unit_of(frame) == SAMPLE or frame.empty:
        n = int(np.isfinite(v).sum())
        mean = float(np.nanmean(v)) if n else math.nan
        std = float(sample_std(v)) if n >= 2 else math.nan
        se = (
            math.sqrt(max(mean * (1 - mean), 0.0) / n)
            if share and n
            else (std / math.sqrt(n) if n else math.nan)
        )
        return Layered(column, np.array([mean]), np.array([se]), np.array([std]), n, SAMPLE, share, n)
    per = frame.groupby("run_id", sort=False)[column].mean().to_numpy(dtype=float)
    g = int(per.size)
    se = float(sample_std(per)) / math.sqrt(g) if g >= 2 else math.nan
    n = int(np.isfinite(v).sum())
    return Layered(
        column, np.array([per.mean()]), np.array([se]), np.array([float(sample_std(v))]), g, NETWORK, share, n
    )


def window_layered(frame: pd.DataFrame, column: str, first: int, last: int) -> Layered:
    """:class:`Layered` (one entry) of ``column``'s mean over layers ``first..last`` (rows: one per run and
    layer): per run (network) the mean of its per-layer means over the window, then over the unit of
    :func:`unit_of` as :func:`sample_layered` does."""
    window = frame[(frame["layer"] >= first) & (frame["layer"] <= last)]
    return sample_layered(window, column)


def profile_summaries(
    frame: pd.DataFrame, summarise: Callable[[np.ndarray, int], dict[str, float]], keys: Sequence[str] = ()
) -> pd.DataFrame:
    """Per run and kept layer, the columns ``summarise(profile, t)`` gives of that run's influence profile
    (rows ``kind = influence``: ``layer``, ``position``, ``influence``, the batch mean ``P(t)[n-1, j]``) ->
    one row per run and layer with ``run_id``, ``layer``, ``keys``, ``dtype``, ``samples`` = 1 and
    ``pretrained`` (the run's), each column and its ``_std`` (NaN: a profile is one value per run), ready
    for :func:`layered` (the unit is then the network: each run's own value)."""
    out: list[dict[str, Any]] = []
    if frame.empty:
        return pd.DataFrame()
    for (run, t), g in frame.groupby(["run_id", "layer"], sort=True):
        g = g.sort_values("position")
        cols = summarise(g["influence"].to_numpy(dtype=float), int(t))
        first = g.iloc[0]
        row: dict[str, Any] = {"run_id": run, "layer": int(t), "samples": 1, "dtype": first["dtype"]}
        pre = first.get("pretrained", False)  # the influence rows of a simulator run carry none: NaN
        row["pretrained"] = bool(pre) if isinstance(pre, bool | np.bool_) else False
        row.update({k: first[k] for k in keys})
        for k, v in cols.items():
            row[k], row[f"{k}_std"] = float(v), math.nan
        out.append(row)
    return pd.DataFrame(out)

