"""The key-bias reading of attention sinks, measured per excerpt, layer and head of a model's own attention.

Gu et al. (ICLR 2025, arXiv 2410.10781; known here second-hand): the first token acts as a key bias, with a
high ``cos(q_i, k_0)`` and often a small ``||k_0||``. :func:`measure_key_bias` runs one model's own forward
(mode ``full``, its own masks and ``d_qk``) on text excerpts and keeps, for each excerpt, layer ``t = 1..L``
and head ``h``, the diagnostics ``analyze --diagnostics`` computes of that layer (the same path:
:func:`~rankcollapse.models.diagnose.diagnostics_path`, the per-sample values of
:func:`~rankcollapse.models.diagnose.chunked_diagnostic_values`): ``first_token_attention`` (``mean_i A_i0``)
and the key-bias values of :data:`~rankcollapse.metrics.diagnostics.QUERY_KEY_NAMES` (``first_key_cos``,
``key_cos``, ``first_key_norm``, ``key_norm``, ``query_norm``), from the queries and keys the layer's
attention function receives (after the rotary embedding; a key head's norms repeated for each query head
that reads it). Index letters: b samples (excerpts), h heads, t layers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rankcollapse.core.precision import dtype_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.metrics.diagnostics import QUERY_KEY_NAMES, SINK_THRESHOLD

OnLayer = Callable[[int], None]
#: What is kept per excerpt, layer and head ([b, L, h] each).
HEAD_COLUMNS: tuple[str, ...] = ("first_token_attention", *QUERY_KEY_NAMES)


@dataclass
class KeyBiasConfig:
    """One run of :func:`measure_key_bias`: one model, its own attention, ``samples`` excerpts of ``tokens``
    from ``corpus``, drawn by ``seed`` (and the weights of a random init)."""

    model: str = "minilm"
    corpus: str = "wikipedia"
    samples: int = 8
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("samples", "tokens", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "seed" else 1):
                raise RankCollapseError(f"{name}={quote(v, 20)} is invalid; allowed: a positive integer")
        if self.tokens < 2:
            raise RankCollapseError(f"tokens={self.tokens} is invalid; allowed: at least 2 (the first key "
                                    "and one other)")
        self.dtype = dtype_name(self.dtype)


@dataclass
class KeyBiasMeasurement:
    """What :func:`measure_key_bias` measured: ``heads[name]`` [b, L, h] for each name of
    :data:`HEAD_COLUMNS` (excerpts in sample order, layers 1..L); ``model``: the model's columns
    (``models.measure.model_columns``) and ``own_mask``, its first layer's own mask; ``summary``: the run's
    facts (``diagnostics_path`` among them)."""

    heads: dict[str, np.ndarray]
    model: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def layers(self) -> int:
        return int(next(iter(self.heads.values())).shape[1])


def measure_key_bias(cfg: KeyBiasConfig, on_layer: OnLayer, device: str = "cpu",
                     batch_size: int | None = None) -> KeyBiasMeasurement:
    """Per excerpt, layer and head: the sink measure and the key-bias values (module docstring). The excerpts
    go through the model ``batch_size`` at a time on ``device``, each layer's values taken on the path
    ``analyze --diagnostics`` takes for the model (the kernel's, or blocks of query rows); ``on_layer(t)``
    after each layer (t = 0..L, as for one batch)."""
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.models import excerpts, iter_hidden_states  # the package's: patchable in tests
    from rankcollapse.models.analyze.config import AnalyzeConfig
    from rankcollapse.models.diagnose import chunked_diagnostic_values, diagnostics_path
    from rankcollapse.models.measure import Ticks, model_columns
    from rankcollapse.models.parts import chunk_rows
    from rankcollapse.models.run_model import load_model_cached
    from rankcollapse.models.stream import iter_batches

    start = time.perf_counter()
    model = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    loaded = time.perf_counter() - start
    path = diagnostics_path(model, AnalyzeConfig(model=cfg.model, dtype=cfg.dtype, diagnostics=True))
    chunk = None
    if path.kind == "blocks":
        chunk = chunk_rows(max(p.n_heads for p in model.layers), cfg.tokens)
    depth = model.depth
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = Ticks(on_layer, depth + 1, len(chunks))
    kept: dict[str, list[list[torch.Tensor]]] = {k: [[] for _ in range(depth)] for k in HEAD_COLUMNS}
    for batch in iter_batches(ids, batch_size, model.device):
        record: dict[str, Any] = {}
        stream = iter_hidden_states(model, batch.ids, mode="full", record=record, chunk=chunk,
                                    kernel_stats=path.kind == "kernel")
        for t, _, x in stream:
            if t > 0:
                rows = record.pop("rows").take(slice(0, batch.size), cfg.tokens)
                if rows.qk is None:
                    raise RankCollapseError(f"{cfg.model!r}: layer {t}'s diagnostics path gave no queries "
                                            "and keys")
                per = chunked_diagnostic_values(batch.real(x), rows, SINK_THRESHOLD)
                for k in HEAD_COLUMNS:
                    kept[k][t - 1].append(per[k])  # [b', h] float64 on the CPU
            ticks.step()
    heads = {k: torch.stack([torch.cat(parts) for parts in layers], dim=1).numpy()
             for k, layers in kept.items()}
    info = {**model_columns(model), "own_mask": model.own_layer_mask(0).spec}
    summary = {
        **info,
        "layers_run": depth,
        "heads": int(heads["first_token_attention"].shape[-1]),
        "diagnostics_path": path.describe(),
        "load_s": round(loaded, 2),
        "device": str(model.device),
        "batch_size": chunks[0].stop - chunks[0].start if chunks else 0,
        "seconds": round(time.perf_counter() - start, 2),
    }
    first = heads["first_token_attention"]
    summary["sink_heads"] = int((np.nanmean(first, axis=0) > SINK_THRESHOLD).sum()) if first.size else 0
    summary["first_token_attention_mean"] = float(np.nanmean(first)) if first.size else math.nan
    return KeyBiasMeasurement(heads, info, summary)
