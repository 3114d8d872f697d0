"""The layers of a deep random model (``random:<checkpoint>,layers=L``): the stored ones, then fresh
layers, each initialised by Hugging Face's own ``_init_weights`` under its own seed."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.families import FRESH_LAYERS, fresh_parts
from rankcollapse.models.parts import LayerParts


def fresh_layer_seed(seed: int, index: int) -> int:
    """The torch seed of fresh layer ``index`` (0-based) of a deep random model."""
    return seed * 100_003 + index


class FreshLayers(Sequence[LayerParts]):
    """The layers of ``random:<checkpoint>,layers=L``: the model's own ``n`` layers, then ``L - n``
    independent new layers, each initialised by Hugging Face's own ``_init_weights`` under
    ``torch.manual_seed(fresh_layer_seed(seed, index))`` (RNG state restored after).

    A layer beyond the stored ones is built when asked for and only the last one is kept, so
    memory does not grow with ``L`` (a 128-layer BERT-base would need 3.6 GB in float32); the same
    index always gives the same weights (drawn on the CPU, then moved to the model's device). The
    first ``n`` layers are those of the ``L = n`` model.
    """

    def __init__(self, model: nn.Module, base: list[LayerParts], depth: int, seed: int,
                 hf_casts: bool) -> None:
        family = model.config.model_type
        if family not in FRESH_LAYERS:
            raise RankCollapseError(f"deeper random models are not available for family {family!r}")
        self._model, self._base, self._depth, self._seed, self._casts = model, base, depth, seed, hf_casts
        self._make = FRESH_LAYERS[family]
        self._family = family
        self._last: tuple[int, LayerParts] | None = None

    def __len__(self) -> int:
        return self._depth

    def __getitem__(self, index: int) -> LayerParts:
        if not -self._depth <= index < self._depth:
            raise IndexError(index)
        index %= self._depth
        if index < len(self._base):
            return self._base[index]
        if self._last is None or self._last[0] != index:
            self._last = None  # free the previous layer first
            self._last = (index, self._build(index))
        return self._last[1]

    def _build(self, index: int) -> LayerParts:
        """Layer ``index``: the module is made on the meta device (no default init, which HF's init
        overwrites anyway), every parameter set to NaN, then HF's ``_init_weights`` is applied; a
        parameter it did not set stays NaN and is refused."""
        config = self._model.config
        first = next(self._model.parameters())
        dtype, device = first.dtype, first.device
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(fresh_layer_seed(self._seed, index))
            with torch.device("meta"):
                layer = self._make(config)
            layer = layer.to_empty(device="cpu")
            with torch.no_grad():
                for param in layer.parameters():
                    param.fill_(float("nan"))
                layer.apply(self._model._init_weights)
        missed = [name for name, param in layer.named_parameters() if not bool(torch.isfinite(param).all())]
        if missed or list(layer.buffers()):
            raise RankCollapseError(
                f"fresh {config.model_type} layer: parameters not set by its init: {missed[:3]}"
            )
        layer = layer.to(device=device, dtype=dtype).eval().requires_grad_(False)  # drawn on the CPU
        return fresh_parts(self._family, layer, config, self._casts)
