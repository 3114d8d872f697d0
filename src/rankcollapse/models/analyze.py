"""Layer-by-layer collapse measures of a pretrained (or random-init) model on real text.

:func:`iter_hidden_states` streams the hidden states ``X(0), X(1), ..., X(L)`` of one batch
through the layers (only the current one is kept). Row ``t = 0`` is the embeddings output (the
input of the first layer, named ``embeddings``); row ``t >= 1`` is the output of the ``t``-th
layer applied (named ``layer_{t}_out``), which is model layer ``(t - 1) mod n_layers`` (depth
extension by cycling the model's layers). For GPT-2, Llama and T5 the rows are the residual
stream before the final norm; Hugging Face's last ``hidden_states`` element is ``final_norm`` of it.

:func:`analyze` runs a whole :class:`AnalyzeConfig` and returns an :class:`AnalyzeResult`
with one row of :func:`rankcollapse.metrics.summarize` per hidden state.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.precision import dtype_name
from rankcollapse.errors import RankCollapseError
from rankcollapse.masks import Mask, parse_mask
from rankcollapse.models.corpora import CORPORA, DEFAULT_CORPUS
from rankcollapse.models.excerpts import excerpts
from rankcollapse.models.loading import LoadedModel, load_model
from rankcollapse.models.parts import MODES, NO_POSITIONS, run_block
from rankcollapse.runtime import trim_heap_every

BACKENDS: tuple[str, ...] = ("auto", "hf", "parts")


def additive_mask(mask: Tensor, dtype: torch.dtype) -> Tensor | None:
    """Hugging Face eager form of a bool mask: 0 where allowed, ``finfo.min`` elsewhere, [1, 1, i, j].

    None for the complete mask (HF passes None too). ``exp(finfo.min - max)`` is exactly 0, so
    masked weights are exactly 0, as with the reference ``where(M, S, -inf)``.
    """
    if bool(mask.all()):
        return None
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)[None, None]


def hidden_state_name(t: int) -> str:
    """``embeddings`` for row 0, ``layer_{t}_out`` for the output of the t-th layer applied (1-based)."""
    return "embeddings" if t == 0 else f"layer_{t}_out"


def is_own_mask(model: LoadedModel, mask: Mask, n: int) -> bool:
    """True when ``mask`` at length ``n`` is the model's own (complete for encoders, causal for decoders)."""
    return mask.band(n) == ((-(n - 1), 0) if model.is_decoder else (-(n - 1), n - 1))


def check_d_qk(d_qk: float | None) -> None:
    if d_qk is not None and not (isinstance(d_qk, int | float) and d_qk > 0 and math.isfinite(d_qk)):
        raise RankCollapseError(f"d_qk must be a positive finite number, got {str(d_qk)[:30]}")


def choose_backend(model: LoadedModel, mode: str, mask_is_own: bool, d_qk: float | None, backend: str) -> str:
    """``hf`` (the model's own layer modules) or ``parts`` (:func:`run_block`) for this run.

    ``auto`` picks ``hf`` exactly when it computes the same function as the parts: mode ``full``,
    the model's own mask and ``d_qk``, and parts extracted with Hugging Face's casts (always
    except Llama and T5 in float64, where the parts compute in float64 and HF partly in float32).
    """
    if backend not in BACKENDS:
        raise RankCollapseError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    own_d = d_qk is None or float(d_qk) == model.own_d_qk  # every layer of a model has the same d_qk
    hf_ok = mode == "full" and mask_is_own and own_d
    if backend == "hf" and not hf_ok:
        raise RankCollapseError("backend 'hf' runs only mode 'full' with the model's own mask and d_qk")
    if backend == "auto":
        return "hf" if hf_ok and model.info.get("hf_casts", True) else "parts"
    return backend


def iter_hidden_states(
    model: LoadedModel,
    ids: Tensor,
    *,
    mode: str = "full",
    mask: Mask | str | None = None,
    d_qk: float | None = None,
    layers: int | None = None,
    backend: str = "auto",
) -> Iterator[tuple[int, str, Tensor]]:
    """Yield ``(t, name, X(t))`` for t = 0..L; X: [b, n, d] in the model's dtype. Only the current
    state is kept (copy a tensor to keep it).

    ids: int64 [b, n]. ``mask``: a :class:`~rankcollapse.masks.Mask` (a spec string is parsed
    here, once; None: the model's own). ``d_qk``: the number under the square root of the logits,
    ``S = q k^T / sqrt(d_qk) (+ position bias)`` (None: each layer's own, head_dim; 1 for T5).
    ``layers``: L (default: the model's depth), cycling the model's layers.
    """
    if mode not in MODES:
        raise RankCollapseError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    check_d_qk(d_qk)
    n = ids.shape[1]
    if n > model.max_tokens:
        raise RankCollapseError(
            f"--tokens {n} exceeds the context of {model.name!r} ({model.max_tokens} tokens)"
        )
    n_layers = len(model.layers)
    depth = n_layers if layers is None else int(layers)
    if depth < 0:
        raise RankCollapseError(f"layers must be >= 0, got {layers}")
    the_mask = parse_mask(model.own_mask if mask is None else mask)
    which = choose_backend(model, mode, is_own_mask(model, the_mask, n), d_qk, backend)
    bool_mask = the_mask.dense(n)
    if not bool(bool_mask.diagonal().all()):
        i = int((~bool_mask.diagonal()).nonzero()[0])
        raise RankCollapseError(
            f"mask {the_mask.spec[:60]!r} has no self-loop at token {i} (n = {n}); every token must attend "
            "to itself (the paper's assumption A1)"
        )
    with torch.inference_mode():
        x = model.embed(ids)
        pos = model.positions(x) if model.positions is not None else NO_POSITIONS
        if which == "hf":
            add = additive_mask(bool_mask, x.dtype)
        else:
            softmax_mask = None if bool(bool_mask.all()) else bool_mask
        yield 0, hidden_state_name(0), x
        for t in range(1, depth + 1):
            parts = model.layers[(t - 1) % n_layers]
            if which == "hf":
                x = parts.hf_forward(x, add, pos)
            else:
                x = run_block(parts, x, mode, softmax_mask, d_qk, pos)
            trim_heap_every(t)
            yield t, hidden_state_name(t), x


@dataclass
class AnalyzeConfig:
    """One analysis run. Give ``corpus`` or ``text_file``, not both (None/None: ``wikipedia``).

    ``model``: a name of :func:`rankcollapse.models.registry.resolve_model`. ``mode``: one of
    :data:`~rankcollapse.models.parts.MODES` (:data:`~rankcollapse.models.parts.PAPER_VARIANTS`
    gives the paper's names). ``mask``: a spec or :class:`~rankcollapse.masks.Mask`, parsed once
    here (None: the model's own); the field keeps the canonical spec, :attr:`parsed_mask` the object.
    ``d_qk``: the number under the square root, logits ``q k^T / sqrt(d_qk)`` (None: the model's
    own, head_dim; T5: 1). ``layers``: depth L (None: the model's own), cycling the model's layers.
    ``tokens``: N, the excerpt length including the model's start token. ``metrics``: metric
    names (None: all). ``metric_threads``: torch threads while measuring (default 1: the
    per-layer SVDs are small and multi-threaded small ops stall on a loaded machine).
    """

    model: str = "minilm"
    mode: str = "full"
    mask: str | None = None
    d_qk: float | None = None
    layers: int | None = None
    corpus: str | None = None
    text_file: str | None = None
    samples: int = 16
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    backend: str = "auto"
    metrics: tuple[str, ...] | None = None
    metric_threads: int | None = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise RankCollapseError(f"unknown mode {self.mode!r}; allowed: {', '.join(MODES)}")
        if self.corpus is not None and self.text_file is not None:
            raise RankCollapseError(
                "give a corpus or a text file, not both (--corpus does not apply with --text)"
            )
        if self.text_file is None and self.corpus is None:
            self.corpus = DEFAULT_CORPUS
        if self.corpus is not None and self.corpus not in CORPORA:
            raise RankCollapseError(
                f"unknown corpus {str(self.corpus)[:60]!r}; allowed: {', '.join(CORPORA)} (or --text FILE)"
            )
        if self.samples < 1 or self.tokens < 2:
            raise RankCollapseError(f"need samples >= 1 and tokens >= 2, got {self.samples}, {self.tokens}")
        if self.layers is not None and self.layers < 0:
            raise RankCollapseError(f"layers must be >= 0, got {self.layers}")
        check_d_qk(self.d_qk)
        if self.metric_threads is not None and self.metric_threads < 1:
            raise RankCollapseError(f"metric_threads must be >= 1, got {self.metric_threads}")
        self.dtype = dtype_name(self.dtype)
        self._mask = None if self.mask is None else parse_mask(self.mask)  # a bad spec fails here
        self.mask = None if self._mask is None else self._mask.spec

    @property
    def parsed_mask(self) -> Mask | None:
        """The mask object (parsed once in ``__post_init__``), or None for the model's own."""
        return self._mask


@dataclass
class AnalyzeResult:
    """Rows (one per hidden state: ``layer``, ``hidden_state``, ``model_layer``, ``finite``,
    ``status``, metrics).

    ``finite``: share of samples whose hidden state is finite (metrics cover those samples only).
    ``status``: ``ok``; ``overflow`` where some sample is non-finite (inf / NaN; every metric is
    NaN when no sample is finite); ``underflow`` where some sample is exactly zero (float32 at
    depth: ``mu_rel`` is then 0/0, NaN). ``seconds``: ``load``, ``tokenize``, ``forward`` (layers
    only) and ``metrics``. ``notes``: plain-words remarks about the run.
    """

    config: AnalyzeConfig
    rows: list[dict[str, Any]]
    model_info: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def column(self, name: str) -> list[Any]:
        return [row[name] for row in self.rows]

    @property
    def overflow_layers(self) -> list[int]:
        """Layers ``t`` whose hidden state is non-finite in at least one sample."""
        return [int(r["layer"]) for r in self.rows if r["status"] == "overflow"]


def token_batch(config: AnalyzeConfig, model: LoadedModel) -> Tensor:
    """The [samples, tokens] token ids of a config (:func:`excerpts` of its corpus or text file)."""
    return excerpts(model, config.corpus, config.samples, config.tokens, config.seed, config.text_file)


def model_info(model: LoadedModel, config: AnalyzeConfig) -> dict[str, Any]:
    """What ``config.json`` records about the model (what it is, its label) and the backend."""
    mask = config.parsed_mask or parse_mask(model.own_mask)
    src = model.source
    return {"name": model.name, "label": model.label, "kind": src.kind if src else "",
            "checkpoint": src.checkpoint if src else None, "stand_in_for": src.stand_in_for if src else None,
            "pretrained": src.pretrained if src else None, "arch": model.arch,
            "source": model.info.get("loaded_from", ""), "tokenizer": model.info.get("tokenizer", ""),
            "start_token": model.start_token, "n_layers": len(model.layers), "d_model": model.d_model,
            "own_d_qk": model.own_d_qk, "d_qk": config.d_qk if config.d_qk is not None else model.own_d_qk,
            "is_decoder": model.is_decoder, "own_mask": model.own_mask, "mask": mask.spec,
            "dtype": dtype_name(model.dtype), "max_tokens": model.max_tokens,
            "hf_casts": bool(model.info.get("hf_casts", True)),
            "backend": choose_backend(model, config.mode, is_own_mask(model, mask, config.tokens),
                                      config.d_qk, config.backend)}


def measure(x: Tensor, names: tuple[str, ...] | None = None,
            threads: int | None = None) -> tuple[float, dict[str, float]]:
    """``(finite share, summary)`` of a hidden state x [b, n, d]: for each metric of
    :func:`rankcollapse.metrics.collapse_metrics`, its mean, ``_min``, ``_max`` over samples
    (:func:`rankcollapse.metrics.summarize`) and ``_std``, the sample standard deviation
    (``sqrt(sum (v - mean)^2 / (b - 1))``; NaN for one sample).

    Samples with a non-finite entry (overflow, e.g. ``attn+skip`` in float32 at depth) are left
    out of the metrics and counted in the finite share; with none finite every metric is NaN.
    """
    from rankcollapse.metrics import METRIC_NAMES, collapse_metrics, summarize

    wanted = tuple(names) if names else METRIC_NAMES
    before = torch.get_num_threads()
    if threads is not None and threads != before:
        torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            ok = torch.isfinite(x).flatten(1).all(dim=1)
            finite = 1.0 if bool(ok.all()) else float(ok.to(torch.float64).mean())
            kept = x if finite == 1.0 else x[ok]
            per = collapse_metrics(kept, wanted) if kept.shape[0] else {k: x.new_empty(0) for k in wanted}
            stats = summarize(per)
            for name, values in per.items():
                v = values.detach().reshape(-1).to(torch.float64)
                stats[f"{name}_std"] = float(v.std(correction=1)) if v.numel() > 1 else math.nan
            return finite, stats
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


_MODEL_CACHE: dict[tuple[str, str, int], LoadedModel] = {}


def load_model_cached(name: str, dtype: str, seed: int) -> LoadedModel:
    """:func:`load_model`, keeping the last model in memory (a grid of runs over one model loads it once)."""
    key = (name, dtype, seed)
    if key not in _MODEL_CACHE:
        _MODEL_CACHE.clear()
        _MODEL_CACHE[key] = load_model(name, dtype, seed=seed)
    return _MODEL_CACHE[key]


def row_status(x: Tensor, finite: float) -> str:
    """``overflow`` if some sample is non-finite, else ``underflow`` if some sample's hidden state is
    exactly zero (its ``mu_rel`` is then 0/0, undefined), else ``ok``. x: [b, n, d]."""
    if finite < 1.0:
        return "overflow"
    with torch.inference_mode():
        if bool((x.flatten(1).abs().amax(dim=1) == 0).any()):
            return "underflow"
    return "ok"


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
    model: LoadedModel | None = None,
    ids: Tensor | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> AnalyzeResult:
    """Run ``config``: rows of summarised :func:`rankcollapse.metrics.collapse_metrics` per layer.

    ``model``: an already loaded model (else ``load_model(config.model, config.dtype, seed=config.seed)``,
    the last one kept in memory);
    ``ids``: token ids [b, n] (else :func:`token_batch`); ``on_row`` gets each row as it is made.
    """
    seconds = {"load": 0.0, "tokenize": 0.0, "forward": 0.0, "metrics": 0.0}
    start = time.perf_counter()
    if model is None:
        model = load_model_cached(config.model, config.dtype, config.seed)
    seconds["load"] = time.perf_counter() - start
    start = time.perf_counter()
    if ids is None:
        ids = token_batch(config, model)
    seconds["tokenize"] = time.perf_counter() - start
    notes = [n for n in (_prefix_note(model, ids),) if n]
    for note in notes:
        print(f"rankcollapse: warning: {note}", file=sys.stderr)
    n_layers = len(model.layers)
    rows: list[dict[str, Any]] = []
    stream = iter_hidden_states(model, ids, mode=config.mode, mask=config.parsed_mask, d_qk=config.d_qk,
                                layers=config.layers, backend=config.backend)
    while True:
        start = time.perf_counter()
        try:
            t, name, x = next(stream)
        except StopIteration:
            break
        seconds["forward"] += time.perf_counter() - start
        start = time.perf_counter()
        finite, stats = measure(x, config.metrics, config.metric_threads)
        row = {"layer": t, "hidden_state": name, "model_layer": "" if t == 0 else (t - 1) % n_layers,
               "finite": finite, "status": row_status(x, finite), **stats}
        seconds["metrics"] += time.perf_counter() - start
        rows.append(row)
        if on_row is not None:
            on_row(row)
    result = AnalyzeResult(config=config, rows=rows, model_info=model_info(model, config), seconds=seconds,
                           notes=notes)
    bad = result.overflow_layers
    if bad:
        result.notes.append(f"non-finite hidden states (overflow) from layer {bad[0]} on in {len(bad)} of "
                            f"{len(rows)} rows; metrics there cover the finite samples only (NaN if none)")
    zero = [int(r["layer"]) for r in rows if r["status"] == "underflow"]
    if zero:
        result.notes.append(f"hidden states exactly zero (underflow) from layer {zero[0]} on in {len(zero)} "
                            f"rows: mu_rel there is 0/0, undefined (NaN), not collapse")
    return result


def write_run(result: AnalyzeResult, out_dir: str | Path) -> Path:
    """Write ``config.json`` and ``metrics.csv`` of a finished result (see also the streaming CLI)."""
    from rankcollapse.io import RunWriter

    with RunWriter(out_dir, {"analyze": asdict(result.config), "model": result.model_info,
                             "notes": result.notes}) as writer:
        for row in result.rows:
            writer.write_row(row)
        return writer.metrics_path
