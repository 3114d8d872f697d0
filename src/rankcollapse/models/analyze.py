"""Layer-by-layer collapse measures of a pretrained (or random-init) model on real text.

:func:`iter_hidden_states` streams the hidden states ``X(0), X(1), ..., X(L)`` of one batch through
the layers (only the current one is kept); :func:`analyze` streams a run's samples in batches of
``AnalyzeConfig.batch_size`` (:func:`~rankcollapse.models.stream.iter_batches`) and makes each row
from every sample's values, on ``AnalyzeConfig.device``. Row ``t = 0`` is the embeddings output (the
input of the first layer, named ``embeddings``); row ``t >= 1`` is the output of the ``t``-th layer
applied (named ``layer_{t}_out``), which is model layer ``(t - 1) mod n_layers`` (depth extension by
cycling the model's layers). For GPT-2, Llama and T5 the rows are the residual stream before the
final norm; Hugging Face's last ``hidden_states`` element is ``final_norm`` of it.

:func:`analyze` runs a whole :class:`AnalyzeConfig` and returns an :class:`AnalyzeResult`
with one row of :func:`rankcollapse.metrics.summarize` per hidden state; :func:`check_inputs` refuses,
before anything runs, what the loaded model cannot take; :func:`analyze_into` is ``rankcollapse analyze
--out``: the run streamed into a folder with what :class:`AnalyzeOutputs` asks for (:class:`AnalyzeRun`).

This module is the run itself; its pieces, one idea a file (every name importable from here too):
:mod:`~rankcollapse.models.analyze_config` (:class:`AnalyzeConfig`),
:mod:`~rankcollapse.models.analyze_result` (:class:`AnalyzeResult`, :func:`write_run`),
:mod:`~rankcollapse.models.samples` (per-sample values and a row's summary),
:mod:`~rankcollapse.models.memory` (the memory estimates) and
:mod:`~rankcollapse.models.run_model` (:func:`load_model_cached`, the checks on a model given).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
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
from rankcollapse.models.analyze_config import AnalyzeConfig, AnalyzeOutputs
from rankcollapse.models.analyze_result import (
    AnalyzeResult,
    AnalyzeRun,
    model_info,
    read_size,
    write_per_sample,
    write_run,
)
from rankcollapse.models.diagnose import (
    chunked_diagnostic_values,
    diagnostic_values,
    diagnostics_info,
    diagnostics_path,
)
from rankcollapse.models.excerpts import check_excerpts, excerpts
from rankcollapse.models.images import check_pixels, check_tokens, image_geometry, random_pixels
from rankcollapse.models.inputs import (
    borrowed,
    from_memory,
    no_tokenizer_message,
    text_batch,
    with_tokenizer,
)
from rankcollapse.models.loading import LoadedModel, with_label
from rankcollapse.models.memory import batch_bytes, check_run_memory, forward_bytes, kept_bytes
from rankcollapse.models.names import tl_hook_names
from rankcollapse.models.parts import chunk_rows
from rankcollapse.models.run_model import (
    check_model_device,
    check_model_dtype,
    check_surgery,
    hooks_skipped,
    load_model_cached,
)
from rankcollapse.models.samples import (
    LayerSamples,
    measure,
    measure_samples,
    sample_values,
    status_of,
    summarize_samples,
    zero_samples,
)
from rankcollapse.models.stream import (
    BACKENDS,
    additive_mask,
    check_d_qk,
    choose_backend,
    hidden_state_name,
    is_own_mask,
    iter_batches,
    iter_hidden_states,
    layer_masks,
    tl_hook_name,
    user_schedule,
)

#: The public names of the run and of its pieces (re-exported: ``from rankcollapse.models.analyze
#: import ...`` keeps working for every name that lived here).
__all__ = [
    "BACKENDS",
    "AnalyzeConfig",
    "AnalyzeOutputs",
    "AnalyzeResult",
    "AnalyzeRun",
    "additive_mask",
    "analyze",
    "analyze_into",
    "batch_bytes",
    "check_d_qk",
    "check_inputs",
    "check_model_device",
    "check_model_dtype",
    "check_surgery",
    "choose_backend",
    "forward_bytes",
    "hidden_state_name",
    "hooks_skipped",
    "is_own_mask",
    "iter_batches",
    "iter_hidden_states",
    "kept_bytes",
    "layer_masks",
    "load_model_cached",
    "mask_of",
    "measure",
    "measure_samples",
    "model_info",
    "pixel_batch",
    "run_documents",
    "sample_values",
    "status_of",
    "summarize_samples",
    "tl_hook_name",
    "token_batch",
    "user_schedule",
    "write_per_sample",
    "write_run",
    "zero_samples",
]


def token_batch(config: AnalyzeConfig, model: LoadedModel) -> Tensor:
    """The [samples, tokens] token ids of a config (:func:`excerpts` of its corpus or text file), on the CPU.

    A run whose estimated memory exceeds what this machine has is refused before anything is
    allocated (after the context and the tokenizer: :func:`check_excerpts`): what every sample keeps
    (:func:`kept_bytes`) and one batch in the model (:func:`batch_bytes`, ``config.batch_size``
    samples or all), on the CPU; on CUDA the batch is checked against what is free on the GPU
    (:func:`~rankcollapse.models.memory.check_run_memory`).
    """
    check_excerpts(model, config.tokens)
    check_run_memory(config, model)
    return excerpts(model, config.corpus, config.samples, config.tokens, config.seed, config.text_file)


def pixel_batch(config: AnalyzeConfig, model: LoadedModel,
                pixel_values: Tensor | None = None) -> tuple[Tensor, AnalyzeConfig]:
    """A vision encoder's input (``model.image``, :mod:`rankcollapse.models.images`) and the run's config.

    ``pixel_values`` [b, C, H, W]: normalised pixels, as the model's image processor gives them, checked
    (:func:`~rankcollapse.models.images.check_pixels`: the model's channels, a float dtype, finite; one
    line else); the config's image size, or another whole number of patches, whose positions are
    interpolated (:func:`~rankcollapse.models.images.interpolate_positions`). None: ``config.samples``
    white-noise images of the config's size seeded by ``config.seed``
    (:func:`~rankcollapse.models.images.random_pixels`). The token count is the image's,
    ``1 + (H / p)(W / p)``: a ``tokens`` given that differs is refused, as are a corpus and a text file.
    The config returned is a copy recording the run as it is (``tokens`` the image's, ``samples`` b, the
    image for ``model_info``), checked against this machine's memory
    (:func:`~rankcollapse.models.memory.check_run_memory`).
    """
    image = model.image
    if image is None:
        raise _reads_ids(model)
    if config.text_file is not None or getattr(config, "_corpus_given", False):
        what = "--text-file" if config.text_file is not None else "--corpus"
        raise RankCollapseError(f"{what} does not apply to vision encoder {model.label!r}: it reads images "
                                "(pixel_values, or seeded white-noise images by default)")
    given = config.tokens if getattr(config, "_tokens_given", True) else None
    if pixel_values is None:
        check_tokens(given, image, model.label)
        pixels, seen = random_pixels(image, config.samples, config.seed), image
    else:
        pixels = check_pixels(pixel_values, image)
        if getattr(config, "_samples_given", False) and config.samples != pixels.shape[0]:
            if config.samples > pixels.shape[0]:  # never fewer samples than asked for, silently
                raise RankCollapseError(
                    f"samples={config.samples} (--samples) but the pixel values hold {pixels.shape[0]} "
                    f"images; give --samples {pixels.shape[0]} or fewer, or more images")
            pixels = pixels[: config.samples]  # the first ``samples`` images, as excerpts are the first
        seen = image_geometry(pixels.shape, image)
        check_tokens(given, seen, model.label)
    run = copy.copy(config)  # the parsed mask and the flags of what was given come along
    run.tokens, run.samples = seen.tokens, int(pixels.shape[0])
    run._image = seen  # what model_info records: the image read, not only the config's
    check_run_memory(run, model)
    return pixels, run


def check_inputs(config: AnalyzeConfig, model: LoadedModel, *, ids: Tensor | None = None,
                 texts: list[str] | None = None, attention_mask: Tensor | None = None,
                 pixel_values: Any = None, whole_maps: bool = False, check_masks: bool = False) -> None:
    """Refuse, in one line and before anything runs, a run ``model`` cannot make: what the model cannot
    give (:func:`~rankcollapse.models.run_model.check_surgery`; ``whole_maps``: ``on_attention`` or
    ``save_attention``), inputs of the other kind (a vision encoder reads ``pixel_values``, a text model
    ``ids`` or ``texts``, not both) and ``check_masks`` (``AnalyzeOutputs``) on a vision encoder. Every
    :func:`analyze` and :func:`analyze_into` calls it."""
    check_surgery(model, config)
    if config.diagnostics and whole_maps:
        diagnostics_path(model, config, whole_maps)
    if model.image is not None:
        if texts is not None or ids is not None or attention_mask is not None:
            raise RankCollapseError(f"{model.label!r} is a vision encoder: give pixel_values [b, C, H, W], "
                                    "not ids, texts or an attention_mask")
        if check_masks:
            raise RankCollapseError("check_masks applies to text models (a vision encoder's mask is "
                                    "complete)")
        return
    if pixel_values is not None:
        raise _reads_ids(model)
    if texts is not None and ids is not None:
        raise RankCollapseError("give ids or texts, not both")


def _reads_ids(model: LoadedModel) -> RankCollapseError:
    """The one line for pixel values given to a text model."""
    return RankCollapseError(f"pixel_values applies only to a vision encoder (ViT); {model.label!r} reads "
                             "token ids")


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
    each sample cover its real tokens only (:func:`measure` with ``lengths``).

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


def analyze_into(out: str | Path, config: AnalyzeConfig | AnalyzeOutputs, *, overwrite: bool = False,
                 model_label: str | None = None, tokenizer: Any | str | None = None,
                 pixel_values: str | Path | Tensor | None = None, progress: bool = False) -> AnalyzeRun:
    """Run ``config`` into the folder ``out``, as ``rankcollapse analyze --out`` does: ``config.json`` and
    ``metrics.csv`` (its rows streamed as they are made, published when the run is complete) and what an
    :class:`AnalyzeOutputs` given instead of the config asks for (``per_sample.csv``, the figures,
    ``attention/layer_<t>.npy``, ``mask_check.json``).

    ``out``: a new or empty folder, or an earlier analyze run with ``overwrite`` (else refused in one
    line, before the model loads). The model is loaded by name (``load_model``, not kept in memory) and
    :func:`check_inputs` refuses a run it cannot make before the folder is touched. ``pixel_values``: a
    vision encoder's images, a tensor or a ``.npy`` file
    (:func:`~rankcollapse.models.images.read_pixel_values`). ``model_label``, ``tokenizer``,
    ``progress``: as :func:`analyze`. A mask given for every layer is announced on stderr beside the
    model's own. Returns an :class:`AnalyzeRun` (the result, the figures drawn, the mask checks).
    """
    from rankcollapse.edge.folder import OutputFolder, check_output_folder
    from rankcollapse.edge.runs import RunWriter
    from rankcollapse.models.images import read_pixel_values
    from rankcollapse.models.loading import load_model
    from rankcollapse.models.plot import FORMATS, figure_files, figure_names, save_figures

    outputs = config if isinstance(config, AnalyzeOutputs) else AnalyzeOutputs(config)
    config = outputs.config
    existing = "replace" if overwrite else "refuse"  # the one rule: never replaced silently
    check_output_folder(out, "analyze", existing=existing)
    model = with_tokenizer(load_model(config.model, config.dtype, seed=config.seed, device=config.device,
                                      model_label=model_label), tokenizer)
    check_inputs(config, model, pixel_values=pixel_values, whole_maps=outputs.save_attention,
                 check_masks=outputs.check_masks)
    ids = pixels = None
    if model.image is not None:  # a vision encoder: images in, its token count set by them
        if isinstance(pixel_values, str | Path):
            pixel_values = read_pixel_values(pixel_values, model.image)
        pixels, config = pixel_batch(config, model, pixel_values)
    else:
        ids = token_batch(config, model)
    info = {**model_info(model, config), **diagnostics_info(model, config, outputs.save_attention)}
    if config.parsed_mask is not None:
        warning(f"mask {info['mask'][:60]} applies to every layer (the model's own: {model.own_mask[:60]})")
    figures = figure_files(figure_names(None, True), FORMATS)  # every name a figure may have: replaced
    # what analyze wrote before the marker listed a run's files (a folder from then is replaced by these)
    written = ("config.json", RunWriter.FINAL, RunWriter.PARTIAL, *figures, "per_sample.csv",
               "mask_check.json", "attention")
    with OutputFolder(out, "analyze", existing=existing, outputs=written) as folder:
        record = {"analyze": asdict(config), "model": info, "read": read_size(config, ids, pixels)}
        with RunWriter(folder, record) as writer:
            result = analyze(config, model=model, ids=ids, pixel_values=pixels, on_row=writer.write_row,
                             progress=progress,
                             on_attention=_attention_writer(folder) if outputs.save_attention else None)
        run = AnalyzeRun(result, Path(out))
        if outputs.per_sample:
            write_per_sample(result, folder.file("per_sample.csv"))
        if outputs.plot:
            run.figures = save_figures(result, folder.staging, outputs.formats)  # published with the run
        if outputs.check_masks:
            run.mask_checks = _check_masks(model, ids, folder.file("mask_check.json"), config.batch_size)
    return run


def _attention_writer(out: Any) -> Callable[[int, Tensor], None]:
    """``on_attention`` that saves each layer's weights to ``attention/layer_<t>.npy`` (float32) of the
    output folder ``out`` (an ``edge.folder.OutputFolder``: staged, published with the run)."""
    import numpy as np

    from rankcollapse.edge.atomic import atomic_path
    from rankcollapse.edge.runs import ATTENTION

    out.subfolder(str(Path(ATTENTION.name).parent))  # a real folder in the staging folder, never a link

    def save(t: int, attn: Tensor) -> None:
        with atomic_path(out.file(ATTENTION.name.format(k=f"{t:03d}"))) as tmp, tmp.open("wb") as f:
            np.save(f, ATTENTION.check(attn.detach().to("cpu").float().numpy()))

    return save


def _check_masks(model: LoadedModel, ids: Tensor, path: Path, batch_size: int | None) -> list[Any]:
    """Run the per-layer mask check and write ``mask_check.json``; return the checks (one per layer)."""
    from rankcollapse.edge.atomic import write_json
    from rankcollapse.edge.runs import MASK_CHECK
    from rankcollapse.models.diagnose import check_masks

    checks = check_masks(model, ids, batch_size)
    write_json(path, MASK_CHECK.check({
        "source": "ours: the mask each layer's attention kernel applies, probed through the model's "
                  "own attention function (count of allowed keys and first and last key per row), vs the "
                  "config's masks",
        "matches": all(c.matches for c in checks), "layers": [asdict(c) for c in checks]}))
    return checks


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
                    if attn is not None and on_attention is not None:
                        on_attention(t, attn)
                    layer.diagnostics.append(diagnostic_values(x, attn, mask_of(model, config, t),
                                                               config.sink_threshold, real))
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
