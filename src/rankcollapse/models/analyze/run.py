"""The run: layer-by-layer collapse measures of a pretrained (or random-init) model on real text.

:func:`~rankcollapse.models.stream.iter_hidden_states` streams the hidden states ``X(0), X(1), ..., X(L)``
of one batch through the layers (only the current one is kept); :func:`analyze` streams a run's samples
in batches of ``AnalyzeConfig.batch_size`` (:func:`~rankcollapse.models.stream.iter_batches`) and makes
each row from every sample's values, on ``AnalyzeConfig.device``. Row ``t = 0`` is the embeddings output
(the input of the first layer, named ``embeddings``); row ``t >= 1`` is the output of the ``t``-th layer
applied (named ``layer_{t}_out``), which is model layer ``(t - 1) mod n_layers`` (depth extension by
cycling the model's layers). For GPT-2, Llama and T5 the rows are the residual stream before the
final norm; Hugging Face's last ``hidden_states`` element is ``final_norm`` of it.

:func:`analyze` runs a whole :class:`~rankcollapse.models.analyze.config.AnalyzeConfig` in memory and
returns an :class:`~rankcollapse.models.analyze.result.AnalyzeResult` with one row of
:func:`rankcollapse.metrics.summarize` per hidden state; what it reads and the checks made before it
runs: :mod:`~rankcollapse.models.analyze.batch`; the run into a folder:
:mod:`~rankcollapse.models.analyze.into`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.execution import batch_slices
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.messages import warning
from rankcollapse.edge.progress import progress as progress_lines
from rankcollapse.edge.validate import check_token_ids
from rankcollapse.masks import Mask, in_memory_note
from rankcollapse.metrics import document_columns
from rankcollapse.models.analyze.batch import check_inputs, pixel_batch, token_batch
from rankcollapse.models.analyze.config import AnalyzeConfig
from rankcollapse.models.analyze.result import AnalyzeResult, model_info
from rankcollapse.models.diagnose import (
    chunked_diagnostic_values,
    diagnostic_values,
    diagnostics_info,
    diagnostics_path,
)
from rankcollapse.models.inputs import borrowed, from_memory, no_tokenizer_message, text_batch, with_tokenizer
from rankcollapse.models.loading import LoadedModel, with_label
from rankcollapse.models.names import tl_hook_names
from rankcollapse.models.parts import chunk_rows
from rankcollapse.models.run_model import (
    check_model_device,
    check_model_dtype,
    hooks_skipped,
    load_model_cached,
)
from rankcollapse.models.samples import LayerSamples, sample_values, zero_samples
from rankcollapse.models.stream import is_own_mask, iter_batches, iter_hidden_states, layer_masks

__all__ = ["analyze", "mask_of", "run_documents"]


def _prefix_note(model: LoadedModel, ids: Tensor) -> str | None:
    same = ids[:, 0] == ids[:, 1] if ids.shape[1] > 1 else torch.zeros(0, dtype=torch.bool)
    if not bool(same.any()):
        return None
    return (f"{int(same.sum())} of {ids.shape[0]} samples start with a repeated token (positions 0 and 1): "
            "under a causal mask they stay duplicates in every layer, a property of the input, not of the "
            f"model; start texts with the model's start token ({model.start_token})")



def analyze(
    config: AnalyzeConfig,
    *,
    model: LoadedModel | Any | None = None,
    ids: Tensor | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    texts: list[str] | None = None,
    attention_mask: Tensor | None = None,
    tokenizer: Any | str | None = None,
    progress: bool = False,
    on_attention: Callable[[int, Tensor], None] | None = None,
    pixel_values: Tensor | None = None,
    model_label: str | None = None,
) -> AnalyzeResult:
    """Run ``config``: rows of summarised :func:`rankcollapse.metrics.collapse_metrics` per layer.

    ``model``: an already loaded model, or an in-memory Hugging Face model (base or with a head),
    borrowed: it leaves ``analyze`` exactly as it came (training flags, ``requires_grad``, attention
    implementation; no hook is added); else ``load_model(config.model, config.dtype,
    seed=config.seed)``, the last one kept in memory. ``ids``: token ids [b, n] (else
    :func:`token_batch`); ``on_row`` gets each row as it is made. ``texts``: a list of texts instead
    (``inputs.text_batch``: each cut to ``config.tokens``, right-padded); ``attention_mask`` [b, n]
    marks real tokens of ``ids``. With padding, no real token attends to padding and the metrics of
    each sample cover its real tokens only (:func:`~rankcollapse.models.samples.measure` with ``lengths``).

    ``tokenizer``: a Hugging Face tokenizer, or its name or folder (``AutoTokenizer``,
    ``trust_remote_code=False``), for ``texts`` and corpus excerpts. Without it an in-memory model
    reads text with the tokenizer saved beside it (its ``name_or_path``), else with the bundled BERT
    tokenizer only when its vocabulary is that one; otherwise text is refused with one line (pass
    ``ids`` or ``tokenizer``). ``model_info["tokenizer"]`` names the one used.

    ``pixel_values``: a vision encoder's images [b, C, H, W] (ViT), normalised as its image processor
    gives them; a vision encoder reads no ids nor text, and without ``pixel_values`` it reads
    ``config.samples`` seeded white-noise images (:func:`pixel_batch`). Its N is its CLS and patch tokens.

    ``model_label``: the model's words in the result's ``model_info["model_label"]``, its figures' titles
    and the progress line, instead of what it is (a bundled model's exact checkpoint, an in-memory model's
    ``name_or_path``: :attr:`LoadedModel.label`).

    ``progress``: progress on stderr (a bar on a terminal, a plain line every 10 s otherwise); off by
    default in Python, on in the CLI (``--no-progress``): a program's output stays its own, a person at
    a terminal sees a long run move.

    ``on_attention(t, A)``: each layer's attention weights ``A [b, h, n, n]`` (needs
    ``config.diagnostics`` and one batch; the tensor is reused: copy what you keep). With it each
    layer forms its whole map, the reference the default blocks of ``diagnostics_chunk`` rows are
    tested against (the same diagnostics to rounding).

    ``config.device``: the model is loaded there (a model given must already be there: it is not
    moved), each batch of ids goes there, and the metrics are computed there (per-sample values
    come back to the CPU). ``config.batch_size``: the samples go through the model that many at a
    time; rows are made from every sample's values together, so they are those of one batch
    (:class:`~rankcollapse.models.stream.Batch`); ``on_row`` gets each row during the last batch.
    """
    if on_attention is not None and not config.diagnostics:
        raise RankCollapseError("on_attention (saving attention patterns) needs diagnostics=True")
    hf_in = None if model is None or isinstance(model, LoadedModel) else model
    with borrowed(hf_in):
        seconds = {"load": 0.0, "tokenize": 0.0, "forward": 0.0, "metrics": 0.0}
        start = time.perf_counter()
        if model is None:
            model = with_label(load_model_cached(config.model, config.dtype, config.seed, config.device),
                               model_label)
        elif hf_in is not None:
            model = from_memory(hf_in, model_label)
            check_model_dtype(model, config)
            skipped = hooks_skipped(hf_in, config.mode)
            if skipped:
                warning(skipped)
                model.info["note"] = "; ".join(n for n in (model.info.get("note"), skipped) if n)
        else:
            model = with_label(model, model_label)
        check_model_device(model, config.device)
        model = with_tokenizer(model, tokenizer, hf_in)
        seconds["load"] = time.perf_counter() - start
        return _run(config, model, ids, on_row, texts, attention_mask, progress, on_attention, seconds,
                    in_memory=hf_in is not None, pixel_values=pixel_values)


def _run(config: AnalyzeConfig, model: LoadedModel, ids: Tensor | None,
         on_row: Callable[[dict[str, Any]], None] | None, texts: list[str] | None,
         attention_mask: Tensor | None, progress: bool, on_attention: Callable[[int, Tensor], None] | None,
         seconds: dict[str, float], in_memory: bool, pixel_values: Tensor | None = None) -> AnalyzeResult:
    start = time.perf_counter()
    check_inputs(config, model, ids=ids, texts=texts, attention_mask=attention_mask,
                 pixel_values=pixel_values, whole_maps=on_attention is not None)
    if model.image is not None:  # a vision encoder: pixels in, the token count its image's
        inputs, config = pixel_batch(config, model, pixel_values)
        seconds["tokenize"] = time.perf_counter() - start
        return _stream(config, model, inputs, None, None, on_row, progress, on_attention, seconds, [])
    if ids is None and model.tokenizer is None and in_memory:
        raise RankCollapseError(no_tokenizer_message(model))
    if texts is not None:
        ids, attention_mask = text_batch(model, list(texts), config.tokens)
    if ids is None:
        ids = token_batch(config, model)
    check_token_ids("ids", ids, model.vocab_size or None)
    lengths = None
    if attention_mask is not None:
        attention_mask = attention_mask.to(torch.long)
        if attention_mask.shape != ids.shape or not bool(attention_mask[:, 0].all()):
            raise RankCollapseError(
                "attention_mask must have the shape of ids and mark token 0 of every sample")
        if not bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all()):
            raise RankCollapseError("attention_mask must be right padding (1s then 0s in every sample)")
        lengths = attention_mask.sum(1)
        if bool((lengths == ids.shape[1]).all()):
            attention_mask, lengths = None, None
    seconds["tokenize"] = time.perf_counter() - start
    notes = [n for n in (_prefix_note(model, ids),) if n]
    for note in notes:
        warning(note)
    return _stream(config, model, ids, attention_mask, lengths, on_row, progress, on_attention, seconds,
                   notes)


def _stream(config: AnalyzeConfig, model: LoadedModel, ids: Tensor, attention_mask: Tensor | None,
            lengths: Tensor | None, on_row: Callable[[dict[str, Any]], None] | None, progress: bool,
            on_attention: Callable[[int, Tensor], None] | None, seconds: dict[str, float],
            notes: list[str]) -> AnalyzeResult:
    """The run's batches through the model, each layer's state measured as it comes. ``ids``: token ids
    [b, n] or a vision encoder's pixel values [b, C, H, W]."""
    n = model.n_tokens(ids)
    n_layers = model.depth
    if model.info.get("note"):
        notes.append(model.info["note"])
    notes += [n for n in (in_memory_note(config.parsed_mask),) if n]  # config.json: the mask by label only
    rows: list[dict[str, Any]] = []
    samples: list[dict[str, Tensor]] = []
    docs = run_documents(model, config, n)
    record: dict[str, Any] | None = {} if config.diagnostics else None
    depth = n_layers if config.layers is None else config.layers
    hooks = tl_hook_names(model, depth, own=_own_tensors(model, config, n))
    count = len(batch_slices(int(ids.shape[0]), config.batch_size))
    if on_attention is not None and count > 1:
        raise RankCollapseError(f"saving attention patterns needs one batch; got {count} batches of "
                                f"{config.batch_size} (--batch-size at least --samples {ids.shape[0]})")
    layers = [LayerSamples() for _ in range(depth + 1)]
    heads = _heads(model) if config.diagnostics else None
    path = diagnostics_path(model, config, on_attention is not None) if config.diagnostics else None
    chunk = None  # on_attention gets each layer's whole map: the reference path
    if path is not None and path.kind == "blocks":
        heads_max = max(p.n_heads for p in model.layers)
        chunk = config.diagnostics_chunk or chunk_rows(heads_max, n)
    kernel_stats = path is not None and path.kind == "kernel"
    bar = progress_lines((depth + 1) * count, f"analyze {model.label}", "layers", enabled=progress)
    try:
        for j, batch in enumerate(iter_batches(ids, config.batch_size, model.device, attention_mask)):
            last = j == count - 1
            real = None if lengths is None else lengths[batch.rows]  # the batch's samples' lengths
            stream = iter_hidden_states(model, batch.ids, mode=config.mode, mask=config.parsed_mask,
                                        d_qk=config.d_qk, layers=config.layers, backend=config.backend,
                                        sink_damping=config.sink_damping, record=record,
                                        attention_mask=batch.attention_mask, chunk=chunk,
                                        kernel_stats=kernel_stats)
            while True:
                start = time.perf_counter()
                try:
                    t, name, x = next(stream)
                except StopIteration:
                    break
                seconds["forward"] += time.perf_counter() - start
                start = time.perf_counter()
                x = batch.real(x)
                layer = layers[t]
                layer.name = name
                ok, values = sample_values(x, config.metrics, config.measure_threads, real,
                                             config.measure_cos_rows, config.seed)
                layer.ok.append(ok)
                layer.values.append(values)
                layer.zero.append(zero_samples(x))
                if docs:
                    finite_x = torch.where(torch.isfinite(x), x, torch.nan).to(torch.float64)
                    parts = document_columns(finite_x if finite_x.device.type == "cpu" else finite_x.cpu(),
                                             docs, real)
                    layer.docs.append({k: v.cpu() for k, v in parts.items()})
                if record is not None and (chunk is not None or kernel_stats):
                    kept = record.pop("rows", None) if t > 0 else None
                    kept = None if kept is None else kept.take(slice(0, batch.size), x.shape[1])
                    layer.diagnostics.append(chunked_diagnostic_values(x, kept, config.sink_threshold, real))
                elif record is not None:
                    attn = record.pop("attn", None) if t > 0 else None
                    attn = None if attn is None else batch.real(attn)
                    qk = record.pop("qk", None) if t > 0 else None  # the layer's queries and keys
                    qk = None if qk is None else (batch.real(qk[0]), batch.real(qk[1]))
                    if attn is not None and on_attention is not None:
                        on_attention(t, attn)
                    layer.diagnostics.append(diagnostic_values(x, attn, mask_of(model, config, t),
                                                               config.sink_threshold, real, qk=qk))
                if last:
                    row, values = layer.row(t, n_layers, hooks[t], config.sink_threshold, heads)
                    layers[t] = LayerSamples()  # its values now live in the row
                    rows.append(row)
                    samples.append(values)
                seconds["metrics"] += time.perf_counter() - start
                bar.update(1)
                if last and on_row is not None:
                    on_row(rows[-1])
    finally:
        bar.close()
    info = {**model_info(model, config), **diagnostics_info(model, config, on_attention is not None)}
    result = AnalyzeResult(config=config, rows=rows, model_info=info, seconds=seconds,
                           notes=notes, samples=samples, ids=None if model.image is not None else ids)
    bad = result.overflow_layers
    if bad:
        result.notes.append(f"non-finite hidden states or metrics (overflow) from layer {bad[0]} on in "
                            f"{len(bad)} of {len(rows)} rows; metrics there cover the finite samples only "
                            "(NaN if none)")
    zero = [int(r["layer"]) for r in rows if r["status"] == "underflow"]
    if zero:
        result.notes.append(f"hidden states exactly zero (underflow) from layer {zero[0]} on in {len(zero)} "
                            f"rows: mu_rel there is 0/0, undefined (NaN), not collapse")
    return result


def _heads(model: LoadedModel) -> int:
    """The attention heads of the model's first layer (an undissected model: its config's)."""
    if model.layers:
        return model.layers[0].n_heads
    config = model.hf_model.config
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    if not heads:
        raise RankCollapseError(f"{model.arch!r}: its config names no number of attention heads")
    return int(heads)


def _own_tensors(model: LoadedModel, config: AnalyzeConfig, n: int) -> bool:
    """Whether the run computes the model's own hidden states (mode full, own masks and d_qk, no
    ablation): only then do the rows have TransformerLens names."""
    own_d = config.d_qk is None or (model.layers and float(config.d_qk) == model.own_d_qk)
    return (config.mode == "full" and config.ablation is None and bool(own_d)
            and is_own_mask(model, config.parsed_mask, n))


def run_documents(model: LoadedModel, config: AnalyzeConfig, n: int) -> list[Tensor]:
    """The independent parts of a run's tokens (``Mask.documents`` of the union of the masks of
    every layer applied): empty when there is one part, as for every model's own mask."""
    from rankcollapse.masks import from_dense

    if config.parsed_mask is None:
        return []
    depth = config.layers if config.layers is not None else model.depth
    masks = list(dict.fromkeys(layer_masks(model, config.parsed_mask, max(depth, 1))))
    if len(masks) == 1:
        parts = masks[0].documents(n)
    else:
        union = torch.zeros(n, n, dtype=torch.bool)
        for m in masks:
            union |= m.dense(n)
        parts = from_dense(union).documents(n)
    return [torch.from_numpy(p.copy()) for p in parts] if len(parts) > 1 else []


def mask_of(model: LoadedModel, config: AnalyzeConfig, t: int) -> Mask | None:
    """The mask of the t-th layer applied in this run (None for row 0); the diagnostics take it at
    each text's own length."""
    if t == 0:
        return None
    depth = config.layers if config.layers is not None else model.depth
    return layer_masks(model, config.parsed_mask, depth)[t - 1]
