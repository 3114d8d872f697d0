"""How a real model's residual stream grows with depth: per-sample growth measures per layer, nothing judged.

:func:`measure_growth` runs one model's own blocks (mode ``full``, its own masks) on text excerpts and keeps,
per excerpt and hidden state ``X(t)`` (``models.stream``: for pre-LN decoders the residual stream before the
final norm, for post-LN encoders the last norm's output), the measures of ``metrics.growth``: ``stream_var``
(the mean over tokens of each token's feature variance), ``layer_cos`` (the mean cosine between each token
before and after layer t; NaN at t = 0) and ``massive_ratio`` (``metrics.diagnostics``: the largest
activation over the median one). The quantities of LayerNorm Scaling's "Curse of Depth" (arXiv 2502.05795)
and Peri-LN (arXiv 2502.02732) on pretrained or random-init weights.

:func:`with_lns`: LayerNorm Scaling (Sun et al. 2025, arXiv 2502.05795) as model surgery: a pre-LN model whose
layer ``l``'s norms (1-based) each output ``Norm(x) / sqrt(l)`` (``GrowthConfig.lns``; the hidden states are
then read through the dissected parts). On random-init weights this is LNS at initialisation; on pretrained
weights it would change a trained function, and no story reads it there.
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
from rankcollapse.models.loading import LoadedModel
from rankcollapse.models.measure import OnLayer, Ticks, model_columns


def _scaled(fn: Callable[[Tensor], Tensor], factor: float) -> Callable[[Tensor], Tensor]:
    def scaled(x: Tensor) -> Tensor:
        return fn(x) * factor

    return scaled


def with_lns(model: LoadedModel) -> LoadedModel:
    """``model`` with LayerNorm Scaling: layer ``l``'s (1-based) pre-LN norms output ``Norm(x) / sqrt(l)``
    (a shallow copy, ``models.dyt.with_norms``: the cached model is untouched). RankCollapseError for a model
    whose norms are not pre-LN (LNS scales the norms before each sublayer of a pre-LN stack)."""
    from rankcollapse.models.dyt import with_norms

    places = sorted({p.norm_placement for p in model.layers})
    if places != ["pre"]:
        raise RankCollapseError(f"LayerNorm Scaling (lns) applies to a pre-LN model; {quote(model.name)} has "
                                f"norm placement {', '.join(places) or 'none'}")
    return with_norms(model, lambda fn, i, which: _scaled(fn, 1.0 / math.sqrt(i + 1)))


@dataclass
class GrowthConfig:
    """One run of :func:`measure_growth`: one model, dtype and seed; ``layers`` None: its own depth; ``lns``:
    LayerNorm Scaling by surgery (:func:`with_lns`)."""

    model: str = "smollm2"
    layers: int | None = None
    corpus: str = "wikipedia"
    samples: int = 8
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    lns: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.lns, bool):
            raise RankCollapseError(f"lns must be true or false, got {quote(self.lns)}")
        check_excerpt_size(self.samples, self.tokens)
        self.dtype = dtype_name(self.dtype)
        if self.layers is not None and self.layers < 1:
            raise RankCollapseError(f"layers must be >= 1 (or null: the model's own), got {self.layers}")


@dataclass
class GrowthMeasurement:
    """``values[q]`` [b, L+1] per excerpt and layer for each of ``metrics.growth.GROWTH_NAMES``; ``model`` the
    model's columns (its ``norm_placement`` among them); ``summary`` the run's facts."""

    values: dict[str, np.ndarray]
    model: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)


def measure_growth(
    cfg: GrowthConfig, on_layer: OnLayer, device: str = "cpu", batch_size: int | None = None
) -> GrowthMeasurement:
    """The growth measures of one model on ``cfg``'s excerpts (module docstring), batch by batch."""
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.metrics.diagnostics import massive_ratio
    from rankcollapse.metrics.growth import GROWTH_NAMES, layer_cos, stream_var
    from rankcollapse.models import excerpts, iter_hidden_states
    from rankcollapse.models.run_model import load_model_cached
    from rankcollapse.models.stream import iter_batches

    start = time.perf_counter()
    base = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    model = with_lns(base) if cfg.lns else base
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    depth = len(model.layers) if cfg.layers is None else cfg.layers
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = Ticks(on_layer, depth + 1, len(chunks))
    parts: dict[str, list[np.ndarray]] = {q: [] for q in GROWTH_NAMES}
    for batch in iter_batches(ids, batch_size, model.device):
        cols: dict[str, list[np.ndarray]] = {q: [] for q in GROWTH_NAMES}
        before = None
        stream = iter_hidden_states(model, batch.ids, mode="full", layers=depth,
                                    backend="parts" if cfg.lns else "auto")  # the surgery lives in the parts
        try:
            for _, _, x in stream:
                x = batch.real(x).to(torch.float64)
                cols["stream_var"].append(stream_var(x).cpu().numpy())
                cos = layer_cos(before, x) if before is not None else torch.full((x.shape[0],), torch.nan)
                cols["layer_cos"].append(cos.cpu().numpy())
                cols["massive_ratio"].append(massive_ratio(x).cpu().numpy())
                before = x.clone()
                ticks.step()
        finally:
            stream.close()
        for q in GROWTH_NAMES:
            parts[q].append(np.stack(cols[q], axis=1))
    values = {q: np.concatenate(v, axis=0) for q, v in parts.items()}
    placement = model.layers[0].norm_placement if model.layers else ""
    info = {**model_columns(base), "norm_placement": "pre+lns" if cfg.lns else placement}
    summary = {**info, "layers_run": depth, "seconds": round(time.perf_counter() - start, 2),
               "device": str(model.device), "batch_size": chunks[0].stop - chunks[0].start if chunks else 0}
    return GrowthMeasurement(values, info, summary)
