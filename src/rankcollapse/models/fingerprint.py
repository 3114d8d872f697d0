"""The mask an attention kernel really applies, per layer (ours): probed through the model's own
attention function, called with the layer's own mask arguments, in ``O(n e)`` per head and row.

Index letters: b batch, h heads, g key/value heads, i queries, j keys, e per-head features. The model runs
its own forward (``input_ids`` and its own ``attention_mask``, so it builds its own masks: causal, sliding
windows, local/global layer types, padding) with every attention call going through the registered
function of :mod:`rankcollapse.models.stats_interface`, which hands each call to :func:`probe_call`
instead of computing attention:

- **count**: the kernel's row log-normaliser with ``q = 0`` (every allowed logit 0) is ``log |N_i|``
  (:func:`~rankcollapse.metrics.attention_stats.allowed_keys`; torch's fused kernel on the call's mask as
  the model hands it: its tensor, its ``is_causal``, a ``BlockMask``'s ``mask_mod``, a flash kernel's
  ``sliding_window``);
- **ends**: the model's own function (``sdpa``, ``eager``, ``flex_attention``, ...) on ``q = +-1``,
  ``k_j = TILT j / scale``, values ``[j - c, 1]``: logits ``+-TILT j`` put all but ``e^-TILT`` of each
  row's weight on its last (``+``) or first (``-``) allowed key, so the output is that key
  (:func:`~rankcollapse.metrics.attention_stats.key_ends`; query heads alternate the sign). A row is the
  interval ``[lo, hi]`` iff ``|N_i| = hi - lo + 1``: causal, sliding-window and chunked masks are read
  back exactly, in float32 (float64 for a float64 model) for any ``n`` below ``2^22``;
- **one-hot value blocks**, only where a row (read, or as the config defines it) is not one interval:
  ``q = k = 0`` and values the identity on ``e`` keys at a time give the row's weights on those keys,
  its support exactly (``n / e`` calls of the model's function, ``O(n^2)``).

Soft-capping and a position bias are not masks: the probe passes neither (they would bend the tilt).
The layer's attention output is replaced by zeros (the masks a model builds do not depend on its hidden
states), so a probe costs about one attention call per layer, less than a forward.

:func:`check_masks` compares each layer's read-back with the mask the layer's config defines
(``LoadedModel.own_layer_mask``), at each sample's own length (a right-padded sample: the real queries,
whose keys must be real tokens), and reports per layer a :class:`MaskFingerprint`: the first row that
differs, its keys as the kernel applies them and as the mask allows them, and the offset of its ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.base import Mask
from rankcollapse.metrics.attention_stats import TILT, KeyIntervals, allowed_keys, key_ends
from rankcollapse.models.lse_attention import attention_lse, kernel_mask
from rankcollapse.models.stats_interface import Call, Recorder, model_configs, recording, supports_interface
from rankcollapse.models.stream import (
    fusable,
    fused_attention,
    hooks_as_they_were,
    iter_batches,
    text_lengths,
)

__all__ = ["EXAMPLES", "LayerProbe", "MaskFingerprint", "check_masks", "compare_layer", "probe_call"]

#: Examples of differing (query, key) pairs a fingerprint lists.
EXAMPLES = 5

#: Keywords a probe does not pass to the model's function: they change the logits, not the mask.
NOT_MASKS = ("softcap", "position_bias", "dropout")


@dataclass(frozen=True)
class LayerProbe:
    """What one attention call's probe read. ``ends``:
    :class:`~rankcollapse.metrics.attention_stats.KeyIntervals` ``[b, p, i]`` (p pairs of query heads, one
    tilted up, one down); ``support``: bool ``[b, i, j]``, the keys
    some head weighs (one-hot value blocks), or None where every row was one interval; ``implementation``:
    the model's own function probed."""

    ends: KeyIntervals
    support: Tensor | None
    implementation: str


@dataclass(frozen=True)
class MaskFingerprint:
    """One layer's mask as its attention kernel applies it, against the mask its config defines.

    ``outside``: (sample, query, key) triples the kernel lets through that the mask does not allow;
    ``zero_inside``: allowed ones it leaves out (both over the real queries of every sample, the largest
    over heads). ``first``: (sample, query) of the first row that differs; ``expected`` / ``got``: that
    row's first and last key as the mask allows them and as the kernel applies them; ``offset``: ``got -
    expected`` for (first, last) key (a window one key too wide: ``(-1, 0)``). ``method``: ``intervals``
    (every row read back from its count and ends) or ``one-hot blocks`` (some row is not one interval)."""

    layer: int
    spec: str
    n: int
    implementation: str
    rows: int
    outside: int
    zero_inside: int
    first: tuple[int, int] | None = None
    expected: tuple[int, int] | None = None
    got: tuple[int, int] | None = None
    offset: tuple[int, int] | None = None
    method: str = "intervals"
    outside_examples: list[tuple[int, int]] = field(default_factory=list)
    zero_inside_examples: list[tuple[int, int]] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return self.outside == 0 and self.zero_inside == 0

    def describe(self) -> str:
        where = f"layer {self.layer}"
        if self.matches:
            return (f"{where}: the kernel ({self.implementation}) applies {self.spec} (n = {self.n}, "
                    f"{self.rows} rows, {self.method})")
        text = f"{where}: the kernel ({self.implementation}) differs from {self.spec} (n = {self.n})"
        if self.first is not None:
            sample, query = self.first
            text += f": sample {sample}, query {query} attends keys {_span(self.got)}, the mask allows "
            text += f"{_span(self.expected)}"
            if self.offset is not None:
                text += f" (offset {self.offset[0]:+d}, {self.offset[1]:+d})"
        return (text + f"; {self.outside} keys attended outside the mask (e.g. {self.outside_examples}), "
                f"{self.zero_inside} allowed keys left out (e.g. {self.zero_inside_examples})")


def _span(ends: tuple[int, int] | None) -> str:
    return "none" if ends is None else f"[{ends[0]}, {ends[1]}]"


def _probe_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for a float64 model, float32 otherwise (bf16 and fp16 cannot hold positions)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _cast_mask(mask: Any, dtype: torch.dtype) -> Any:
    """A call's mask argument in the probe's dtype (a float tensor cast; bool, None and a BlockMask as
    they are): the same allowed keys."""
    if isinstance(mask, Tensor) and mask.is_floating_point() and mask.dtype != dtype:
        return mask.to(dtype)
    return mask


def probe_call(call: Call, support: bool = False) -> LayerProbe:
    """Probe one attention call (module docstring): the count of allowed keys per row through the fused
    kernel at ``q = 0``, the first and last allowed key through the model's own function, and, where some
    row is not one interval (or ``support``), the exact support from one-hot value blocks."""
    q = call.query
    b, h, n_q, e = q.shape
    g, n_k = call.key.shape[1], call.key.shape[2]
    if e < 2:
        raise RankCollapseError(f"a head of {e} feature cannot carry the mask probe; allowed: 2 or more")
    dtype = _probe_dtype(q.dtype)
    mask_arg = _cast_mask(call.attention_mask, dtype)
    kwargs = {k: v for k, v in call.kwargs.items() if k not in NOT_MASKS}
    additive = None if call.mask.additive is None else call.mask.additive.to(dtype)
    km = call.mask if q.dtype == dtype else kernel_mask(additive, call.mask.causal, n_q, n_k, dtype, q.device)
    zeros = torch.zeros(b, 1, n_k, 8, dtype=dtype, device=q.device)
    _, lse = attention_lse(zeros[:, :, :n_q], zeros, zeros, km, 1.0)
    count = allowed_keys(lse)  # [b, 1, i]
    j = torch.arange(n_k, dtype=dtype, device=q.device)
    center = n_k // 2
    keys = torch.zeros(b, g, n_k, e, dtype=dtype, device=q.device)
    keys[..., 0] = TILT * j / call.scale
    values = torch.zeros(b, g, n_k, e, dtype=dtype, device=q.device)
    values[..., 0] = j - center
    values[..., 1] = 1.0

    def ends(sign: Tensor) -> Tensor:
        queries = torch.zeros(b, h, n_q, e, dtype=dtype, device=q.device)
        queries[..., 0] = sign.to(dtype).reshape(1, h, 1)
        out = call.inner(call.module, queries, keys, values, mask_arg, **kwargs)[0]  # [b, i, h, e]
        out = out.transpose(1, 2).to(torch.float64)
        return out[..., 0] / out[..., 1]  # [b, h, i]: the softmax's rounding divided out

    if h >= 2:
        signs = torch.tensor([1.0 if k % 2 == 0 else -1.0 for k in range(h)])
        both = ends(signs)
        pairs = h // 2
        top, bottom = both[:, 0: 2 * pairs: 2], both[:, 1: 2 * pairs: 2]
    else:
        top, bottom = ends(torch.ones(1)), ends(-torch.ones(1))
    read = key_ends(count.expand_as(top), top, bottom, center)
    seen = None
    if support or not bool((read.interval | (read.count == 0)).all()):
        seen = _support(call, mask_arg, kwargs, dtype)
    return LayerProbe(read, seen, call.inner_name)


def _support(call: Call, mask_arg: Any, kwargs: dict[str, Any], dtype: torch.dtype) -> Tensor:
    """The keys each row weighs, exactly: the model's own function with ``q = k = 0`` on values that are
    the identity on ``e`` keys at a time (``n / e`` calls). bool [b, i, j], the union over heads."""
    b, h, n_q, e = call.query.shape
    g, n_k = call.key.shape[1], call.key.shape[2]
    device = call.query.device
    queries = torch.zeros(b, h, n_q, e, dtype=dtype, device=device)
    keys = torch.zeros(b, g, n_k, e, dtype=dtype, device=device)
    seen = torch.zeros(b, n_q, n_k, dtype=torch.bool, device=device)
    for start in range(0, n_k, e):
        width = min(e, n_k - start)
        values = torch.zeros(b, g, n_k, e, dtype=dtype, device=device)
        values[:, :, start: start + width, :width] = torch.eye(width, dtype=dtype, device=device)
        out = call.inner(call.module, queries, keys, values, mask_arg, **kwargs)[0]  # [b, i, h, e]
        seen[:, :, start: start + width] = (out[..., :width] > 0).any(dim=2)
    return seen


def _expected(mask: Mask, length: int) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """The mask at ``length`` tokens: each row's first and last allowed key, its count, and its dense rows
    (None where every row is one interval: the mask's interval form, ``O(n)``)."""
    iv = mask.intervals(length)
    if iv is not None:
        start, stop = (torch.tensor(a, dtype=torch.float64) for a in iv)  # copies of the cached arrays
        return start, stop - 1, stop - start, None
    dense = mask.dense(length)
    cols = torch.arange(length)
    lo = torch.where(dense, cols, length).amin(-1).to(torch.float64)
    hi = torch.where(dense, cols, -1).amax(-1).to(torch.float64)
    return lo, hi, dense.sum(-1).to(torch.float64), dense


def compare_layer(layer: int, probe: LayerProbe, mask: Mask, lengths: list[int], n: int,
                  first_sample: int = 0) -> MaskFingerprint:
    """A layer's read-back against ``mask`` (the config's) for samples of ``lengths`` real tokens (right
    padding: their queries ``< L`` may attend keys ``< L`` only) in a batch of ``n`` tokens; the batch's
    samples are numbered from ``first_sample``."""
    outside = inside = rows = 0
    first = expected = got = offset = None
    out_ex: list[tuple[int, int]] = []
    in_ex: list[tuple[int, int]] = []
    method = ("intervals" if probe.support is None else "the eager maps' support"
              if probe.implementation == "eager maps" else "one-hot blocks")
    ends = probe.ends
    for s, length in enumerate(lengths):
        lo_e, hi_e, count_e, dense = _expected(mask, length)
        rows += length
        if probe.support is not None:
            want = dense if dense is not None else _dense_rows(lo_e, hi_e, length)
            have = probe.support[s, :length]
            extra = have.clone()
            extra[:, :length] &= ~want
            missing = want & ~have[:, :length]
            per_out, per_in = extra.sum(-1), missing.sum(-1)
            o_pairs = [(int(i), int(j)) for i, j in extra.nonzero()[:EXAMPLES]]
            i_pairs = [(int(i), int(j)) for i, j in missing.nonzero()[:EXAMPLES]]
        else:
            lo_g, hi_g = ends.lo[s, :, :length], ends.hi[s, :, :length]  # [p, i]
            ok = ends.interval[s, :, :length]
            over = (torch.clamp(lo_e - lo_g, min=0) + torch.clamp(hi_g - hi_e, min=0)).where(ok, ends.count[
                s, :, :length])
            under = (torch.clamp(lo_g - lo_e, min=0) + torch.clamp(hi_e - hi_g, min=0)).where(ok, count_e)
            per_out, per_in = over.amax(0), under.amax(0)
            o_pairs = [(i, int(lo_g[0, i]) if lo_g[0, i] < lo_e[i] else int(hi_g[0, i]))
                       for i in per_out.nonzero().flatten().tolist()[:EXAMPLES]]
            i_pairs = [(i, int(lo_e[i]) if lo_g[0, i] > lo_e[i] else int(hi_e[i]))
                       for i in per_in.nonzero().flatten().tolist()[:EXAMPLES]]
        outside += int(per_out.sum())
        inside += int(per_in.sum())
        if len(out_ex) < EXAMPLES:
            out_ex += o_pairs[: EXAMPLES - len(out_ex)]
        if len(in_ex) < EXAMPLES:
            in_ex += i_pairs[: EXAMPLES - len(in_ex)]
        bad = ((per_out > 0) | (per_in > 0)).nonzero().flatten()
        if first is None and bad.numel():
            i = int(bad[0])
            first = (first_sample + s, i)
            expected = (int(lo_e[i]), int(hi_e[i]))
            got = _got_ends(probe, s, i)
            offset = None if got is None else (got[0] - expected[0], got[1] - expected[1])
    return MaskFingerprint(layer=layer, spec=mask.spec, n=n, implementation=probe.implementation, rows=rows,
                           outside=outside, zero_inside=inside, first=first, expected=expected, got=got,
                           offset=offset, method=method, outside_examples=out_ex, zero_inside_examples=in_ex)


def _dense_rows(lo: Tensor, hi: Tensor, length: int) -> Tensor:
    cols = torch.arange(length, dtype=torch.float64)
    return (cols[None] >= lo[:, None]) & (cols[None] <= hi[:, None])


def _got_ends(probe: LayerProbe, sample: int, query: int) -> tuple[int, int] | None:
    """The first and last key the kernel applies to a row (the support's where it was read, else the
    first head pair's ends); None for a row with no key."""
    if probe.support is not None:
        keys = probe.support[sample, query].nonzero().flatten()
        return None if not keys.numel() else (int(keys[0]), int(keys[-1]))
    ends = probe.ends
    if not bool(ends.read[sample, 0, query]):
        return None
    return int(ends.lo[sample, 0, query]), int(ends.hi[sample, 0, query])


@contextlib.contextmanager
def implementation(hf_model: Any, name: str | None) -> Iterator[None]:
    """Inside: every config of the model names attention implementation ``name`` (None: as it is), back on
    leaving (also on an error)."""
    configs = model_configs(hf_model) if name is not None else []
    before = [c._attn_implementation for c in configs]
    try:
        for c in configs:
            c._attn_implementation = name
        yield
    finally:
        for c, b in zip(configs, before, strict=True):
            c._attn_implementation = b


def check_masks(model: Any, ids: Tensor, batch_size: int | None = None, *,
                attention_mask: Tensor | None = None, implementation_name: str | None = None,
                support: bool = False) -> list[MaskFingerprint]:
    """Per model layer: the mask the model's attention kernel applies on ``ids`` [b, n] (its own forward,
    its own masks; module docstring) against the mask the model's config defines for that layer. One
    :class:`MaskFingerprint` per layer (``.matches``, ``.describe()``).

    ``attention_mask`` [b, n]: right padding (1 real, 0 padding): each sample's real queries are compared at
    its own length, their keys limited to its real tokens. ``implementation_name``: the attention
    implementation probed (``eager``, ``sdpa``, ``flex_attention``; None: the one an ``analyze`` run takes,
    SDPA where it computes the eager function, else the model's own). ``batch_size``: samples per forward
    (None: all). ``support``: read every row's support by one-hot value blocks (``O(n^2)``), not only the
    rows that are not one interval. The model is left as it came (implementation, hooks)."""
    hf = model.hf_model
    dtype = next(hf.parameters()).dtype
    n = int(ids.shape[1])
    results: list[MaskFingerprint] | None = None
    for batch in iter_batches(ids, batch_size, model.device, attention_mask):
        lengths = text_lengths(batch.attention_mask, n) or [n] * batch.ids.shape[0]
        lengths = lengths[: batch.size]
        if not supports_interface(hf) and model.arch != "t5":
            got = _eager_maps(model, batch, lengths, n)
            results = got if results is None else [_merge(a, b) for a, b in zip(results, got, strict=True)]
            continue
        probes: list[LayerProbe] = []
        probe = _layer_prober(model, probes, n, support)

        own = implementation_name is None
        with torch.inference_mode(), fused_attention(model, own and fusable(model, dtype)), \
                implementation(hf, implementation_name), hooks_as_they_were(hf), \
                recording(hf, Recorder(probe=probe)):
            hf(**{model.input_name: batch.ids}, attention_mask=batch.attention_mask)
        if len(probes) != model.n_model_layers:
            raise RankCollapseError(f"{len(probes)} attention calls went through Hugging Face's "
                                    f"AttentionInterface in {model.n_model_layers} layers of {model.arch!r}; "
                                    "the mask check needs one per layer")
        got = [compare_layer(t, p, model.own_layer_mask(t), lengths, n, batch.rows.start)
               for t, p in enumerate(probes)]
        results = got if results is None else [_merge(a, b) for a, b in zip(results, got, strict=True)]
    return results or []


def _eager_maps(model: Any, batch: Any, lengths: list[int], n: int) -> list[MaskFingerprint]:
    """A model whose attention does not go through the ``AttentionInterface`` (MPNet, Falcon): the support
    of its eager ``output_attentions`` maps (``O(b h n^2)``), compared as the probe's support is."""
    with torch.inference_mode(), hooks_as_they_were(model.hf_model):
        out = model.hf_model(**{model.input_name: batch.ids}, attention_mask=batch.attention_mask,
                             output_attentions=True)
    maps = getattr(out, "attentions", None)
    if not maps:
        raise RankCollapseError(f"{model.arch!r} returns no attention weights and its attention does not go "
                                "through Hugging Face's AttentionInterface; its masks cannot be checked")
    empty = KeyIntervals(*(torch.zeros(1, 1, n, dtype=torch.float64) for _ in range(3)),
                         torch.zeros(1, 1, n, dtype=torch.bool), torch.zeros(1, 1, n, dtype=torch.bool))
    return [compare_layer(t, LayerProbe(empty, (a > 0).any(dim=1).cpu(), "eager maps"),
                          model.own_layer_mask(t), lengths, n, batch.rows.start) for t, a in enumerate(maps)]


def _layer_prober(model: Any, probes: list[LayerProbe], n: int, support: bool) -> Any:
    """The recorder's probe for one forward: each call is the next layer's (its config's mask says whether
    its rows need their support read); its output zeros, of the shape the model expects."""

    def probe(call: Call) -> tuple[Tensor, None]:
        mask = model.own_layer_mask(len(probes))
        probes.append(probe_call(call, support or mask.intervals(n) is None))
        b, h, n_q, _ = call.query.shape
        return call.query.new_zeros(b, n_q, h, call.value.shape[-1]), None

    return probe


def _merge(a: MaskFingerprint, b: MaskFingerprint) -> MaskFingerprint:
    """Two batches' fingerprints of one layer as one (the first batch's first difference kept)."""
    keep = a if a.first is not None or b.first is None else b
    return MaskFingerprint(layer=a.layer, spec=a.spec, n=a.n, implementation=a.implementation,
                           rows=a.rows + b.rows, outside=a.outside + b.outside,
                           zero_inside=a.zero_inside + b.zero_inside, first=keep.first,
                           expected=keep.expected, got=keep.got, offset=keep.offset,
                           method="one-hot blocks" if "one-hot blocks" in (a.method, b.method) else a.method,
                           outside_examples=(a.outside_examples + b.outside_examples)[:EXAMPLES],
                           zero_inside_examples=(a.zero_inside_examples + b.zero_inside_examples)[:EXAMPLES])
