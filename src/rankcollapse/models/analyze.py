"""Layer-by-layer collapse measures of a pretrained (or random-init) model on real text.

:func:`iter_hidden_states` streams the hidden states ``X(0), X(1), ..., X(L)`` of one batch
through the layers (only the current one is kept). Row ``t = 0`` is the embeddings output (the
input of the first layer, named ``embeddings``); row ``t >= 1`` is the output of the ``t``-th
layer applied (named ``layer_{t}_out``), which is model layer ``(t - 1) mod n_layers`` (depth
extension by cycling the model's layers). For GPT-2 and Llama the rows are the residual stream
before the final norm; Hugging Face's last ``hidden_states`` element is ``final_norm`` of it.

:func:`analyze` runs a whole :class:`AnalyzeConfig` and returns an :class:`AnalyzeResult`
with one row of :func:`rankcollapse.metrics.summarize` per hidden state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.errors import RankCollapseError
from rankcollapse.models.corpora import CORPORA, load_corpus, read_text_file, sample_token_batches, tokenize
from rankcollapse.models.loading import LoadedModel, load_model
from rankcollapse.models.parts import MODES, run_block
from rankcollapse.runtime import trim_heap_every

BACKENDS: tuple[str, ...] = ("auto", "hf", "parts")


def dense_mask(spec: str, n: int) -> Tensor:
    """Boolean mask [n, n] of a mask spec (``rankcollapse.masks.parse_mask``)."""
    try:
        from rankcollapse.masks import parse_mask
    except ImportError:  # masks package not there yet: the two masks models need by default
        if spec == "complete":
            return torch.ones(n, n, dtype=torch.bool)
        if spec == "causal":
            return torch.ones(n, n, dtype=torch.bool).tril()
        raise RankCollapseError(f"mask {spec!r} needs rankcollapse.masks, which is not installed") from None
    return parse_mask(spec).dense(n)


def canonical_mask(spec: str) -> str:
    try:
        from rankcollapse.masks import parse_mask
    except ImportError:
        return spec.strip()
    return parse_mask(spec).spec


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


def choose_backend(model: LoadedModel, mode: str, mask_is_own: bool, temperature: float, backend: str) -> str:
    """``hf`` (the model's own layer modules) or ``parts`` (:func:`run_block`) for this run.

    ``auto`` picks ``hf`` exactly when it computes the same function as the parts: mode ``full``,
    the model's own mask, temperature 1, and parts extracted with Hugging Face's casts (always
    except Llama in float64, where the parts compute in float64 and HF's Llama partly in float32).
    """
    if backend not in BACKENDS:
        raise RankCollapseError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    hf_ok = mode == "full" and mask_is_own and temperature == 1.0
    if backend == "hf" and not hf_ok:
        raise RankCollapseError(
            "backend 'hf' runs only mode 'full' with the model's own mask and temperature 1"
        )
    if backend == "auto":
        return "hf" if hf_ok and model.info.get("hf_casts", True) else "parts"
    return backend


def iter_hidden_states(
    model: LoadedModel,
    ids: Tensor,
    *,
    mode: str = "full",
    mask: str | None = None,
    temperature: float = 1.0,
    layers: int | None = None,
    backend: str = "auto",
) -> Iterator[tuple[int, str, Tensor]]:
    """Yield ``(t, name, X(t))`` for t = 0..L; X: [b, n, d]. Only the current state is kept.

    ids: int64 [b, n]. ``mask``: a mask spec (default: the model's own). ``temperature`` T
    divides the logits: ``S = scaling / T * q k^T`` (T = 1: the model's own). ``layers``: L
    (default: the model's depth), cycling the model's layers.
    """
    if mode not in MODES:
        raise RankCollapseError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    if not temperature > 0 or temperature == float("inf"):
        raise RankCollapseError(f"temperature must be a positive finite number, got {temperature}")
    n = ids.shape[1]
    if n > model.max_tokens:
        raise RankCollapseError(
            f"--tokens {n} exceeds the context of {model.name!r} ({model.max_tokens} tokens)"
        )
    n_layers = len(model.layers)
    depth = n_layers if layers is None else int(layers)
    if depth < 0:
        raise RankCollapseError(f"layers must be >= 0, got {layers}")
    spec = model.own_mask if mask is None else mask
    mask_is_own = canonical_mask(spec) == canonical_mask(model.own_mask)
    which = choose_backend(model, mode, mask_is_own, temperature, backend)
    bool_mask = dense_mask(spec, n)
    with torch.inference_mode():
        x = model.embed(ids)
        pos = None
        if model.rotary is not None:
            pos = model.rotary(x, torch.arange(n)[None])
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
                x = run_block(parts, x, mode, softmax_mask, temperature, pos)
            trim_heap_every(t)
            yield t, hidden_state_name(t), x


@dataclass
class AnalyzeConfig:
    """One analysis run. ``corpus`` is ignored when ``text_file`` is given.

    ``temperature`` T divides the attention logits (``S = scaling / T * q k^T``; with the usual
    ``scaling = 1/sqrt(e)`` this is the paper's ``d_QK = e T^2``). ``layers``: depth L (None:
    the model's own), cycling the model's layers. ``metrics``: metric names to compute (None: all).
    ``metric_threads``: torch threads while measuring (default 1: the per-layer SVDs and reductions
    are small, and on a loaded machine multi-threaded small ops stall, measured 4x slower with 2
    threads; None keeps torch's setting). The forward pass always uses torch's setting.
    """

    model: str = "minilm"
    mode: str = "full"
    mask: str | None = None
    temperature: float = 1.0
    layers: int | None = None
    corpus: str = "shakespeare"
    text_file: str | None = None
    samples: int = 16
    tokens: int = 64
    dtype: str = "f32"
    seed: int = 0
    backend: str = "auto"
    metrics: tuple[str, ...] | None = None
    metric_threads: int | None = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise RankCollapseError(f"unknown mode {self.mode!r}; allowed: {', '.join(MODES)}")
        if self.text_file is None and self.corpus not in CORPORA:
            raise RankCollapseError(
                f"unknown corpus {self.corpus!r}; allowed: {', '.join(CORPORA)} (or --text FILE)"
            )
        if self.samples < 1 or self.tokens < 2:
            raise RankCollapseError(f"need samples >= 1 and tokens >= 2, got {self.samples}, {self.tokens}")
        if self.layers is not None and self.layers < 0:
            raise RankCollapseError(f"layers must be >= 0, got {self.layers}")
        if not (self.temperature > 0 and self.temperature != float("inf")):
            raise RankCollapseError(f"temperature must be a positive finite number, got {self.temperature}")
        if self.metric_threads is not None and self.metric_threads < 1:
            raise RankCollapseError(f"metric_threads must be >= 1, got {self.metric_threads}")
        if self.mask is not None:
            canonical_mask(self.mask)  # a bad spec fails here, before any model is loaded


@dataclass
class AnalyzeResult:
    """Rows (one per hidden state: ``layer``, ``hidden_state``, ``model_layer``, ``finite``, metrics).

    ``finite``: share of samples whose hidden state is finite (metrics cover those samples only).

    ``seconds``: ``load``, ``tokenize``, ``forward`` (layers only) and ``metrics``.
    """

    config: AnalyzeConfig
    rows: list[dict[str, Any]]
    model_info: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)

    def column(self, name: str) -> list[Any]:
        return [row[name] for row in self.rows]


def token_batch(config: AnalyzeConfig, model: LoadedModel) -> Tensor:
    """The [samples, tokens] token ids of a config (corpus or text file, seeded windows)."""
    text = read_text_file(config.text_file) if config.text_file else load_corpus(config.corpus)
    if config.tokens > model.max_tokens:
        raise RankCollapseError(
            f"--tokens {config.tokens} exceeds the context of {model.name!r} ({model.max_tokens} tokens)"
        )
    all_ids = _tokenize_cached(text, model.tokenizer)
    return sample_token_batches(all_ids, config.samples, config.tokens, config.seed)


_TOKEN_CACHE: dict[str, Tensor] = {}


def _tokenize_cached(text: str, tokenizer: Any) -> Tensor:
    """Token ids of ``text``, cached in memory and under ``cache_dir()/tokens`` (keyed by the text's
    and the tokenizer's identity), so a corpus is tokenised once per tokenizer, not once per run."""
    import hashlib

    from rankcollapse.models.loading import cache_dir

    ident = f"{type(tokenizer).__name__}|{getattr(tokenizer, 'name_or_path', '')}|{len(tokenizer)}"
    key = (hashlib.sha1(text.encode("utf-8")).hexdigest()[:16] + "-"
           + hashlib.sha1(ident.encode()).hexdigest()[:12])
    if key in _TOKEN_CACHE:
        return _TOKEN_CACHE[key]
    path = cache_dir() / "tokens" / f"{key}.pt"
    ids = None
    if path.is_file():
        try:
            ids = torch.load(path, weights_only=True)
        except (OSError, RuntimeError):
            ids = None
    if ids is None:
        ids = tokenize(text, tokenizer)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            torch.save(ids, tmp)
            tmp.replace(path)
        except OSError:
            pass  # a read-only cache only costs time
    _TOKEN_CACHE.clear()
    _TOKEN_CACHE[key] = ids
    return ids


def model_info(model: LoadedModel, config: AnalyzeConfig) -> dict[str, Any]:
    """What ``config.json`` records about the model and the backend a config runs on."""
    mask_is_own = config.mask is None or canonical_mask(config.mask) == canonical_mask(model.own_mask)
    return {"name": model.name, "arch": model.arch, "source": model.source, "n_layers": len(model.layers),
            "d_model": model.d_model, "is_decoder": model.is_decoder, "own_mask": model.own_mask,
            "dtype": str(model.dtype).replace("torch.", ""), "max_tokens": model.max_tokens,
            "hf_casts": bool(model.info.get("hf_casts", True)),
            "backend": choose_backend(model, config.mode, mask_is_own, config.temperature, config.backend)}


def measure(x: Tensor, names: tuple[str, ...] | None = None,
            threads: int | None = None) -> tuple[float, dict[str, float]]:
    """``(finite share, summarize(collapse_metrics(...)))`` of a hidden state x [b, n, d].

    Samples with a non-finite entry (overflow, e.g. ``attn+skip`` in float32 at depth) are left
    out of the metrics and counted in the finite share; with none finite every metric is NaN.
    """
    from rankcollapse.metrics import METRIC_NAMES, collapse_metrics, summarize

    wanted = tuple(names) if names else METRIC_NAMES
    before = torch.get_num_threads()
    if threads is not None and threads != before:
        torch.set_num_threads(threads)
    try:
        return _measure(x, wanted, collapse_metrics, summarize)
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _measure(x: Tensor, wanted: tuple[str, ...], collapse_metrics: Any,
             summarize: Any) -> tuple[float, dict[str, float]]:
    with torch.inference_mode():
        ok = torch.isfinite(x).flatten(1).all(dim=1)
        if bool(ok.all()):
            return 1.0, summarize(collapse_metrics(x, wanted))
        kept = x[ok]
        per = collapse_metrics(kept, wanted) if kept.shape[0] else {k: x.new_empty(0) for k in wanted}
        return float(ok.to(torch.float64).mean()), summarize(per)


def analyze(
    config: AnalyzeConfig,
    *,
    model: LoadedModel | None = None,
    ids: Tensor | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> AnalyzeResult:
    """Run ``config``: rows of summarised :func:`rankcollapse.metrics.collapse_metrics` per layer.

    ``model``: an already loaded model (else ``load_model(config.model, config.dtype, seed=config.seed)``);
    ``ids``: token ids [b, n] (else sampled from the corpus); ``on_row`` gets each row as it is made.
    """
    seconds = {"load": 0.0, "tokenize": 0.0, "forward": 0.0, "metrics": 0.0}
    start = time.perf_counter()
    if model is None:
        model = load_model(config.model, config.dtype, seed=config.seed)
    seconds["load"] = time.perf_counter() - start
    start = time.perf_counter()
    if ids is None:
        ids = token_batch(config, model)
    seconds["tokenize"] = time.perf_counter() - start
    n_layers = len(model.layers)
    rows: list[dict[str, Any]] = []
    stream = iter_hidden_states(model, ids, mode=config.mode, mask=config.mask,
                                temperature=config.temperature, layers=config.layers, backend=config.backend)
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
               "finite": finite, **stats}
        seconds["metrics"] += time.perf_counter() - start
        rows.append(row)
        if on_row is not None:
            on_row(row)
    info = model_info(model, config)
    return AnalyzeResult(config=config, rows=rows, model_info=info, seconds=seconds)


def write_run(result: AnalyzeResult, out_dir: str | Path) -> Path:
    """Write ``config.json`` and ``metrics.csv`` of a finished result (see also the streaming CLI)."""
    from rankcollapse.io import RunWriter

    with RunWriter(out_dir, {"analyze": asdict(result.config), "model": result.model_info}) as writer:
        for row in result.rows:
            writer.write_row(row)
        return writer.metrics_path
