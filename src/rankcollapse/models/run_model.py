"""The model of an :func:`~rankcollapse.models.analyze.analyze` run: loaded by name and kept for the
next run (:func:`load_model_cached`), or given and checked against the run's config, never moved nor
cast (:func:`check_model_device`, :func:`check_model_dtype`, :func:`hooks_skipped`,
:func:`check_surgery`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.loading import LoadedModel, load_model

if TYPE_CHECKING:
    from rankcollapse.models.analyze.config import AnalyzeConfig

__all__ = ["check_model_device", "check_model_dtype", "check_surgery", "hooks_skipped", "load_model_cached",
           "needs_surgery"]


_MODEL_CACHE: dict[tuple[str, str, int, str], LoadedModel] = {}


def load_model_cached(name: str, dtype: str, seed: int, device: str = "cpu") -> LoadedModel:
    """:func:`load_model`, keeping the last model in memory (a grid of runs over one model loads it once)."""
    key = (name, dtype, seed, str(device))
    if key not in _MODEL_CACHE:
        _MODEL_CACHE.clear()
        _MODEL_CACHE[key] = load_model(name, dtype, seed=seed, device=device)
    return _MODEL_CACHE[key]


def needs_surgery(config: AnalyzeConfig) -> bool:
    """Whether the run needs each layer's attention weights from the dissected parts: the sinks ablation
    (``--diagnostics`` alone does not: it reads each layer's kernel call,
    :func:`~rankcollapse.models.diagnose.diagnostics_path`)."""
    return config.ablation is not None


def check_surgery(model: LoadedModel, config: AnalyzeConfig) -> None:
    """Refuse, in one line and before anything runs, what a model cannot give: the sinks ablation (or
    ``--diagnostics-chunk``) on a model whose layers are not dissected, diagnostics on an undissected model
    whose attention does not go through Hugging Face's ``AttentionInterface``
    (:func:`~rankcollapse.models.diagnose.diagnostics_path`)."""
    from rankcollapse.models.diagnose import diagnostics_path

    if needs_surgery(config) and not model.dissected:
        raise RankCollapseError(f"{model.arch!r} is not dissected: --ablation needs the attention weights "
                                "of a dissected family (--diagnostics alone reads any model whose attention "
                                "goes through Hugging Face's AttentionInterface)")
    if config.diagnostics:
        diagnostics_path(model, config)


def check_model_dtype(model: LoadedModel, config: AnalyzeConfig) -> None:
    """An in-memory model is measured in its own dtype (it is borrowed, never cast): a ``dtype`` given
    that differs is refused in one line instead of silently running in the model's."""
    own = str(model.dtype).removeprefix("torch.")
    if getattr(config, "_dtype_given", False) and own != config.dtype:
        raise RankCollapseError(
            f"the model given is {own}, not dtype {config.dtype!r}; cast it first (e.g. model.double()) or "
            "leave dtype unset: an in-memory model is measured in its own dtype"
        )


def hooks_skipped(hf_model: Any, mode: str) -> str:
    """A sentence when the user's forward hooks on ``hf_model`` will not run: outside mode ``full``
    the layers are reassembled from their parts, so the model's own modules (and their hooks) are not
    called; "" when there is none or the mode is ``full``."""
    if mode == "full":
        return ""
    count = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in hf_model.modules())
    if not count:
        return ""
    return (f"{count} forward hook{'s' if count > 1 else ''} on the model will not run in mode {mode!r} "
            "(its layers are reassembled from their parts); they run in mode 'full'")


def check_model_device(model: LoadedModel, device: str) -> None:
    """A model given to :func:`analyze` must be on the config's device (it is borrowed, never moved)."""
    want, have = torch.device(device), model.device
    if have.type != want.type or (want.index is not None and have.index not in (None, want.index)):
        raise RankCollapseError(f"the model given is on {have}, not on device {want}; pass device='{have}' "
                                f"or move the model to {want} first")
