"""What ``analyze`` measures next to collapse, and the check that a model applies the masks it should.

- :func:`diagnostic_stats`: the columns ``--diagnostics`` adds to a row, from that layer's
  attention weights ``A [b, h, n, n]`` and its output ``X [b, n, d]`` (the reference; an ``analyze``
  run computes the same from per-query reductions of ``A``, :func:`chunked_diagnostic_values`: exactly
  from each layer's fused kernel call and its row log-normaliser, or from ``A`` formed in blocks of query
  rows where the logits have no lse form; which one: :func:`diagnostics_path`)
  (:mod:`rankcollapse.metrics.diagnostics`, means over samples): ``attention_entropy`` (mean over
  heads) and ``attention_entropy_h{k}`` per head, ``normalized_attention_entropy``,
  ``first_token_attention`` (mean over heads) and ``first_token_attention_h{k}`` per head,
  ``sink_rate`` (share of heads whose mean attention on the first token exceeds the threshold,
  per sample, then averaged), ``sink_heads`` (which heads: those whose ``first_token_attention_h{k}``
  exceeds the threshold, space-separated, ``""`` for none); the key-bias reading of sinks (Gu et al., ICLR
  2025) from the same layer's queries and keys as its attention function receives them (after the rotary
  embedding): ``first_key_cos`` (mean over heads) and ``first_key_cos_h{k}`` per head, ``key_cos`` and
  ``key_cos_h{k}`` (its baseline, the keys ``j >= 1``), ``first_key_norm``, ``key_norm`` and
  ``query_norm`` (means over heads; :data:`~rankcollapse.metrics.diagnostics.QUERY_KEY_NAMES`);
  ``first_token_norm``, ``top_activation`` (the largest ``|x|``) and ``massive_ratio`` (largest over median
  ``|x|``). Row 0 (no attention): the attention and key-bias columns are NaN (``sink_heads`` ``""``). The
  kernel and blocks paths take the key-bias columns with the attention rows
  (:class:`~rankcollapse.metrics.diagnostics.QueryKeyRows`); the map path takes them from the queries and
  keys given beside the map (``qk``: :func:`diagnostic_values`), NaN where none are given.
- :func:`layer_table`: a short console table of a run's rows (collapse, and the diagnostics when
  present), at most ``max_rows`` lines.
- :func:`check_masks`: per model layer, the mask the model's attention kernel really applies, probed
  through its own attention function with the layer's own mask arguments
  (:mod:`rankcollapse.models.fingerprint`), against the mask that layer's config defines.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.base import Mask
from rankcollapse.masks.schedule import schedule_from_masks
from rankcollapse.metrics import diagnostics as dg

#: Ablations of ``analyze`` (None: none). ``sinks``: damp the attention on the first token.
ABLATIONS: tuple[str | None, ...] = (None, "sinks")


@dataclass(frozen=True)
class DiagnosticsPath:
    """How a run takes its attention diagnostics (``config.json``: ``model.diagnostics_path``).
    ``kind``: ``kernel`` (each layer's fused attention call on ``V' = [V, K]``: the statistics exactly from
    its row log-normaliser, no weights formed, any backend and any model whose attention goes through
    Hugging Face's ``AttentionInterface``), ``blocks`` (the weights formed a block of query rows at a time
    from the dissected parts), ``map`` (each layer's whole map, for ``on_attention``); ``why``: one line."""

    kind: Literal["kernel", "blocks", "map"]
    why: str

    def describe(self) -> str:
        return f"{self.kind}: {self.why}"


def diagnostics_path(model: Any, config: Any, whole_maps: bool = False) -> DiagnosticsPath:
    """The path of a run's diagnostics (:class:`DiagnosticsPath`). ``whole_maps``: ``on_attention`` needs
    each layer's map. ``blocks`` where the lse has no exact form or the weights themselves change: the sinks
    ablation, an explicit ``diagnostics_chunk``, logit soft-capping (Gemma 2), a relative-position bias (T5,
    MPNet), float64 parts with Hugging Face's float32 softmax. An undissected model takes the kernel path
    only (its attention through the ``AttentionInterface``): the others are refused in one line."""
    from rankcollapse.models.families import FAMILIES
    from rankcollapse.models.stats_interface import supports_interface

    if not model.dissected:
        if config.diagnostics_chunk is not None or config.ablation is not None or whole_maps:
            what = ("--ablation" if config.ablation is not None else "on_attention" if whole_maps
                    else "--diagnostics-chunk")
            raise RankCollapseError(f"{model.arch!r} is not dissected: {what} needs the attention weights of "
                                    "a dissected family (--diagnostics alone reads any model whose "
                                    "attention goes through Hugging Face's AttentionInterface)")
        if not supports_interface(model.hf_model):
            raise RankCollapseError(f"{model.arch!r} is not dissected and its attention does not go through "
                                    "Hugging Face's AttentionInterface: --diagnostics needs one of the two")
        return DiagnosticsPath("kernel", KERNEL_WHY + "; the model's own forward, its attention function "
                               "wrapped (not dissected)")
    if whole_maps:
        return DiagnosticsPath("map", "on_attention gets each layer's whole [b, h, n, n] map; the "
                               "diagnostics are read from it")
    reasons = []
    if config.ablation is not None:
        reasons.append("the sinks ablation changes each row's weights")
    if config.diagnostics_chunk is not None:
        reasons.append(f"--diagnostics-chunk {config.diagnostics_chunk} asks for it")
    if any(p.logit_softcap is not None for p in model.layers):
        reasons.append("logit soft-capping (c tanh(S / c)) is not linear in the keys: its entropy has no lse "
                       "form")
    spec = FAMILIES.get(model.arch)
    if spec is not None and spec.positions == "relative":
        reasons.append("a relative-position bias inside the logits: its entropy term sum_j A_ij B_ij has no "
                       "lse form")
    dtype = next(model.hf_model.parameters()).dtype
    if any(p.softmax_dtype not in (None, dtype) for p in model.layers):
        reasons.append(f"parts with Hugging Face's float32 softmax in {str(dtype).removeprefix('torch.')}")
    if reasons:
        return DiagnosticsPath("blocks", "; ".join(reasons) + ": the weights are formed a block of query "
                               "rows at a time from the dissected parts")
    return DiagnosticsPath("kernel", KERNEL_WHY)


#: The kernel path, in one line (``config.json``).
KERNEL_WHY = ("each layer's fused attention call on V' = [V, K]: entropy, first-token attention and allowed "
              "keys exactly from its row log-normaliser (lse), no attention weights formed")


def diagnostics_info(model: Any, config: Any, whole_maps: bool = False) -> dict[str, Any]:
    """What ``config.json`` records of a run's diagnostics: ``diagnostics_path`` (:func:`diagnostics_path`,
    one line; None without diagnostics) and the ``backend`` the run really takes with it."""
    from rankcollapse.models.stream import choose_backend, is_own_mask

    if not config.diagnostics:
        return {"diagnostics_path": None}
    path = diagnostics_path(model, config, whole_maps)
    if path.kind == "kernel":
        own = is_own_mask(model, config.parsed_mask, config.tokens)
        backend = choose_backend(model, config.mode, own, config.d_qk, config.backend)
    else:
        backend = "parts"
    return {"diagnostics_path": path.describe(), "backend": backend}


def mean_defined(v: Tensor) -> float:
    """Mean of the finite entries of ``v`` (NaN when there are none): a batch mean over the samples
    (and heads) a value is defined for."""
    v = v.detach().to(torch.float64).reshape(-1)
    v = v[torch.isfinite(v)]
    return float(v.mean()) if v.numel() else math.nan


def _activations(x: Tensor) -> dict[str, Tensor]:
    """``first_token_norm``, ``top_activation``, ``massive_ratio`` of x [b, n, d], [b] each (NaN for a
    non-finite sample), float64 where x lives."""
    finite = torch.isfinite(x).flatten(1).all(dim=1)
    safe = torch.where(finite[:, None, None], x, torch.zeros_like(x)).to(torch.float64)
    nan = torch.full((x.shape[0],), math.nan, dtype=torch.float64, device=x.device)
    return {"first_token_norm": torch.where(finite, dg.first_token_norm(safe), nan),
            "top_activation": torch.where(finite, dg.top_activations(safe, 1)[:, 0], nan),
            "massive_ratio": torch.where(finite, dg.massive_ratio(safe), nan)}


def _cpu(out: dict[str, Tensor]) -> dict[str, Tensor]:
    return {k: v.detach().to(device="cpu", dtype=torch.float64) for k, v in out.items()}


#: Queries ``[b, h, n, e]`` and keys ``[b, g, n, e]`` of one layer, as its attention function receives them.
QueryKey = tuple[Tensor, Tensor]


def _per_sample(x: Tensor, attn: Tensor | None, mask: Tensor | None, threshold: float,
                qk: QueryKey | None = None) -> dict[str, Tensor]:
    """Per-sample diagnostic values of x [b, n, d] and attn [b, h, n, n] (all samples n tokens long), and
    of the layer's queries and keys ``qk`` where given: ``[b, h]`` for the per-head ones, ``[b]`` for the
    others; non-finite samples give NaN. Computed where x lives, returned float64 on the CPU."""
    out: dict[str, Tensor] = {}
    if attn is not None:
        attn = attn.to(torch.float64)
        mask = None if mask is None else mask.to(attn.device)
        out["attention_entropy"] = dg.attention_entropy(attn)  # [b, h]
        out["normalized_attention_entropy"] = dg.normalized_attention_entropy(attn, mask)
        out["first_token_attention"] = dg.first_token_attention(attn)
        out["sink_rate"] = dg.sink_rate(attn, threshold)
        if qk is not None:
            out.update(dg.query_key_values(*qk, mask))
    return _cpu({**out, **_activations(x)})


def _from_rows(x: Tensor, rows: dg.AttentionRows | None, threshold: float) -> dict[str, Tensor]:
    """:func:`_per_sample` from the per-query reductions of the map instead of the map."""
    out: dict[str, Tensor] = {}
    if rows is not None:
        out["attention_entropy"] = rows.attention_entropy()
        out["normalized_attention_entropy"] = rows.normalized_attention_entropy()
        out["first_token_attention"] = rows.first_token_attention()
        out["sink_rate"] = rows.sink_rate(threshold)
        if rows.qk is not None:
            out.update(rows.qk.values())
    return _cpu({**out, **_activations(x)})


def _by_length(b: int, lengths: Tensor, part: Callable[[list[int], int], dict[str, Tensor]]
               ) -> dict[str, Tensor]:
    """The values of ``part(rows, m)`` for each group of samples of one length ``m``, in sample order."""
    groups: dict[str, Tensor] = {}
    for m in sorted({int(v) for v in lengths}):
        rows = [i for i in range(b) if int(lengths[i]) == m]
        for k, v in part(rows, m).items():
            if k not in groups:
                groups[k] = torch.full((b, *v.shape[1:]), math.nan, dtype=torch.float64)
            groups[k][rows] = v  # back in sample order
    return groups


def diagnostic_values(x: Tensor, attn: Tensor | None, mask: Tensor | Mask | None, threshold: float,
                      lengths: Tensor | None = None, qk: QueryKey | None = None) -> dict[str, Tensor]:
    """The per-sample values a row's diagnostic columns are means of, in sample order: float64 on the
    CPU, ``[b, h]`` per head (``attention_entropy``, ``first_token_attention``, the key-bias values) or
    ``[b]``. x, attn, mask and ``lengths`` as in :func:`diagnostic_stats`; a ``Mask`` is taken at each
    sample's length (a bool [n, n] tensor: its top-left block). ``qk``: the layer's queries
    ``[b, h, n, e]`` and keys ``[b, g, n, e]`` beside ``attn`` (the key-bias values, from the reference
    functions of :mod:`rankcollapse.metrics.diagnostics`; None: none, their columns NaN). Batches of one
    run concatenated along the first axis give the values of one batch of all their samples. The
    reference: :func:`chunked_diagnostic_values` computes the same from the per-query reductions."""
    b, n = x.shape[0], x.shape[1]
    if lengths is None or bool((lengths == n).all()):
        return _per_sample(x, attn, mask.dense(n) if isinstance(mask, Mask) else mask, threshold, qk)

    def at(m: int) -> Tensor | None:
        return mask.dense(m) if isinstance(mask, Mask) else None if mask is None else mask[:m, :m]

    def cut(rows: list[int], m: int) -> QueryKey | None:
        return None if qk is None else (qk[0][rows][:, :, :m], qk[1][rows][:, :, :m])

    return _by_length(b, lengths, lambda rows, m: _per_sample(
        x[rows, :m], None if attn is None else attn[rows][:, :, :m, :m], at(m), threshold, cut(rows, m)))


def chunked_diagnostic_values(x: Tensor, rows: dg.AttentionRows | None, threshold: float,
                              lengths: Tensor | None = None) -> dict[str, Tensor]:
    """:func:`diagnostic_values` from the layer's per-query reductions ``rows`` (``[b, h, n]``:
    :class:`~rankcollapse.metrics.diagnostics.AttentionRows`, taken under the mask the layer used,
    block by block, :func:`rankcollapse.models.parts.attention` with ``chunk``) instead of its map
    ``[b, h, n, n]``. With ``lengths``, sample ``i`` keeps its first ``m = lengths[i]`` queries (no real
    query has a padding key, so their rows are those of ``attn[i, :, :m, :m]`` under ``mask[:m, :m]``)."""
    b, n = x.shape[0], x.shape[1]
    if lengths is None or bool((lengths == n).all()):
        return _from_rows(x, rows, threshold)
    return _by_length(b, lengths, lambda sel, m: _from_rows(
        x[sel, :m], None if rows is None else rows.take(sel, m), threshold))


#: The key-bias columns that also have a column per head (``first_key_cos_h{k}``, ``key_cos_h{k}``).
PER_HEAD_QUERY_KEY: tuple[str, ...] = ("first_key_cos", "key_cos")


def diagnostic_row(per: dict[str, Tensor], threshold: float, n_heads: int | None = None) -> dict[str, Any]:
    """The diagnostic columns of one row from the per-sample values of :func:`diagnostic_values` (of one
    batch, or of several concatenated): means over samples (and heads), non-finite samples left out.
    Without attention values (row 0) the attention columns are NaN, for ``n_heads`` heads."""
    row: dict[str, Any] = {}
    if "attention_entropy" in per:
        ent = per["attention_entropy"]
        first = per["first_token_attention"]
        heads = ent.shape[1]
        row["attention_entropy"] = mean_defined(ent)
        for h in range(heads):
            row[f"attention_entropy_h{h}"] = mean_defined(ent[:, h])
        for k in ("normalized_attention_entropy", "first_token_attention", "sink_rate"):
            row[k] = mean_defined(per[k])
        for h in range(heads):
            row[f"first_token_attention_h{h}"] = mean_defined(first[:, h])
        row["sink_heads"] = " ".join(str(h) for h in range(heads)
                                     if row[f"first_token_attention_h{h}"] > threshold)
    else:
        heads = n_heads or 0
        row["attention_entropy"] = math.nan
        row.update({f"attention_entropy_h{h}": math.nan for h in range(heads)})
        row.update(normalized_attention_entropy=math.nan, first_token_attention=math.nan, sink_rate=math.nan)
        row.update({f"first_token_attention_h{h}": math.nan for h in range(heads)})
        row["sink_heads"] = ""
    for k in dg.QUERY_KEY_NAMES:  # NaN where the path saw no queries and keys (row 0: no attention)
        v = per.get(k)
        row[k] = math.nan if v is None else mean_defined(v)
        if k in PER_HEAD_QUERY_KEY:
            row.update({f"{k}_h{h}": math.nan if v is None else mean_defined(v[:, h]) for h in range(heads)})
    for k in ("first_token_norm", "top_activation", "massive_ratio"):
        row[k] = mean_defined(per[k])
    return row


def diagnostic_stats(x: Tensor, attn: Tensor | None, mask: Tensor | None, threshold: float,
                     n_heads: int | None = None, lengths: Tensor | None = None) -> dict[str, float]:
    """The diagnostic columns of one row (module docstring). x: [b, n, d]; attn: [b, h, n, n] or None;
    mask: bool [n, n] the layer's mask (for the normalised entropy), or None (complete).

    ``lengths`` [b] (right-padded batches): sample ``i`` is its first ``lengths[i]`` tokens, and its
    values are those of ``x[i, :m]``, ``attn[i, :, :m, :m]`` and ``mask[:m, :m]`` (``m = lengths[i]``;
    no real token attends to padding, so those rows still sum to 1). Means are over samples (and
    heads), non-finite samples left out: :func:`diagnostic_row` of :func:`diagnostic_values`.
    """
    heads = attn.shape[1] if attn is not None else n_heads
    return diagnostic_row(diagnostic_values(x, attn, mask, threshold, lengths), threshold, heads)


def layer_schedule_info(model: Any, mask: Any, layers: int | None) -> dict[str, Any]:
    """``mask_schedule`` (the masks of the layers applied, run-length encoded, with how the period
    fills the depth) and ``mask_source`` (``own`` per layer from the config, or ``override``)."""
    from rankcollapse.models.stream import layer_masks

    n_layers = max(model.n_model_layers or len(model.layers), 1)
    depth = n_layers if layers is None else layers
    if depth < 1:
        return {"mask_schedule": "", "mask_source": "own" if mask is None else "override"}
    if mask is None:
        full = schedule_from_masks([model.own_layer_mask(t) for t in range(n_layers)])
        own = full.reduced()
        # layers beyond the model's depth cycle its layers: a period that does not divide it is not one
        sched = (own if n_layers % len(own.period) == 0 else full).at_depth(depth)
        source = "own: each layer's mask as the model's config defines it"
    else:
        sched = schedule_from_masks(layer_masks(model, mask, min(depth, n_layers)))
        sched = sched.at_depth(depth)
        source = "override: the given mask applies to every layer" if len(set(map(id, sched.period))) == 1 \
            else "override: the given schedule, one mask per layer"
    return {"mask_schedule": sched.describe(), "mask_source": source}


def check_masks(model: Any, ids: Tensor, batch_size: int | None = None, *,
                attention_mask: Tensor | None = None, implementation: str | None = None,
                support: bool = False) -> list[Any]:
    """Per model layer: does the mask the model's attention kernel applies on ``ids`` [b, n] equal, row by
    row, the mask the model's config defines for that layer? One
    :class:`~rankcollapse.models.fingerprint.MaskFingerprint` per layer (``.matches``, ``.describe()``),
    probed through the model's own attention function with the layer's own mask arguments, ``O(n e)`` per
    row (:func:`rankcollapse.models.fingerprint.check_masks`: ``attention_mask`` right padding,
    ``implementation`` the one probed, ``support`` every row's support by one-hot value blocks).

    ``batch_size``: the samples go through the model that many at a time, on the model's device (None: all
    at once); the counts add up over batches, as for one batch.
    """
    from rankcollapse.models.fingerprint import check_masks as probe_masks

    return probe_masks(model, ids, batch_size, attention_mask=attention_mask,
                       implementation_name=implementation, support=support)


def _fmt(v: Any) -> str:
    if isinstance(v, str):
        return v or "-"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3g}"


#: (column, header) of :func:`layer_table`; a column is shown when the rows have it.
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("layer", "layer"), ("mu_rel", "mu_rel"), ("full_rank", "full-rank%"), ("mean_abs_cos", "mean|cos|"),
    ("attention_entropy", "entropy"), ("sink_rate", "sink_rate"), ("sink_heads", "sink heads"),
    ("massive_ratio", "massive_ratio"),
)


def _cell(column: str, v: Any) -> str:
    """A table cell: a share (``full_rank``: the share of samples at full rank, not a rank) as a percent."""
    if column == "full_rank" and isinstance(v, int | float) and not math.isnan(v):
        return f"{v:.0%}"
    return _fmt(v)


def layer_table(rows: list[dict[str, Any]], max_rows: int = 13) -> str:
    """A short table of a run's rows for the console: ``layer``, ``mu_rel``, ``full-rank%`` (the share of
    samples at full rank: ``100%``, never to be read as a rank),
    ``mean_abs_cos`` and, with diagnostics, ``attention_entropy`` (nats, mean over heads),
    ``sink_rate``, ``sink_heads`` and ``massive_ratio``. With more than ``max_rows`` rows, evenly
    spaced rows and the last one are shown (every row is in ``metrics.csv``)."""
    if not rows:
        return ""
    keep = list(range(len(rows)))
    if len(rows) > max_rows:
        step = math.ceil((len(rows) - 1) / (max_rows - 1))
        keep = sorted(set(range(0, len(rows), step)) | {len(rows) - 1})
    cols = [(k, h) for k, h in TABLE_COLUMNS if k in rows[0]]
    cells = [[h for _, h in cols]] + [[_cell(k, rows[i].get(k)) for k, _ in cols] for i in keep]
    widths = [max(len(c[j]) for c in cells) for j in range(len(cols))]
    lines = ["  ".join(c[j].rjust(widths[j]) for j in range(len(cols))).rstrip() for c in cells]
    if len(keep) < len(rows):
        lines.append(f"({len(keep)} of {len(rows)} rows; all in metrics.csv)")
    return "\n".join(lines)
