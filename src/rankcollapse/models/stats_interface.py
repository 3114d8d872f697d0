"""Attention statistics of any Hugging Face model whose attention goes through transformers'
``AttentionInterface`` (ours): a registered attention function that wraps the model's own.

Index letters: b batch, h query heads, g key/value heads, i queries, j keys, e per-head features.
Every attention module of a recent transformers model (``_supports_attention_backend``: Llama, Qwen2,
OLMo-2, Granite, Cohere, StarCoder2, GPT-OSS, BERT, GPT-2, ViT, ...) looks its attention function up by
its config's ``_attn_implementation`` and calls it as ``fn(module, query [b, h, i, e], key [b, g, j, e],
value [b, g, j, e], attention_mask, scaling=, dropout=, **kwargs)``. :func:`recording` switches every
config of a model to ``rankcollapse:<its own>`` for a ``with`` block (``sdpa``, ``eager``,
``flex_attention``, ...; registered once with the mask function of that implementation, so the model
builds the very masks it builds for its own), and the wrapper:

- sees the layer's real arguments (its mask tensor or ``BlockMask``, ``is_causal``, ``scaling``,
  ``s_aux``, ``softcap``, ``position_bias``, ``sliding_window``);
- computes the layer's per-query statistics (:class:`~rankcollapse.metrics.diagnostics.AttentionRows`:
  ``H_i``, ``A_i0``, ``|N_i|``) exactly from the kernel's row log-normaliser on ``V' = [V, K]``
  (:func:`~rankcollapse.models.lse_attention.attention_with_stats`), or, for logits that have no lse
  form (a soft cap, a position bias), from the weights formed in blocks of query rows
  (:func:`~rankcollapse.models.lse_attention.rows_in_blocks`);
- returns the model's own output: when its own implementation is ``sdpa`` the first ``e`` columns of
  the same kernel call (bit for bit SDPA's, ``tests/models/test_lse_attention.py``), else the output of
  its own function (eager, flex, flash), called as the model would.

Outside :func:`recording` (no :class:`Recorder` active) the wrapper is its inner function. On leaving,
every config's ``_attn_implementation`` is as it came (also on an error); the names stay registered in
transformers' two registries (adding a name changes no model). No hook is added to any module.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.diagnostics import AttentionRows
from rankcollapse.models.lse_attention import KernelMask, attention_with_stats, kernel_mask, rows_in_blocks

__all__ = ["PREFIX", "Recorder", "inner_name", "model_configs", "recording", "supports_interface"]

#: ``_attn_implementation`` of a config inside :func:`recording`: ``rankcollapse:<its own>``.
PREFIX = "rankcollapse:"

#: The implementations the wrapper wraps: those with a mask function in transformers (the model builds
#: its masks for the implementation named after the prefix).
WRAPPED: tuple[str, ...] = ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3",
                            "flash_attention_4")

#: A probe of the mask a call applies (:mod:`rankcollapse.models.fingerprint`): given the call, its inner
#: function and its mask as the kernel takes it, returns the call's output.
Probe = Callable[["Call"], tuple[Tensor, Any]]


@dataclass
class Call:
    """One attention call as the wrapper saw it: the module, its inner function (the model's own), the
    tensors and every keyword the model passed (``kwargs``, ``scaling`` and ``dropout`` included), its
    mask as the kernel takes it (``mask``) and the call's raw mask argument (``attention_mask``)."""

    module: nn.Module
    inner: Callable[..., tuple[Tensor, Any]]
    inner_name: str
    query: Tensor
    key: Tensor
    value: Tensor
    attention_mask: Any
    kwargs: dict[str, Any]
    mask: KernelMask
    scale: float

    def run_inner(self, query: Tensor | None = None, key: Tensor | None = None,
                  value: Tensor | None = None) -> tuple[Tensor, Any]:
        """The model's own function on this call's arguments (or on other tensors of the same shapes)."""
        q = self.query if query is None else query
        k = self.key if key is None else key
        v = self.value if value is None else value
        return self.inner(self.module, q, k, v, self.attention_mask, **self.kwargs)


@dataclass
class Recorder:
    """What :func:`recording` collects: ``rows`` one :class:`AttentionRows` per attention call, in call
    order (a layer's, when its module runs once); ``paths`` how each call's statistics were taken
    (``kernel`` / ``blocks: <why>``) and whose output it returned; ``probe``: instead of statistics, a
    probe of the mask each call applies (:mod:`rankcollapse.models.fingerprint`). Masks read once per
    tensor (:func:`~rankcollapse.models.lse_attention.kernel_mask`) are kept for the recorder's life, so a
    recorder can serve a whole forward, or one layer at a time of a run."""

    rows: list[AttentionRows] = field(default_factory=list)
    paths: dict[str, int] = field(default_factory=dict)
    probe: Probe | None = None
    _masks: dict[tuple[Any, ...], tuple[Any, KernelMask]] = field(default_factory=dict, repr=False)

    def take(self) -> AttentionRows:
        """The one call recorded since the last take (refused in one line when there was not one)."""
        if len(self.rows) != 1:
            raise RankCollapseError(f"{len(self.rows)} attention calls in one layer; the diagnostics need "
                                    "exactly one that goes through Hugging Face's AttentionInterface")
        return self.rows.pop()

    def note(self, path: str) -> None:
        self.paths[path] = self.paths.get(path, 0) + 1

    def kernel_mask(self, mask: Any, causal: bool, n_q: int, n_k: int, dtype: torch.dtype,
                    device: torch.device) -> KernelMask:
        """:func:`~rankcollapse.models.lse_attention.kernel_mask` of a call's mask, read once per mask
        tensor (a model hands every layer of a kind the same tensor)."""
        dense = _dense(mask)
        key = (None if dense is None else (id(dense), dense.data_ptr(), tuple(dense.shape)),
               causal, n_q, n_k, dtype)
        if key not in self._masks:
            # the tensor is kept alive with its reading, so no other tensor takes its id meanwhile
            self._masks[key] = (dense, kernel_mask(dense, causal, n_q, n_k, dtype, device))
        return self._masks[key][1]


_ACTIVE: ContextVar[Recorder | None] = ContextVar("rankcollapse_recorder", default=None)


def _dense(mask: Any) -> Tensor | None:
    """A call's mask as a tensor: None, a tensor as it is, a FlexAttention ``BlockMask`` as the bool
    ``[b, 1, i, j]`` its ``mask_mod`` defines (``O(b i j)``: the fingerprint's and the tests' use)."""
    if mask is None or isinstance(mask, Tensor):
        return mask
    mask_mod = getattr(mask, "mask_mod", None)
    if mask_mod is None:
        raise RankCollapseError(f"attention mask of type {type(mask).__name__}; allowed: None, a tensor or a "
                                "FlexAttention BlockMask")
    from torch.nn.attention.flex_attention import create_mask

    b, _, n_q, n_k = mask.shape
    device = mask.kv_num_blocks.device
    return create_mask(mask_mod, b, 1, n_q, n_k, device=device)


def supports_interface(hf_model: nn.Module) -> bool:
    """Whether a model's attention goes through ``AttentionInterface`` (transformers'
    ``_supports_attention_backend``): then :func:`recording` sees every attention call."""
    return bool(getattr(hf_model, "_supports_attention_backend", False))


def model_configs(hf_model: nn.Module) -> list[Any]:
    """Every config object of a model that names an attention implementation (the model's and its
    modules', each once)."""
    found = {id(c): c for c in [hf_model.config, *(getattr(m, "config", None) for m in hf_model.modules())]
             if c is not None and hasattr(c, "_attn_implementation")}
    return list(found.values())


def inner_name(name: str | None) -> str:
    """The model's own implementation under a (possibly wrapped) ``_attn_implementation``."""
    name = name or "eager"
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


def _register(inner: str) -> str:
    """``rankcollapse:<inner>`` in transformers' attention and mask registries (once); its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if inner not in WRAPPED:
        raise RankCollapseError(f"attention implementation {inner!r} cannot be wrapped; allowed: "
                                f"{', '.join(WRAPPED)}")
    name = PREFIX + inner
    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, stats_attention_forward)
    if name not in AttentionMaskInterface._global_mapping:
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[inner])
    return name


@contextlib.contextmanager
def recording(hf_model: nn.Module, recorder: Recorder) -> Iterator[Recorder]:
    """Inside: every attention call of ``hf_model`` goes through :func:`stats_attention_forward`, which
    records into ``recorder`` (statistics, or the probe's verdicts) and returns the model's own output.
    Every config's ``_attn_implementation`` is restored on leaving (also on an error)."""
    configs = model_configs(hf_model)
    before = [c._attn_implementation for c in configs]
    names = [_register(inner_name(b)) for b in before]  # refuses an unknown implementation before any change
    token = _ACTIVE.set(recorder)
    try:
        for c, name in zip(configs, names, strict=True):
            c._attn_implementation = name
        yield recorder
    finally:
        _ACTIVE.reset(token)
        for c, b in zip(configs, before, strict=True):
            c._attn_implementation = b


def _inner(module: nn.Module, name: str) -> Callable[..., tuple[Tensor, Any]]:
    """The model's own attention function ``name``: transformers' registered one, or the module's own
    ``eager_attention_forward`` (its modeling file's, which the model passes as the default)."""
    from transformers import AttentionInterface

    if name != "eager":
        return AttentionInterface._global_mapping[name]
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        raise RankCollapseError(f"{type(module).__name__} has no eager_attention_forward; its attention "
                                "cannot be wrapped")
    return eager


def _window_mask(n_q: int, n_k: int, window: int, device: torch.device) -> Tensor:
    """A causal sliding window as flash kernels read ``sliding_window`` W: keys ``i - W < j <= i``."""
    i = torch.arange(n_q, device=device)[:, None]
    j = torch.arange(n_k, device=device)[None]
    return ((j <= i) & (j > i - window))[None, None]


def stats_attention_forward(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Any,
                            *args: Any, **kwargs: Any) -> tuple[Tensor, Any]:
    """The registered function (module docstring): the model's own attention, its statistics recorded.
    query: [b, h, i, e]; key, value: [b, g, j, e] -> (output [b, i, h, e], the inner's weights or None)."""
    name = inner_name(getattr(getattr(module, "config", None), "_attn_implementation", None))
    inner = _inner(module, name)
    recorder = _ACTIVE.get()
    if recorder is None or args:
        return inner(module, query, key, value, attention_mask, *args, **kwargs)
    n_q, n_k = query.shape[2], key.shape[2]
    scale = kwargs.get("scaling")
    scale = float(query.shape[-1] ** -0.5 if scale is None else scale)
    is_causal = kwargs.get("is_causal")
    # only SDPA and flash kernels mask causally on their own (eager and flex apply the mask they are given)
    causal = (name == "sdpa" or name.startswith("flash")) and bool(
        getattr(module, "is_causal", True) if is_causal is None else is_causal)
    mask = attention_mask
    window = kwargs.get("sliding_window")
    if mask is None and name.startswith("flash") and window:
        mask, causal = _window_mask(n_q, n_k, int(window), query.device), False
    causal = causal and n_q > 1 and mask is None
    kmask = recorder.kernel_mask(mask, causal, n_q, n_k, query.dtype, query.device)
    call = Call(module, inner, name, query, key, value, attention_mask, kwargs, kmask, scale)
    if recorder.probe is not None:
        recorder.note(f"probe ({name})")
        return recorder.probe(call)
    softcap, bias, s_aux = kwargs.get("softcap"), kwargs.get("position_bias"), kwargs.get("s_aux")
    if softcap is not None or bias is not None or kmask.biased:
        why = "soft-capped logits" if softcap is not None else "a position bias"
        rows = rows_in_blocks(query, key, kmask, scale, bias=bias, softcap=softcap, s_aux=s_aux)
        recorder.rows.append(rows)
        recorder.note(f"blocks ({why}; output {name})")
        return call.run_inner()
    own = name == "sdpa" and s_aux is None and not kwargs.get("dropout")
    out, rows = attention_with_stats(query, key, value, kmask, scale, s_aux=s_aux, output=own)
    recorder.rows.append(rows)
    recorder.note(f"kernel (output {'of the same kernel call, ' if own else ''}{name})")
    if out is not None:
        return out.transpose(1, 2).contiguous(), None
    return call.run_inner()
