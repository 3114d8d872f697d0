"""Memory estimates of an :func:`~rankcollapse.models.analyze.analyze` run, and the check made before
anything is allocated: what every sample keeps (:func:`kept_bytes`) and one batch in the model
(:func:`batch_bytes`, :func:`forward_bytes`), against what the machine (or the GPU) has
(:func:`check_run_memory`, through :func:`rankcollapse.edge.validate.check_memory`).
"""

from __future__ import annotations

import torch

from rankcollapse.core.execution import device_memory
from rankcollapse.edge.validate import check_memory
from rankcollapse.models.analyze.config import AnalyzeConfig
from rankcollapse.models.loading import LoadedModel

__all__ = ["batch_bytes", "check_run_memory", "forward_bytes", "kept_bytes"]


def kept_bytes(samples: int, tokens: int, rows: int = 0, metrics: int = 0) -> int:
    """What a run keeps for all its samples, whatever the batches: token ids (int64, a few index
    temporaries) and, per row and metric, one float64 value per sample (twice: the rows are made
    from them)."""
    return 3 * samples * tokens * 8 + 2 * rows * metrics * samples * 8


def batch_bytes(model: LoadedModel, batch: int, tokens: int) -> int:
    """One batch in the model: about eight ``[b, n, d]`` activations alive at once (residual, q, k, v,
    attention output, MLP hidden at 4d) and two ``[b, h, n, n]`` attention maps."""
    itemsize = torch.empty((), dtype=model.dtype).element_size()
    parts = model.layers[0] if model.layers else None
    cfg = model.hf_model.config
    width = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "n_embd", 0) or 768)
    heads = parts.n_heads if parts is not None else int(getattr(cfg, "num_attention_heads", 12))
    return forward_bytes(batch, tokens, width, heads, itemsize)


def forward_bytes(batch: int, tokens: int, width: int, heads: int, itemsize: int) -> int:
    """The estimate of :func:`batch_bytes` from the sizes: ``8 b n d + 2 b h n^2`` elements of
    ``itemsize`` bytes (eight ``[b, n, d]`` activations, two ``[b, h, n, n]`` attention maps)."""
    return (8 * batch * tokens * width + 2 * batch * heads * tokens * tokens) * itemsize


def check_run_memory(config: AnalyzeConfig, model: LoadedModel) -> None:
    """Refuse (one line) a run whose estimated memory exceeds what this machine has: what every
    sample keeps (:func:`kept_bytes`) and one batch in the model (:func:`batch_bytes`,
    ``config.batch_size`` samples or all), on the CPU; on CUDA the batch is checked against what is
    free on the GPU."""
    from rankcollapse.metrics import METRIC_NAMES

    batch = min(config.batch_size or config.samples, config.samples)
    depth = config.layers if config.layers is not None else model.depth
    metrics = len(config.metrics or METRIC_NAMES)
    what = f"analyze of {model.name}: {config.samples} samples x {config.tokens} tokens, batches of {batch}"
    kept = kept_bytes(config.samples, config.tokens, depth + 1, metrics)
    in_model = batch_bytes(model, batch, config.tokens)
    if model.device.type == "cpu":
        check_memory(what, kept + in_model)
    else:
        check_memory(what, kept)
        check_memory(f"{what} on {model.device}", in_model, device_memory(model.device))
