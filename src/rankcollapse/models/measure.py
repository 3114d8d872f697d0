"""Measurements of one model for the paper's experiments: per-sample values per layer, nothing judged.

- :func:`measure_curves` (Figs. 2, 3, 6, 7): one model, every variant x mask x d_qk on the same
  excerpts, the conditions advancing layer by layer together (each layer built once per run); per
  condition and quantity the per-sample values ``[b, L+1]`` of any per-sample metric of
  ``rankcollapse.metrics`` named in ``CurvesConfig.quantities`` (default ``mu``, ``mu_rel``), with
  ``||X||_F`` per sample and where it rounded to 0;
- :func:`measure_geometry` (Figs. 4, 8, 9): the model's own blocks; per layer the per-sample values of
  ``metrics.token_geometry``, every singular value of the first samples, the initial pairwise cosines
  with the offending token pair of each sample.

The judging kit (``rankcollapse.experiments.kit``) summarises these values into curves and rows; this
module knows nothing about verdicts. Both functions stream the samples through the model
``batch_size`` at a time on ``device``; every per-sample value is concatenated over the batches in
sample order, so the result does not depend on the batch size.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.precision import dtype_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.models.analyze.config import check_excerpt_size

#: The value of a ``masks`` entry that means each layer's own mask (the model's config).
OWN_MASK = "own"
OnLayer = Callable[[int], None]


class Ticks:
    """``on_layer`` called ``layers`` times in all (as for one batch), spread evenly over the
    ``layers x batches`` steps of a run streamed in batches, with the layer indices 0, 1, ... in order."""

    def __init__(self, on_layer: OnLayer, layers: int, batches: int) -> None:
        self.on_layer, self.layers, self.steps = on_layer, layers, max(1, layers * batches)
        self.done = self.sent = 0

    def step(self) -> None:
        self.done += 1
        while self.sent < self.done * self.layers // self.steps:
            self.on_layer(self.sent)
            self.sent += 1


def model_columns(model: Any) -> dict[str, Any]:
    """What every row says about its model: words for figures, and whether it is a stand-in."""
    src = model.source
    return {
        "model_label": getattr(model, "stored_label", model.label),  # as stored before labels named weights
        "model_name": model.name,
        "model_kind": getattr(src, "kind", ""),
        "pretrained": bool(getattr(src, "pretrained", True)),
        "stand_in_for": getattr(src, "stand_in_for", None) or "",
        "d_model": int(model.d_model),
    }


@dataclass
class CurvesConfig:
    """One run of :func:`measure_curves`: one model, dtype and seed; every variant x mask x d_qk.

    ``quantities``: the per-sample metrics measured at every layer, by their ``rankcollapse.metrics``
    names (``METRIC_NAMES``)."""

    model: str = "random:bert-base-uncased"
    variants: tuple[str, ...] = ("attn", "attn+skip", "attn+ln", "attn+skip+ln", "full")
    masks: tuple[str, ...] = ("complete", "causal", "window:w=1", "causal-window:w=1")
    d_qk: tuple[float | None, ...] = (None,)
    layers: int | None = None
    corpus: str = "wikipedia"
    samples: int = 4
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    float64_variants: tuple[str, ...] | None = None  # variants run when dtype is float64 (None: all)
    quantities: tuple[str, ...] = ("mu", "mu_rel")

    def __post_init__(self) -> None:
        from rankcollapse.metrics import METRIC_NAMES
        from rankcollapse.models import MODES

        if self.float64_variants is not None and dtype_name(self.dtype) == "float64":
            self.variants = tuple(self.float64_variants)
        self.variants, self.masks = tuple(self.variants), tuple(self.masks)
        self.quantities = tuple(self.quantities)
        self.d_qk = tuple(None if d is None else float(d) for d in self.d_qk)
        bad = [v for v in self.variants if v not in MODES]
        if bad:
            raise RankCollapseError(f"unknown variant {quote(bad[0], 40)}; allowed: {', '.join(MODES)}")
        unknown = [q for q in self.quantities if q not in METRIC_NAMES]
        if unknown or not self.quantities:
            raise RankCollapseError(
                f"unknown quantity {quote((unknown or [''])[0], 40)}; allowed: {', '.join(METRIC_NAMES)}"
            )
        if not (self.variants and self.masks and self.d_qk):
            raise RankCollapseError("variants, masks and d_qk each need at least one value")
        if any(d is not None and not (d > 0 and math.isfinite(d)) for d in self.d_qk):
            raise RankCollapseError(f"d_qk values must be positive finite numbers, got {list(self.d_qk)}")
        check_excerpt_size(self.samples, self.tokens)
        if self.layers is not None and self.layers < 1:
            raise RankCollapseError(f"layers must be >= 1 (or null: the model's own), got {self.layers}")
        self.dtype = dtype_name(self.dtype)


Condition = tuple[str, str, float]  # (variant, mask, d_qk as used: the model's own where None)


@dataclass
class CurveMeasurement:
    """What :func:`measure_curves` measured, per condition ``(variant, mask, d_qk)``: ``values[c][q]``
    [b, L+1] per-sample values of quantity ``q`` (NaN where a sample is not finite), ``x_norm[c]`` the
    per-sample ``||X||_F`` [b, L+1], ``zero[c]`` where finite tokens rounded to ``||X||_F = 0`` in the
    dtype (mu_rel = 0/0: an underflow, not an overflow); ``model`` the model's columns
    (:func:`model_columns`) and ``summary`` the run's facts."""

    conditions: list[Condition]
    values: dict[Condition, dict[str, np.ndarray]]
    x_norm: dict[Condition, np.ndarray]
    zero: dict[Condition, np.ndarray]
    model: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)


def measure_curves(
    cfg: CurvesConfig, on_layer: OnLayer, device: str = "cpu", batch_size: int | None = None
) -> CurveMeasurement:
    """Per-sample ``cfg.quantities`` at every layer of every variant x mask x d_qk of one model (module
    docstring): per batch of excerpts [b', n] every condition's stream advances layer by layer together,
    and each condition's per-sample values are the batches' concatenated."""
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.metrics import per_sample_metrics
    from rankcollapse.models import excerpts, iter_hidden_states  # the package's: patchable in tests
    from rankcollapse.models.run_model import load_model_cached
    from rankcollapse.models.stream import iter_batches

    start = time.perf_counter()
    model = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    depth = len(model.layers) if cfg.layers is None else cfg.layers
    loaded = time.perf_counter() - start
    wanted = [(v, m, d) for v in cfg.variants for m in cfg.masks for d in cfg.d_qk]
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = Ticks(on_layer, depth + 1, len(chunks))
    keys = (*cfg.quantities, "x_norm", "zero")
    parts: dict[tuple, dict[str, list[np.ndarray]]] = {c: {k: [] for k in keys} for c in wanted}
    for batch in iter_batches(ids, batch_size, model.device):
        streams = [
            iter_hidden_states(
                model, batch.ids, mode=v, mask=None if m == OWN_MASK else m, d_qk=d, layers=depth
            )
            for v, m, d in wanted
        ]
        layers: dict[tuple, dict[str, list[np.ndarray]]] = {c: {k: [] for k in keys} for c in wanted}
        try:
            for t in range(depth + 1):
                for cond, stream in zip(wanted, streams, strict=True):
                    t_got, _, x = next(stream)
                    if t_got != t:
                        raise RuntimeError(f"hidden state {t_got} where layer {t} was expected")
                    x = batch.real(x)
                    got = per_sample_metrics(x, tuple(dict.fromkeys(("mu", "mu_rel", *cfg.quantities))))
                    for q in cfg.quantities:
                        layers[cond][q].append(got[q].numpy())
                    norm = torch.linalg.vector_norm(x.flatten(1).double(), dim=1).cpu().numpy()
                    finite = torch.isfinite(x).flatten(1).all(dim=1).cpu().numpy()
                    layers[cond]["x_norm"].append(norm)
                    # 0/0: the dtype's ||X||_F rounded to 0 (mu 0), never an overflow's inf/inf
                    mu_rel, mu = got["mu_rel"].numpy(), got["mu"].numpy()
                    layers[cond]["zero"].append(finite & np.isnan(mu_rel) & (mu == 0))
                ticks.step()
        finally:  # each stream holds torch.inference_mode while suspended: closed last in, first out, the
            for stream in reversed(streams):  # caller's grad mode comes back (else it stays off)
                stream.close()
        for cond in wanted:
            for k in keys:
                parts[cond][k].append(np.stack(layers[cond][k], axis=1))
    info = model_columns(model)
    conditions: list[Condition] = []
    values: dict[Condition, dict[str, np.ndarray]] = {}
    x_norm: dict[Condition, np.ndarray] = {}
    zero: dict[Condition, np.ndarray] = {}
    nonfinite = []
    for v, m, d in wanted:
        cond = (v, m, float(model.own_d_qk) if d is None else float(d))
        arrays = {k: np.concatenate(a, axis=0) for k, a in parts[(v, m, d)].items()}  # [b, L+1]
        conditions.append(cond)
        values[cond] = {q: arrays[q] for q in cfg.quantities}
        x_norm[cond], zero[cond] = arrays["x_norm"], arrays["zero"]
        if not all(np.isfinite(a).all() for a in values[cond].values()):
            nonfinite.append(f"{v} / {m} / d_qk={cond[2]:g}")
    summary = {
        **info,
        "conditions": len(wanted),
        "layers_run": depth,
        "load_s": round(loaded, 2),
        "nonfinite_conditions": "; ".join(nonfinite),
        "device": str(model.device),
        "batch_size": chunks[0].stop - chunks[0].start if chunks else 0,
    }
    return CurveMeasurement(conditions, values, x_norm, zero, info, summary)


@dataclass
class GeometryConfig:
    """One run of :func:`measure_geometry`: one model, its own blocks (``mode``), its own depth."""

    model: str = "paper:bert-base-uncased"
    mode: str = "full"
    layers: int | None = None
    corpus: str = "wikipedia"
    samples: int = 8
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    spectrum_samples: int = 0
    cosine_samples: int = 0
    cosine_bins: int = 40

    def __post_init__(self) -> None:
        check_excerpt_size(self.samples, self.tokens)
        if not 0 <= self.spectrum_samples <= self.samples or not 0 <= self.cosine_samples <= self.samples:
            raise RankCollapseError(
                f"spectrum_samples and cosine_samples must be in 0..samples={self.samples}, got "
                f"{self.spectrum_samples}, {self.cosine_samples}"
            )
        if self.layers is not None and self.layers < 0:
            raise RankCollapseError(f"layers must be >= 0 (or null: the model's own), got {self.layers}")
        self.dtype = dtype_name(self.dtype)


@dataclass
class GeometryMeasurement:
    """What :func:`measure_geometry` measured: ``per_layer[name][t]`` the per-sample values [b] of
    each column of ``metrics.token_geometry`` at layer ``t``; ``spectra[t]`` rows (every singular value
    of the first ``spectrum_samples`` at layer ``t``: layer, sample, index, sigma); ``cosines`` rows
    (``kind = phi0`` per sample: the smallest pairwise cosine of X(0), its token pair, the share of
    negative pairs; ``kind = cos_hist``: the histogram of the first ``cosine_samples``); ``rank_limit``
    how the structural maximum rank was set; ``model`` the model's columns."""

    per_layer: dict[str, dict[int, np.ndarray]]
    spectra: dict[int, list[dict[str, Any]]]
    cosines: list[dict[str, Any]]
    rank_limit: str
    model: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)


def measure_geometry(
    cfg: GeometryConfig, on_layer: OnLayer, device: str = "cpu", batch_size: int | None = None
) -> GeometryMeasurement:
    """Token geometry per layer (Fig. 4), singular values (Fig. 8), initial cosines (Fig. 9) of one model
    (module docstring)."""
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.metrics import token_geometry
    from rankcollapse.models import excerpts, iter_hidden_states  # the package's: patchable in tests
    from rankcollapse.models.loading import structural_rank
    from rankcollapse.models.run_model import load_model_cached
    from rankcollapse.models.stream import iter_batches

    model = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    info = model_columns(model)
    cap, why = structural_rank(model, cfg.tokens)
    own = model.depth
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = Ticks(on_layer, (own if cfg.layers is None else cfg.layers) + 1, len(chunks))
    distinct_all: list[Tensor] = []
    spectra: dict[int, list[dict[str, Any]]] = {}  # per layer, over the batches in sample order
    cosines: list[dict[str, Any]] = []
    parts: dict[str, dict[int, list[np.ndarray]]] = {}  # name -> layer -> one array per batch
    for batch in iter_batches(ids, batch_size, model.device):
        first = batch.rows.start
        distinct: Tensor | None = None
        for t, _, x in iter_hidden_states(model, batch.ids, mode=cfg.mode, layers=cfg.layers):
            x = batch.real(x)
            if distinct is None:  # X(0): rows equal only where the model embeds a repeated token alike
                distinct = torch.tensor([torch.unique(x[s], dim=0).shape[0] for s in range(x.shape[0])])
                distinct_all.append(distinct)
                limit = distinct.clamp(max=cap)
            else:
                limit = distinct
            got, sv = token_geometry(x, limit)
            for k, v in got.items():
                parts.setdefault(k, {}).setdefault(t, []).append(v.numpy())
            for s in range(first, min(cfg.spectrum_samples, batch.rows.stop)):
                spectra.setdefault(t, []).extend(
                    {"kind": "sv", "layer": t, "sample": s, "index": i, "sigma": float(v)}
                    for i, v in enumerate(sv[s - first].tolist())
                )
            if t == 0:
                cosines += initial_cosines(
                    x, ids[batch.rows], model, cfg.cosine_samples, cfg.cosine_bins, first
                )
            ticks.step()
    mean_distinct = float(torch.cat(distinct_all).double().mean())
    note = f"rank_max = distinct rows of X(0) (mean {mean_distinct:.4g}), capped at X(0) by {why}"
    per_layer = {k: {t: np.concatenate(v) for t, v in by_t.items()} for k, by_t in parts.items()}
    summary = {**info, "layers_run": len(per_layer["full_rank"]) - 1, "rank_limit": note}
    summary.update(device=str(model.device), batch_size=chunks[0].stop - chunks[0].start)
    return GeometryMeasurement(per_layer, spectra, cosines, note, info, summary)


def initial_cosines(
    x: Tensor, ids: Tensor, model: Any, histogram_samples: int, bins: int, first: int = 0
) -> list[dict[str, Any]]:
    """``phi0`` rows of every sample of X(0) ``x`` [b, n, d] (the smallest pairwise cosine, its token pair
    decoded with the model's tokenizer, the share of negative pairs) and ``cos_hist`` rows (``bins``
    bins on [-1, 1]) of the samples with index below ``histogram_samples``; ``first``: the run's index of
    the batch's first sample."""
    from rankcollapse.metrics import pairwise_cosines

    cos = pairwise_cosines(x).cpu()
    n = cos.shape[-1]
    off = ~torch.eye(n, dtype=torch.bool)
    rows: list[dict[str, Any]] = []
    edges = np.linspace(-1.0, 1.0, bins + 1)
    tok = getattr(model, "tokenizer", None)
    for b in range(cos.shape[0]):
        s = first + b  # the sample's index in the run
        c = cos[b].masked_fill(~off, math.inf)
        i, j = divmod(int(torch.argmin(c)), n)
        pair = ""
        if tok is not None:
            words = tok.convert_ids_to_tokens([int(ids[b, i]), int(ids[b, j])])
            pair = f"{words[0]} / {words[1]}"
        pairs = cos[b][off].numpy()
        rows.append(
            {
                "kind": "phi0",
                "layer": 0,
                "sample": s,
                "phi0": float(pairs.min()),
                "pair": pair,
                "pair_positions": f"{i},{j}",
                "negative_share": float((pairs < 0).mean()),
                "mean_cos": float(pairs.mean()),
                "tokenizer": str(model.info.get("tokenizer", "")),
            }
        )
        if s < histogram_samples:
            counts, _ = np.histogram(pairs, bins=edges)
            rows.extend(
                {
                    "kind": "cos_hist",
                    "layer": 0,
                    "sample": s,
                    "bin_lo": float(lo),
                    "bin_hi": float(hi),
                    "count": int(k),
                }
                for lo, hi, k in zip(edges[:-1], edges[1:], counts, strict=True)
            )
    return rows
