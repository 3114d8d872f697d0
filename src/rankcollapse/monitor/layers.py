"""Where a model under training keeps its hidden states: the layer modules a probe hooks.

:func:`find_layers` gives a :class:`Layers`: the module a probe calls (a Hugging Face model's base
model, without its head; T5's encoder stack), the layer modules in the order they are applied and
the TransformerLens prefix of the family. A family of :data:`rankcollapse.models.families.FAMILIES`
is found by its entry (:func:`rankcollapse.models.spec.layer_modules`, the dissector's own
lookup); any other model by ``layers="path.to.blocks"``, or else by its one ``nn.ModuleList`` of
layers (the longest list of modules of one type; with a config, the one of ``num_hidden_layers``).

Rows are those of :mod:`rankcollapse.models.stream`: row ``t = 0`` is the input of the first layer
(``embeddings``), row ``t >= 1`` the output of the t-th layer applied (``layer_{t}_out``); ``hook``
is the TransformerLens name of the same tensor (:func:`rankcollapse.models.names.tl_hook_name`),
``""`` where TransformerLens has no adapter for the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.models.families import FAMILIES
from rankcollapse.models.loading import base_model
from rankcollapse.models.names import tl_hook_name
from rankcollapse.models.spec import FamilySpec, get_path, layer_modules


@dataclass(frozen=True, eq=False)
class Layers:
    """The layers of one model as a probe sees them.

    ``call``: the module a probe runs (its forward hooks fire on ``modules``); ``modules``: the layer
    modules in the order applied (ALBERT: its shared layer once per application); ``blocks``: the
    TransformerLens prefix (``blocks``; ``""``: no adapter); ``family``: the family entry, or None for
    a model no entry describes; ``found``: how the layers were found, in words.
    """

    call: nn.Module
    modules: tuple[nn.Module, ...]
    blocks: str
    family: FamilySpec | None
    found: str

    @property
    def depth(self) -> int:
        return len(self.modules)

    def hook(self, t: int) -> str:
        """The TransformerLens name of row ``t`` (``""`` without an adapter)."""
        return tl_hook_name(t, self.blocks) if t <= self.depth else ""


def _name(model: Any) -> str:
    return type(model).__name__


def _from_path(model: nn.Module, path: str) -> list[nn.Module]:
    try:
        found = get_path(model, path)
    except (AttributeError, IndexError, ValueError, TypeError):
        raise RankCollapseError(
            f"model {_name(model)} has no module {quote(path)}; allowed: layers='path.to.blocks', the "
            "attribute path of its list of layers (e.g. 'transformer.h')"
        ) from None
    if not isinstance(found, nn.ModuleList | nn.Sequential) or len(found) == 0:
        raise RankCollapseError(
            f"layers={quote(path)} of model {_name(model)} is a {type(found).__name__}, "
            "not a non-empty nn.ModuleList / nn.Sequential of layer modules"
        )
    return list(found)


def _searched(model: nn.Module) -> tuple[str, list[nn.Module]]:
    """The one ``nn.ModuleList`` of layers of a model no family entry describes (module docstring)."""
    lists = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, nn.ModuleList) and len(m) > 0 and len({type(c) for c in m}) == 1
    ]
    depth = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if isinstance(depth, int) and any(len(m) == depth for _, m in lists):
        lists = [(name, m) for name, m in lists if len(m) == depth]
    if not lists:
        raise RankCollapseError(
            f"model {_name(model)} has no list of layers (no nn.ModuleList of modules of one type), so it "
            "has no hidden states to measure; allowed: a transformer, or layers='path.to.blocks'"
        )
    longest = max(len(m) for _, m in lists)
    best = [(name, m) for name, m in lists if len(m) == longest]
    if len(best) > 1:
        names = ", ".join(quote(name) for name, _ in best[:3])
        raise RankCollapseError(
            f"model {_name(model)} has several lists of {longest} layers ({names}); "
            "allowed: layers='path' naming the one to measure"
        )
    return best[0][0], list(best[0][1])


def find_layers(model: nn.Module, layers: str | None = None) -> Layers:
    """The :class:`Layers` of ``model`` (a Hugging Face model, with or without a head, or any
    ``nn.Module``). ``layers``: the attribute path of its list of layers, for a model no family
    entry describes (None: the family's entry, else the one list found). RankCollapseError (one
    line) for a model without layers (module docstring)."""
    if not isinstance(model, nn.Module):
        raise RankCollapseError(f"model must be a torch nn.Module, got {_name(model)}")
    if layers is not None:
        return Layers(model, tuple(_from_path(model, layers)), "", None, f"layers={layers!r}")
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    fam = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if fam is not None:
        base = base_model(model)
        try:
            root, modules = layer_modules(fam, base)
        except (AttributeError, IndexError, TypeError):
            raise RankCollapseError(
                f"model {_name(model)} (model_type {model_type!r}) does not have the "
                f"layout of its family; allowed: layers='path.to.blocks'"
            ) from None
        if not modules:
            raise RankCollapseError(f"model {_name(model)} has no layers (num_hidden_layers = 0)")
        return Layers(
            root if fam.stack else base,
            tuple(modules),
            fam.tl_blocks,
            fam,
            f"the {model_type} family's layers",
        )
    path, modules = _searched(model)
    return Layers(model, tuple(modules), "", None, f"its list of layers {path!r}")
