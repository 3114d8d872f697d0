"""The hidden states ``X(0), X(1), ..., X(L)`` of one batch, layer by layer, each layer with its own mask.

Row ``t = 0`` is the embeddings output (the input of the first layer, named ``embeddings``);
row ``t >= 1`` is the output of the ``t``-th layer applied (``layer_{t}_out``), which is model
layer ``(t - 1) mod n_layers``. For pre-LN decoders and T5 the rows are the residual stream
before the final norm; Hugging Face's last ``hidden_states`` element is ``final_norm`` of it.
What other tools call each row: :mod:`rankcollapse.models.names`. A run's samples go through in
batches (:func:`iter_batches`, :class:`Batch`), each batch on the model's device when it is its turn.

Masks: by default each model layer uses its own, as its config defines it
(:func:`rankcollapse.masks.hf_schedule.schedule_from_hf_config`: causal or complete, Mistral's and
Qwen2's sliding windows, Gemma's local/global layers). A user mask applies to every layer; a user
schedule (``causal-window:w=3;causal``, cycled) must have a period that divides the model's depth or ``L``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.execution import batch_slices
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.runtime import trim_heap_every
from rankcollapse.edge.validate import quote
from rankcollapse.masks import Mask, parse_mask
from rankcollapse.masks.export import to_hf_additive
from rankcollapse.masks.schedule import MaskSchedule, is_schedule_spec, parse_schedule
from rankcollapse.models.loading import LoadedModel
from rankcollapse.models.lse_attention import KernelMask, kernel_mask
from rankcollapse.models.names import tl_hook_name  # noqa: F401  (re-exported)
from rankcollapse.models.parts import MODES, NO_POSITIONS, run_block

BACKENDS: tuple[str, ...] = ("auto", "hf", "parts")


def additive_mask(mask: Tensor, dtype: torch.dtype) -> Tensor | None:
    """Hugging Face eager form of a bool mask, :func:`~rankcollapse.masks.export.to_hf_additive` (0 where
    allowed, ``finfo.min`` elsewhere): ``[i, j]`` -> ``[1, 1, i, j]``, a per-sample ``[b, 1, i, j]`` as it is.

    None for the complete mask (HF passes None too). ``exp(finfo.min - max)`` is exactly 0, so
    masked weights are exactly 0, as with the reference ``where(M, S, -inf)``.
    """
    if bool(mask.all()):
        return None
    additive = to_hf_additive(mask, dtype)
    return additive[None, None] if mask.ndim == 2 else additive


def _on(device: torch.device, mask: Tensor | None) -> Tensor | None:
    """A mask (built on the CPU) on the device of the hidden states."""
    return None if mask is None else mask.to(device)


@dataclass(frozen=True)
class Batch:
    """One batch of a run's samples: ``rows`` (which samples, in order), ``ids`` int64 [b', n] (a vision
    encoder's: the pixel values [b', C, H, W]) and
    ``attention_mask`` [b', n] (or None) on the run's device, ``size`` the samples it holds.

    A batch of one sample out of several runs as two copies of it (``b' = 2``; :meth:`real` keeps the
    first): with a batch dimension of 1 torch's matmul multiplies the attention heads as strided
    views instead of copies, another BLAS kernel that rounds differently; with the copy every batch
    computes each sample's states exactly as one batch of all samples would (float64 and float32, on
    the CPU; cuBLAS may pick kernels by batch size, so on CUDA batches agree to rounding only).
    """

    rows: slice
    ids: Tensor
    attention_mask: Tensor | None
    size: int

    def real(self, x: Tensor) -> Tensor:
        """The rows of ``x [b', ...]`` that belong to the batch's samples ([size, ...])."""
        return x if x.shape[0] == self.size else x[: self.size]


def iter_batches(ids: Tensor, batch_size: int | None, device: torch.device | str = "cpu",
                 attention_mask: Tensor | None = None) -> Iterator[Batch]:
    """The samples of ``ids`` [b, n] (or a vision encoder's pixel values [b, C, H, W]) in batches of
    ``batch_size`` (None: one batch;
    :func:`rankcollapse.core.execution.batch_slices`), each moved to ``device`` when it is its turn."""
    total = int(ids.shape[0])
    for rows in batch_slices(total, batch_size):
        part, mask = ids[rows], None if attention_mask is None else attention_mask[rows]
        size = int(part.shape[0])
        if size == 1 and total > 1:
            part = part.repeat(2, *([1] * (part.ndim - 1)))
            mask = None if mask is None else mask.repeat(2, 1)
        yield Batch(rows, part.to(device), None if mask is None else mask.to(device), size)


def hidden_state_name(t: int) -> str:
    """``embeddings`` for row 0, ``layer_{t}_out`` for the output of the t-th layer applied (1-based)."""
    return "embeddings" if t == 0 else f"layer_{t}_out"


def check_d_qk(d_qk: float | None) -> None:
    if d_qk is not None and not (isinstance(d_qk, int | float) and d_qk > 0 and math.isfinite(d_qk)):
        raise RankCollapseError(f"d_qk must be a positive finite number, got {str(d_qk)[:30]}")


def user_schedule(mask: Mask | MaskSchedule | str | Any | None) -> MaskSchedule | None:
    """A user's mask or schedule as a schedule (None: the model's own). A spec with ``;``, ``*`` or
    ``[`` is a schedule (:mod:`rankcollapse.masks.schedule`), any other a mask; a predicate
    ``f(i, j)`` or a bool tensor is a mask (:mod:`rankcollapse.masks.custom`), a list one mask per layer."""
    if mask is None or isinstance(mask, MaskSchedule):
        return mask
    if isinstance(mask, str) and not is_schedule_spec(mask):
        mask = parse_mask(mask)
    return parse_schedule(mask)


def layer_masks(model: LoadedModel, mask: Mask | MaskSchedule | str | None, depth: int) -> list[Mask]:
    """The mask of each layer applied, t = 1..depth (index t - 1). RankCollapseError (one line)
    when a user schedule's period fits neither 1, the model's depth nor ``depth``."""
    n_layers = max(model.n_model_layers or len(model.layers), 1)
    sched = user_schedule(mask)
    if sched is None:
        return [model.own_layer_mask(t % n_layers) for t in range(depth)]
    p = len(sched.period)
    if n_layers % p and (depth % p or depth == 0):
        raise RankCollapseError(
            f"mask schedule {quote(sched.spec)} has period {p}, which does not divide the model's depth "
            f"({n_layers} layers) nor --layers {depth}; allowed: a period dividing {n_layers} or {depth}"
        )
    return [sched.period[t % p] for t in range(depth)]


def is_own_mask(model: LoadedModel, mask: Mask | MaskSchedule | str | None, n: int) -> bool:
    """True when ``mask`` at length ``n`` gives every model layer its own mask (None: always)."""
    if mask is None:
        return True
    n_layers = max(model.n_model_layers or len(model.layers), 1)
    given = layer_masks(model, mask, n_layers)
    return all(bool(torch.equal(g.dense(n), model.own_layer_mask(t).dense(n))) for t, g in enumerate(given))


def choose_backend(model: LoadedModel, mode: str, mask_is_own: bool, d_qk: float | None, backend: str) -> str:
    """``hf`` (the model's own layer modules) or ``parts`` (:func:`run_block`) for this run.

    ``auto`` picks ``hf`` exactly when it computes the same function as the parts: mode ``full``,
    the model's own masks and ``d_qk``, and parts extracted with Hugging Face's casts (always
    except the RMSNorm / float32-softmax families in float64, where the parts compute in float64
    and HF partly in float32). A model we do not dissect runs ``hf`` only.
    """
    if backend not in BACKENDS:
        raise RankCollapseError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    own_d = d_qk is None or float(d_qk) == model.own_d_qk  # every layer of a model has the same d_qk
    hf_ok = mode == "full" and mask_is_own and own_d
    if backend == "hf" and not hf_ok:
        raise RankCollapseError("backend 'hf' runs only mode 'full' with the model's own mask and d_qk")
    if not model.dissected:
        if not hf_ok or backend == "parts":
            what = (f"mode {mode!r}" if mode != "full"
                    else ("backend 'parts'" if hf_ok else "a mask or d_qk override"))
            raise RankCollapseError(f"{model.arch!r} is not dissected (full mode through Hugging Face's "
                                    f"forward only); {what} needs a dissected family")
        return "hf"
    if backend == "auto":
        return "hf" if hf_ok and model.info.get("hf_casts", True) else "parts"
    return backend


def fusable(model: LoadedModel, dtype: torch.dtype) -> bool:
    """True when torch's fused attention computes the same function as the eager one the model was
    loaded with, at ``dtype``: the model has an SDPA path, no logit soft-capping, and every layer's
    eager softmax runs in ``dtype`` itself (float32 always; float64 except where Hugging Face's eager
    softmax rounds to float32, Llama's family, which only eager reproduces). An undissected model:
    float32 only."""
    if not getattr(model.hf_model, "_supports_sdpa", False):
        return False
    if not model.dissected:
        return dtype == torch.float32
    return all(p.logit_softcap is None and p.softmax_dtype in (None, dtype) for p in model.layers)


@contextlib.contextmanager
def fused_attention(model: LoadedModel, on: bool = True) -> Iterator[None]:
    """Inside: the model's attention runs through torch's ``scaled_dot_product_attention`` (Hugging
    Face's ``sdpa``, its default) instead of the eager softmax it was loaded with, then back to eager
    (also on an error). Use it where :func:`fusable`: the same scores, mask and softmax without the
    [b, h, n, n] weights in memory, so the ``hf`` backend runs at the model's own default speed. The
    attention weights (diagnostics, the sinks ablation) always come from the parts. ``on=False``: no-op.
    """
    hf = model.hf_model
    if not on:
        yield
        return
    configs = {id(c): c for c in [hf.config, *(getattr(m, "config", None) for m in hf.modules())]
               if hasattr(c, "_attn_implementation")}
    before = {k: c._attn_implementation for k, c in configs.items()}
    try:
        for c in configs.values():
            c._attn_implementation = "sdpa"
        yield
    finally:
        for k, c in configs.items():
            c._attn_implementation = before[k]


@contextlib.contextmanager
def hooks_as_they_were(hf_model: torch.nn.Module) -> Iterator[None]:
    """Inside: a Hugging Face forward may install its own forward hooks (transformers installs its
    output-capturing hooks on every layer the first time hidden states are asked for, and marks the model
    ``_output_capturing_hooks_installed``); on leaving, those added are removed and the marks put back,
    so a model given to ``analyze`` keeps exactly its own hooks."""
    modules = list(hf_model.modules())
    before = [(m, set(m._forward_hooks), set(m._forward_pre_hooks),
               m.__dict__.get("_output_capturing_hooks_installed", _ABSENT)) for m in modules]
    try:
        yield
    finally:
        for m, hooks, pre, mark in before:
            for key in set(m._forward_hooks) - hooks:
                del m._forward_hooks[key]
                m._forward_hooks_with_kwargs.pop(key, None)
                m._forward_hooks_always_called.pop(key, None)
            for key in set(m._forward_pre_hooks) - pre:
                del m._forward_pre_hooks[key]
                m._forward_pre_hooks_with_kwargs.pop(key, None)
            if mark is _ABSENT:
                m.__dict__.pop("_output_capturing_hooks_installed", None)
            else:
                m.__dict__["_output_capturing_hooks_installed"] = mark


_ABSENT = object()


def _full_only(model: LoadedModel, ids: Tensor, depth: int, attention_mask: Tensor | None,
               record: dict[str, Any] | None = None) -> Iterator[tuple[int, str, Tensor]]:
    """An undissected model's states from Hugging Face's own forward; with ``record``, each layer's
    per-query attention rows from the registered attention function
    (:func:`~rankcollapse.models.stats_interface.recording`), one call per layer."""
    from rankcollapse.models.stats_interface import Recorder, recording

    if depth != model.n_model_layers:
        raise RankCollapseError(f"{model.arch!r} is not dissected: --layers must be its depth "
                                f"({model.n_model_layers}), got {depth}")
    dtype = next(model.hf_model.parameters()).dtype
    recorder = Recorder()
    stats = recording(model.hf_model, recorder) if record is not None else contextlib.nullcontext()
    with torch.inference_mode(), fused_attention(model, fusable(model, dtype)), stats, \
            hooks_as_they_were(model.hf_model):
        states = model.hf_model(**{model.input_name: ids}, attention_mask=attention_mask,
                                output_hidden_states=True).hidden_states
    if record is not None and len(recorder.rows) != len(states) - 1:
        raise RankCollapseError(f"{len(recorder.rows)} attention calls went through Hugging Face's "
                                f"AttentionInterface in {len(states) - 1} layers of {model.arch!r}; the "
                                "diagnostics need one per layer")
    for t, x in enumerate(states):
        if record is not None and t > 0:
            record["rows"] = recorder.rows[t - 1]
        yield t, hidden_state_name(t), x


def _layer_mask(mask: Mask, n: int) -> Tensor:
    """``mask.dense(n)``, refused (one line) without every self-loop."""
    bool_mask = mask.dense(n)
    if not bool(bool_mask.diagonal().all()):
        i = int((~bool_mask.diagonal()).nonzero()[0])
        raise RankCollapseError(
            f"mask {quote(mask.spec)} has no self-loop at token {i} (n = {n}); every token must attend "
            "to itself (the paper's assumption A1)"
        )
    return bool_mask


def text_lengths(attention_mask: Tensor | None, n: int) -> list[int] | None:
    """Each sample's number of real tokens from a right-padding ``attention_mask`` [b, n] (1s then
    0s); None without padding. Any other pattern is refused (one line)."""
    if attention_mask is None:
        return None
    valid = attention_mask.bool().cpu()
    if bool(valid.all()):
        return None
    if not bool(valid[:, 0].all()) or bool((valid[:, 1:] & ~valid[:, :-1]).any()):
        raise RankCollapseError("attention_mask must be right padding (1s then 0s in every sample)")
    return [int(v) for v in valid.sum(1)]


def padded_mask(mask: Mask, lengths: list[int], n: int) -> Tensor:
    """bool [b, 1, n, n] for a right-padded batch: sample b's real tokens ``0..L_b-1`` get
    ``mask.dense(L_b)``, the rule evaluated at the text's own length (a random mask draws for L_b, a
    predicate is called at L_b, a tensor gives its top-left block, a fixed-length mask refuses a
    text of another length), and a padding token attends only to itself. So no real token attends
    to padding, and each text's real states are those of the text run alone."""
    out = torch.eye(n, dtype=torch.bool).repeat(len(lengths), 1, 1)
    for length in sorted(set(lengths)):
        rows = [b for b, L in enumerate(lengths) if L == length]
        out[rows, :length, :length] = _layer_mask(mask, length)
    return out[:, None]


def iter_hidden_states(
    model: LoadedModel,
    ids: Tensor,
    *,
    mode: str = "full",
    mask: Mask | MaskSchedule | str | None = None,
    d_qk: float | None = None,
    layers: int | None = None,
    backend: str = "auto",
    sink_damping: float | None = None,
    record: dict[str, Any] | None = None,
    attention_mask: Tensor | None = None,
    chunk: int | None = None,
    kernel_stats: bool = False,
) -> Iterator[tuple[int, str, Tensor]]:
    """Yield ``(t, name, X(t))`` for t = 0..L; X: [b, n, d] in the model's dtype. Only the current
    state is kept (copy a tensor to keep it).

    ids: int64 [b, n], or a vision encoder's pixel values [b, C, H, W] (``model.image``: n is its CLS
    and patch tokens; an image of another size than the config's reads the learned positions
    interpolated, :func:`~rankcollapse.models.images.interpolate_positions`; a shape it cannot read or a
    non-finite value refused in one line). ``mask``: a
    :class:`~rankcollapse.masks.Mask` or schedule for every layer
    (a spec string is parsed here, once; None: each layer's own, module docstring). ``d_qk``: the
    number under the square root of the logits, ``S = q k^T / sqrt(d_qk) (+ position bias)``
    (None: each layer's own). ``layers``: L (default: the model's depth), cycling the model's
    layers. ``sink_damping``: the ``sinks`` ablation (:func:`~rankcollapse.models.parts.attention`).
    ``record``: a dict that holds, after each layer's row is yielded, that layer's attention
    weights under ``"attn"`` [b, h, n, n] (forces the parts backend). ``chunk`` c (with ``record``):
    each layer forms its weights c query rows at a time instead, and ``record`` holds their per-query
    reductions under ``"rows"`` (:class:`~rankcollapse.metrics.diagnostics.AttentionRows`; memory: one
    block ``[b, h, c, n]``, :func:`~rankcollapse.models.parts.attention`). ``kernel_stats`` (with
    ``record``, not ``chunk``): the same ``"rows"``, exactly, from each layer's fused kernel call and its
    row log-normaliser, no weights formed, on any backend and any model whose attention goes through
    Hugging Face's ``AttentionInterface`` (dissected or not): the ``hf`` backend and an undissected model
    through the registered attention function (:mod:`~rankcollapse.models.stats_interface`), the
    ``parts`` backend through :func:`~rankcollapse.models.lse_attention.attention_with_stats`.
    ``attention_mask``: [b, n], 1 for real tokens, 0 for padding (right-padded batches of texts of
    different lengths): each layer's mask of a text of ``L_b`` real tokens is its mask at length
    ``L_b`` on those tokens and only ``i = j`` for a padding query (:func:`padded_mask`), so no real
    token attends to a padding token and the real tokens' states equal those of the unpadded text;
    the padding rows are meaningless.
    """
    if mode not in MODES:
        raise RankCollapseError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    check_d_qk(d_qk)
    n = model.n_tokens(ids)
    if model.image is None and n > model.max_tokens:  # an image of another size: positions interpolated
        raise RankCollapseError(
            f"--tokens {n} exceeds the context of {model.name!r} ({model.max_tokens} tokens)"
        )
    n_layers = model.depth
    depth = n_layers if layers is None else int(layers)
    if depth < 0:
        raise RankCollapseError(f"layers must be >= 0, got {layers}")
    masks = layer_masks(model, mask, depth)
    if kernel_stats and (record is None or chunk is not None):
        raise RankCollapseError("kernel_stats applies only with record and without chunk")
    surgery = sink_damping is not None or (record is not None and not kernel_stats)
    if chunk is not None and record is None:
        raise RankCollapseError("chunk (query rows per block of attention weights) applies only with record")
    if surgery and not model.dissected:
        raise RankCollapseError(f"{model.arch!r} is not dissected: whole attention maps, blocks of rows and "
                                "the sinks ablation need a dissected family (diagnostics from the kernel, "
                                "kernel_stats=True, do not)")
    if surgery and backend == "hf":
        raise RankCollapseError("backend 'hf' does not apply with diagnostics or the sinks ablation")
    which = choose_backend(model, mode, is_own_mask(model, mask, n), d_qk, "parts" if surgery else backend)
    if which == "hf" and not model.dissected:
        yield from _full_only(model, ids, depth, attention_mask, record if kernel_stats else None)
        return
    dense: dict[int, Tensor | None] = {}
    lengths = text_lengths(attention_mask, n)
    for m in masks:
        if id(m) not in dense:
            dense[id(m)] = _layer_mask(m, n) if lengths is None else padded_mask(m, lengths, n)
    with torch.inference_mode():
        x = model.embed(ids)
        pos = model.positions(x) if model.positions is not None else NO_POSITIONS
        ready = {k: _on(x.device, additive_mask(v, x.dtype) if which == "hf"
                        else (None if bool(v.all()) else v))
                 for k, v in dense.items()}
        yield 0, hidden_state_name(0), x
        fused = which == "hf" and fusable(model, x.dtype)
        plain_causal: dict[int, bool] = {}
        if fused or kernel_stats:  # an [n, n] comparison only where it is used
            causal = torch.ones(n, n, dtype=torch.bool).tril()
            plain_causal = {k: v.ndim == 2 and bool(torch.equal(v, causal)) for k, v in dense.items()}
            del causal
        kernels = ({k: _kernel_mask(v, plain_causal[k], x) for k, v in dense.items()}
                   if kernel_stats and which == "parts" else {})
        recorder = None
        if kernel_stats and which == "hf":
            from rankcollapse.models.stats_interface import Recorder

            recorder = Recorder()
        for t in range(1, depth + 1):
            parts = model.layers[(t - 1) % n_layers]
            m = ready[id(masks[t - 1])]
            if fused and parts.hf_causal and plain_causal[id(masks[t - 1])]:
                m = None  # the module's own causal mask: the fused kernel skips the masked half
            if which == "hf":
                with fused_attention(model, fused):  # per layer: the caller runs between yields
                    x = _hf_layer(model, parts, x, m, pos, recorder, record)
            else:
                x = run_block(parts, x, mode, m, d_qk, pos, sink_damping, record, chunk,
                              kernels.get(id(masks[t - 1])))
            trim_heap_every(t)
            yield t, hidden_state_name(t), x


def _kernel_mask(mask: Tensor, plain_causal: bool, x: Tensor) -> KernelMask:
    """A layer's bool mask ``[n, n]`` or ``[b, 1, n, n]`` as the fused kernel takes it: none for the
    complete mask, the kernel's own causal mask for plain causal (it skips the masked half), else additive
    in x's dtype on x's device."""
    n = mask.shape[-1]
    if plain_causal or bool(mask.all()):
        return kernel_mask(None, plain_causal, n, n, x.dtype, x.device)
    return kernel_mask(mask.to(x.device), False, n, n, x.dtype, x.device)


def _hf_layer(model: LoadedModel, parts: Any, x: Tensor, mask: Tensor | None, pos: Any,
              recorder: Any, record: dict[str, Any] | None) -> Tensor:
    """One layer through the model's own module; with a recorder, its attention call through the
    registered attention function, whose rows go to ``record["rows"]``."""
    if recorder is None:
        return parts.hf_forward(x, mask, pos)
    from rankcollapse.models.stats_interface import recording

    with recording(model.hf_model, recorder):
        out = parts.hf_forward(x, mask, pos)
    if record is not None:
        record["rows"] = recorder.take()
    return out
