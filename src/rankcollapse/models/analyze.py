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
with one row of :func:`rankcollapse.metrics.summarize` per hidden state.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.execution import batch_slices, check_batch_size, device_memory, parse_device
from rankcollapse.core.precision import dtype_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.progress import progress as progress_lines
from rankcollapse.edge.validate import check_memory, quote
from rankcollapse.masks import Mask, in_memory_note
from rankcollapse.masks.schedule import MaskSchedule
from rankcollapse.metrics import document_columns, metric_names
from rankcollapse.metrics.diagnostics import SINK_THRESHOLD
from rankcollapse.models.corpora import CORPORA, DEFAULT_CORPUS
from rankcollapse.models.diagnose import (
    ABLATIONS,
    chunked_diagnostic_values,
    diagnostic_row,
    diagnostic_values,
    layer_schedule_info,
    mean_defined,
)
from rankcollapse.models.excerpts import check_excerpts, excerpts
from rankcollapse.models.inputs import (
    borrowed,
    from_memory,
    no_tokenizer_message,
    text_batch,
    with_tokenizer,
)
from rankcollapse.models.loading import LoadedModel, load_model
from rankcollapse.models.names import tl_hook_names
from rankcollapse.models.parts import MODES, chunk_rows
from rankcollapse.models.stream import (  # noqa: F401  (re-exported: the names of the stream)
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


@dataclass
class AnalyzeConfig:
    """One analysis run. Give ``corpus`` or ``text_file``, not both (None/None: ``wikipedia``).

    ``model``: a name of :func:`rankcollapse.models.registry.resolve_model`. ``mode``: one of
    :data:`~rankcollapse.models.parts.MODES` (:data:`~rankcollapse.models.parts.PAPER_VARIANTS`
    gives the paper's names). ``mask``: a spec or :class:`~rankcollapse.masks.Mask`, a predicate
    ``f(i, j)`` or a bool tensor [N, N] (:mod:`rankcollapse.masks.custom`: the predicate is evaluated
    at each text's own length, the tensor gives its top-left block, N >= every text's length), parsed
    once here (None: the model's own); the field keeps the canonical spec (a label for a predicate or
    a tensor, which ``config.json`` records with a note), :attr:`parsed_mask` the object.
    ``d_qk``: the number under the square root, logits ``q k^T / sqrt(d_qk)`` (None: the model's
    own, head_dim; T5: 1). ``layers``: depth L (None: the model's own), cycling the model's layers.
    ``tokens``: N, the excerpt length including the model's start token. ``metrics``: metric
    names (None: all). ``metric_threads``: torch threads while measuring (default 1: the
    per-layer SVDs are small and multi-threaded small ops stall on a loaded machine).
    ``mask`` may be a schedule (``causal-window:w=3;causal``: one mask per layer, cycled).
    ``diagnostics``: add attention entropy (per head and mean), sink rate (threshold
    ``sink_threshold``), first-token attention and norm, largest activations and the massive
    ratio to each row (``rankcollapse.metrics.diagnostics``; parts backend). Each layer forms its
    attention weights ``diagnostics_chunk`` query rows at a time and keeps only their per-query
    reductions (None: the rows of :data:`~rankcollapse.models.parts.CHUNK_BYTES`, 128 MiB per sample,
    :func:`~rankcollapse.models.parts.chunk_rows`), never the whole ``[b, h, n, n]`` map (except for
    ``on_attention``, which gets it). ``ablation``
    ``"sinks"``: damp every query's attention on the first token by ``sink_damping`` (0: remove)
    and renormalise.

    ``device``: where the model, its inputs and the metrics run: ``cpu``, ``cuda`` or ``cuda:K``
    (:func:`rankcollapse.core.execution.parse_device`, checked here; float64 where the device lacks
    it is refused). ``batch_size``: the ``samples`` excerpts (drawn as always: the same seed gives the
    same excerpts) go through the model ``batch_size`` at a time, so memory holds the hidden states of
    one batch; every statistic is computed from all samples' values together, so the rows are those
    of one batch (to the last bit on the CPU). None, or more than ``samples``: one batch (clamped).
    """

    model: str = "minilm"
    mode: str = "full"
    mask: str | Any | None = None
    d_qk: float | None = None
    layers: int | None = None
    corpus: str | None = None
    text_file: str | None = None
    samples: int = 16
    tokens: int = 128
    dtype: str | None = None  # None: float32 for a model loaded by name, an in-memory model's own dtype
    seed: int = 0
    backend: str = "auto"
    metrics: tuple[str, ...] | str | None = None  # "mu,mu_rel" or names; metrics.metric_names parses it
    metric_threads: int | None = 1
    diagnostics: bool = False
    diagnostics_chunk: int | None = None
    sink_threshold: float = SINK_THRESHOLD
    ablation: str | None = None
    sink_damping: float | None = None
    device: str = "cpu"
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.ablation not in ABLATIONS:
            got = quote(str(self.ablation), 40)
            raise RankCollapseError(f"unknown ablation {got}; allowed: sinks (or none)")
        if self.sink_damping is not None and self.ablation != "sinks":
            raise RankCollapseError("--sink-damping applies only with --ablation sinks")
        if self.ablation == "sinks":
            self.sink_damping = 0.0 if self.sink_damping is None else float(self.sink_damping)
            if not 0.0 <= self.sink_damping <= 1.0:
                raise RankCollapseError(
                    f"--sink-damping {self.sink_damping} is invalid; allowed: a number in [0, 1]")
        if not (isinstance(self.sink_threshold, int | float) and 0.0 <= self.sink_threshold <= 1.0):
            raise RankCollapseError(
                f"--sink-threshold {str(self.sink_threshold)[:20]} is invalid; allowed: a number in [0, 1]")
        if self.sink_threshold != SINK_THRESHOLD and not self.diagnostics:
            raise RankCollapseError("--sink-threshold applies only with --diagnostics")
        if self.diagnostics_chunk is not None:
            c = self.diagnostics_chunk
            if isinstance(c, bool) or not isinstance(c, int) or c < 1:
                raise RankCollapseError(f"--diagnostics-chunk {quote(c, 20)} is invalid; allowed: a positive "
                                        "number of query rows")
            if not self.diagnostics:
                raise RankCollapseError("--diagnostics-chunk applies only with --diagnostics")
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
                f"unknown corpus {quote(str(self.corpus))}; allowed: {', '.join(CORPORA)} (or --text FILE)"
            )
        if self.samples < 1 or self.tokens < 2:
            raise RankCollapseError(f"need samples >= 1 and tokens >= 2, got {self.samples}, {self.tokens}")
        if self.layers is not None and self.layers < 0:
            raise RankCollapseError(f"layers must be >= 0, got {self.layers}")
        check_d_qk(self.d_qk)
        if self.metric_threads is not None and self.metric_threads < 1:
            raise RankCollapseError(f"metric_threads must be >= 1, got {self.metric_threads}")
        self.metrics = metric_names(self.metrics)
        self._dtype_given = self.dtype is not None  # an in-memory model of another dtype is refused
        self.dtype = dtype_name(self.dtype or "float32")
        self.device = str(parse_device(self.device, self.dtype))
        self.batch_size = check_batch_size(self.batch_size)
        self._mask = user_schedule(self.mask)  # a bad spec fails here
        if self._mask is not None and len(self._mask.period) == 1:
            self._mask = self._mask.period[0]
        self.mask = None if self._mask is None else self._mask.spec

    @property
    def parsed_mask(self) -> Mask | MaskSchedule | None:
        """The mask (or schedule) object, parsed once in ``__post_init__``; None for the model's own."""
        return self._mask


@dataclass
class AnalyzeResult:
    """Rows (one per hidden state: ``layer``, ``hidden_state``, ``model_layer``, ``finite``,
    ``status``, ``hook``, metrics; ``mu_rel_doc{k}`` and ``mu_rel_docs_max`` when the mask splits the
    tokens into independent parts, e.g. ``document:``).

    ``hook``: the TransformerLens name of the same tensor, ``""`` where TransformerLens has no such
    tensor (:func:`rankcollapse.models.names.tl_hook_names`). ``samples``: per row, each metric's
    value per sample (float64 [b], NaN for a non-finite sample): :meth:`per_sample_rows`,
    ``to_frame(per_sample=True)``. ``ids``: the token ids read, int64 [b, n] (right padding: 0).

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
    samples: list[dict[str, Tensor]] = field(default_factory=list, repr=False)
    ids: Tensor | None = field(default=None, repr=False)

    def column(self, name: str) -> list[Any]:
        return [row[name] for row in self.rows]

    def __repr__(self) -> str:
        """A short notebook line: the model, the rows, the metrics, mu_rel from the first to the last row
        (the full record: ``.rows``, ``.to_frame()``, ``.model_info``)."""
        from rankcollapse.metrics import METRIC_NAMES

        label = self.model_info.get("label") or self.config.model
        metrics = [k for k in (self.rows[0] if self.rows else {}) if k in METRIC_NAMES]
        span = ""
        if self.rows and "mu_rel" in self.rows[0]:
            span = f", mu_rel {self.rows[0]['mu_rel']:.3g} -> {self.rows[-1]['mu_rel']:.3g}"
        layers = f"layers {self.rows[0]['layer']}..{self.rows[-1]['layer']}" if self.rows else "no rows"
        return (
            f"AnalyzeResult({label!r}, mode {self.config.mode!r}, {len(self.rows)} rows ({layers}), "
            f"metrics {', '.join(metrics)}{span}; .to_frame() for the table)"
        )

    def per_sample_rows(self) -> list[dict[str, Any]]:
        """One row per hidden state and sample: ``layer``, ``hidden_state``, ``model_layer``, ``hook``,
        ``sample`` (its index in the batch), then each metric's value for that sample (NaN when the
        sample's hidden state is non-finite). The batch rows' mean, ``_min`` and ``_max`` are over these."""
        out = []
        for row, values in zip(self.rows, self.samples, strict=True):
            head = {k: row[k] for k in ("layer", "hidden_state", "model_layer", "hook")}
            b = len(next(iter(values.values()))) if values else 0
            for i in range(b):
                out.append({**head, "sample": i, **{k: float(v[i]) for k, v in values.items()}})
        return out

    def to_frame(self, per_sample: bool = False) -> Any:
        """The rows as a ``pandas.DataFrame``: one row per hidden state (columns as in ``metrics.csv``),
        or with ``per_sample=True`` one per hidden state and sample (:meth:`per_sample_rows`, as
        ``per_sample.csv``)."""
        import pandas as pd

        return pd.DataFrame(self.per_sample_rows() if per_sample else self.rows)

    def figures(self) -> dict[str, Any]:
        """Every figure of this run that applies, by name (``mu``, ``geometry``, and ``diagnostics`` with
        ``diagnostics=True``): ``matplotlib.figure.Figure`` objects one paper column wide, not registered
        with pyplot (``fig.savefig(path)``); :func:`rankcollapse.models.plot.figures`."""
        from rankcollapse.models.plot import figures

        return figures(self)

    @property
    def overflow_layers(self) -> list[int]:
        """Layers ``t`` whose hidden state is non-finite in at least one sample."""
        return [int(r["layer"]) for r in self.rows if r["status"] == "overflow"]


def kept_bytes(samples: int, tokens: int, rows: int = 0, metrics: int = 0) -> int:
    """What a run keeps for all its samples, whatever the batches: token ids (int64, a few index
    temporaries) and, per row and metric, one float64 value per sample (twice: the rows are made
    from them)."""
    return 3 * samples * tokens * 8 + 2 * rows * metrics * samples * 8


def batch_bytes(model: LoadedModel, batch: int, tokens: int) -> int:
    """One batch in the model: about eight ``[b, n, d]`` activations alive at once (residual, q, k, v,
    attention output, MLP hidden at 4d) and two ``[b, h, n, n]`` attention maps."""
    itemsize = torch.empty((), dtype=model.dtype).element_size()
    parts = model.layers[0] if model.layers else None
    cfg = model.hf_model.config
    width = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "n_embd", 0) or 768)
    heads = parts.n_heads if parts is not None else int(getattr(cfg, "num_attention_heads", 12))
    return forward_bytes(batch, tokens, width, heads, itemsize)


def forward_bytes(batch: int, tokens: int, width: int, heads: int, itemsize: int) -> int:
    """The estimate of :func:`batch_bytes` from the sizes: ``8 b n d + 2 b h n^2`` elements of
    ``itemsize`` bytes (eight ``[b, n, d]`` activations, two ``[b, h, n, n]`` attention maps)."""
    return (8 * batch * tokens * width + 2 * batch * heads * tokens * tokens) * itemsize


def token_batch(config: AnalyzeConfig, model: LoadedModel) -> Tensor:
    """The [samples, tokens] token ids of a config (:func:`excerpts` of its corpus or text file), on the CPU.

    A run whose estimated memory exceeds what this machine has is refused before anything is
    allocated (after the context and the tokenizer: :func:`check_excerpts`): what every sample keeps
    (:func:`kept_bytes`) and one batch in the model (:func:`batch_bytes`, ``config.batch_size``
    samples or all), on the CPU; on CUDA the batch is checked against what is free on the GPU.
    """
    from rankcollapse.metrics import METRIC_NAMES

    check_excerpts(model, config.tokens)
    batch = min(config.batch_size or config.samples, config.samples)
    depth = config.layers if config.layers is not None else (len(model.layers) or model.n_model_layers)
    metrics = len(config.metrics or METRIC_NAMES)
    what = f"analyze of {model.name}: {config.samples} samples x {config.tokens} tokens, batches of {batch}"
    kept = kept_bytes(config.samples, config.tokens, depth + 1, metrics)
    in_model = batch_bytes(model, batch, config.tokens)
    if model.device.type == "cpu":
        check_memory(what, kept + in_model)
    else:
        check_memory(what, kept)
        check_memory(f"{what} on {model.device}", in_model, device_memory(model.device))
    return excerpts(model, config.corpus, config.samples, config.tokens, config.seed, config.text_file)


def model_info(model: LoadedModel, config: AnalyzeConfig) -> dict[str, Any]:
    """What ``config.json`` records about the model (what it is, its label) and the backend."""
    mask = config.parsed_mask
    src = model.source
    check_surgery(model, config)
    return {"name": model.name, "label": model.label, "kind": src.kind if src else "",
            "checkpoint": src.checkpoint if src else None, "stand_in_for": src.stand_in_for if src else None,
            "pretrained": src.pretrained if src else None, "arch": model.arch,
            "source": model.info.get("loaded_from", ""), "tokenizer": model.info.get("tokenizer", ""),
            "start_token": model.start_token, "n_layers": len(model.layers), "d_model": model.d_model,
            "own_d_qk": model.own_d_qk, "d_qk": config.d_qk if config.d_qk is not None else model.own_d_qk,
            "is_decoder": model.is_decoder, "own_mask": model.own_mask,
            "mask": model.own_mask if mask is None else mask.spec, "dissected": model.dissected,
            **layer_schedule_info(model, mask, config.layers),
            "dtype": str(model.dtype).removeprefix("torch."), "max_tokens": model.max_tokens,
            "hf_casts": bool(model.info.get("hf_casts", True)),
            "backend": choose_backend(model, config.mode, is_own_mask(model, mask, config.tokens),
                                      config.d_qk, "parts" if _surgery(config) else config.backend),
            "diagnostics": config.diagnostics, "ablation": config.ablation,
            "sink_damping": config.sink_damping,
            "note": model.info.get("note")}


def _surgery(config: AnalyzeConfig) -> bool:
    return config.diagnostics or config.ablation is not None


def check_surgery(model: LoadedModel, config: AnalyzeConfig) -> None:
    """Refuse diagnostics or an ablation on a model whose layers are not dissected (one line), before
    anything runs: both need each layer's attention weights."""
    if _surgery(config) and not model.dissected:
        raise RankCollapseError(f"{model.arch!r} is not dissected: --diagnostics and --ablation need the "
                                "attention weights of a dissected family")


def measure(x: Tensor, names: tuple[str, ...] | None = None,
            threads: int | None = None, lengths: Tensor | None = None) -> tuple[float, dict[str, float]]:
    """``(finite share, summary)`` of a hidden state x [b, n, d]: for each metric of
    :func:`rankcollapse.metrics.collapse_metrics`, its mean, ``_min``, ``_max`` over samples
    (:func:`rankcollapse.metrics.summarize`) and ``_std``, the sample standard deviation
    (``sqrt(sum (v - mean)^2 / (b - 1))``; NaN for one sample).

    Samples with a non-finite entry (overflow, e.g. ``attn+skip`` in float32 at depth) are left
    out of the metrics and counted in the finite share; with none finite every metric is NaN.
    ``lengths`` [b]: sample ``i`` is its first ``lengths[i]`` tokens (right padding left out of
    mu, ranks and cosines: each sample's metrics are those of its unpadded ``x[i, :lengths[i]]``).
    """
    finite, stats, _ = measure_samples(x, names, threads, lengths)
    return finite, stats


def measure_samples(x: Tensor, names: tuple[str, ...] | None = None, threads: int | None = None,
                    lengths: Tensor | None = None) -> tuple[float, dict[str, float], dict[str, Tensor]]:
    """:func:`measure` and the values it summarises: per metric, float64 [b], one per sample (NaN for
    a non-finite sample; ``metrics.per_sample_metrics``)."""
    ok, values = sample_values(x, names, threads, lengths)
    finite, stats = summarize_samples(ok, values)
    return finite, stats, values


def sample_values(x: Tensor, names: tuple[str, ...] | None = None, threads: int | None = None,
                  lengths: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """Per sample of x [b, n, d] (wherever it lives): ``ok`` bool [b] (its hidden state is finite) and
    each metric's value, float64 [b] (NaN where not ok), both on the CPU. The values of several batches
    concatenated are those of one batch of all their samples; :func:`summarize_samples` summarises them."""
    from rankcollapse.metrics import METRIC_NAMES, per_sample_metrics

    wanted = tuple(names) if names else METRIC_NAMES
    before = torch.get_num_threads()
    if threads is not None and threads != before:
        torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            if lengths is None:
                lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.long)
            ok = torch.stack([torch.isfinite(x[i, : int(m)]).all() for i, m in enumerate(lengths)]).cpu()
            return ok, per_sample_metrics(x, wanted, lengths)  # NaN for a sample that is not finite
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def summarize_samples(ok: Tensor, values: dict[str, Tensor]) -> tuple[float, dict[str, float]]:
    """``(finite share, summary)`` of per-sample values (:func:`sample_values`, of one batch or several
    concatenated): the share of ok samples, and over the ok ones each metric's mean, ``_min``, ``_max``
    (:func:`rankcollapse.metrics.summarize`) and ``_std`` (``sqrt(sum (v - mean)^2 / (b - 1))``; NaN
    for one sample)."""
    from rankcollapse.metrics import summarize

    with torch.inference_mode():
        finite = 1.0 if bool(ok.all()) else float(ok.to(torch.float64).mean())
        per = {k: v[ok] for k, v in values.items()}
        stats = summarize(per)
        for name, v in per.items():
            stats[f"{name}_std"] = float(v.std(correction=1)) if v.numel() > 1 else math.nan
    return finite, stats


_MODEL_CACHE: dict[tuple[str, str, int, str], LoadedModel] = {}


def load_model_cached(name: str, dtype: str, seed: int, device: str = "cpu") -> LoadedModel:
    """:func:`load_model`, keeping the last model in memory (a grid of runs over one model loads it once)."""
    key = (name, dtype, seed, str(device))
    if key not in _MODEL_CACHE:
        _MODEL_CACHE.clear()
        _MODEL_CACHE[key] = load_model(name, dtype, seed=seed, device=device)
    return _MODEL_CACHE[key]


def zero_samples(x: Tensor) -> Tensor:
    """bool [b] on the CPU: sample ``i`` of x [b, n, d] is exactly zero (its ``mu_rel`` is 0/0)."""
    with torch.inference_mode():
        return (x.flatten(1).abs().amax(dim=1) == 0).cpu()


def status_of(finite: float, zero: Tensor) -> str:
    """``overflow`` if some sample is non-finite (``finite < 1``), else ``underflow`` if some sample is
    exactly zero (``zero`` bool [b], :func:`zero_samples`; its ``mu_rel`` is then 0/0, undefined),
    else ``ok``."""
    if finite < 1.0:
        return "overflow"
    return "underflow" if bool(zero.any()) else "ok"


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

    ``progress``: progress on stderr (a bar on a terminal, a plain line every 10 s otherwise).
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
            model = load_model_cached(config.model, config.dtype, config.seed, config.device)
        elif hf_in is not None:
            model = from_memory(hf_in)
            check_model_dtype(model, config)
            skipped = hooks_skipped(hf_in, config.mode)
            if skipped:
                print(f"rankcollapse: warning: {skipped}", file=sys.stderr)
                model.info["note"] = "; ".join(n for n in (model.info.get("note"), skipped) if n)
        check_model_device(model, config.device)
        model = with_tokenizer(model, tokenizer, hf_in)
        seconds["load"] = time.perf_counter() - start
        return _run(config, model, ids, on_row, texts, attention_mask, progress, on_attention, seconds,
                    in_memory=hf_in is not None)


def check_model_dtype(model: LoadedModel, config: AnalyzeConfig) -> None:
    """An in-memory model is measured in its own dtype (it is borrowed, never cast): a ``dtype`` given
    that differs is refused in one line instead of silently running in the model's."""
    own = str(model.dtype).removeprefix("torch.")
    if getattr(config, "_dtype_given", False) and own != config.dtype:
        raise RankCollapseError(
            f"the model given is {own}, not dtype {config.dtype!r}; cast it first (e.g. model.double()) or "
            "leave dtype unset: an in-memory model is measured in its own dtype"
        )


def hooks_skipped(hf_model: Any, mode: str) -> str:
    """A sentence when the user's forward hooks on ``hf_model`` will not run: outside mode ``full``
    the layers are reassembled from their parts, so the model's own modules (and their hooks) are not
    called; "" when there is none or the mode is ``full``."""
    if mode == "full":
        return ""
    count = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in hf_model.modules())
    if not count:
        return ""
    return (f"{count} forward hook{'s' if count > 1 else ''} on the model will not run in mode {mode!r} "
            "(its layers are reassembled from their parts); they run in mode 'full'")


def check_model_device(model: LoadedModel, device: str) -> None:
    """A model given to :func:`analyze` must be on the config's device (it is borrowed, never moved)."""
    want, have = torch.device(device), model.device
    if have.type != want.type or (want.index is not None and have.index not in (None, want.index)):
        raise RankCollapseError(f"the model given is on {have}, not on device {want}; pass device='{have}' "
                                f"or move the model to {want} first")


@dataclass
class _LayerSamples:
    """What one row is made from: every batch's per-sample values of one hidden state, in sample order."""

    name: str = ""
    ok: list[Tensor] = field(default_factory=list)
    values: list[dict[str, Tensor]] = field(default_factory=list)
    zero: list[Tensor] = field(default_factory=list)
    docs: list[dict[str, Tensor]] = field(default_factory=list)
    diagnostics: list[dict[str, Tensor]] = field(default_factory=list)

    @staticmethod
    def _cat(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]} if parts else {}

    def row(self, t: int, n_layers: int, hook: str, threshold: float, n_heads: int | None
            ) -> tuple[dict[str, Any], dict[str, Tensor]]:
        """Row ``t`` and its per-sample metric values (all batches concatenated)."""
        values = self._cat(self.values)
        finite, stats = summarize_samples(torch.cat(self.ok), values)
        row = {"layer": t, "hidden_state": self.name, "model_layer": "" if t == 0 else (t - 1) % n_layers,
               "finite": finite, "status": status_of(finite, torch.cat(self.zero)), "hook": hook, **stats}
        row.update({k: mean_defined(v) for k, v in self._cat(self.docs).items()})
        if self.diagnostics:
            row.update(diagnostic_row(self._cat(self.diagnostics), threshold, n_heads))
        return row, values


def _run(config: AnalyzeConfig, model: LoadedModel, ids: Tensor | None,
         on_row: Callable[[dict[str, Any]], None] | None, texts: list[str] | None,
         attention_mask: Tensor | None, progress: bool, on_attention: Callable[[int, Tensor], None] | None,
         seconds: dict[str, float], in_memory: bool) -> AnalyzeResult:
    start = time.perf_counter()
    check_surgery(model, config)
    if texts is not None and ids is not None:
        raise RankCollapseError("give ids or texts, not both")
    if ids is None and model.tokenizer is None and in_memory:
        raise RankCollapseError(no_tokenizer_message(model))
    if texts is not None:
        ids, attention_mask = text_batch(model, list(texts), config.tokens)
    if ids is None:
        ids = token_batch(config, model)
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
        print(f"rankcollapse: warning: {note}", file=sys.stderr)
    n_layers = len(model.layers) if model.dissected else model.n_model_layers
    if model.info.get("note"):
        notes.append(model.info["note"])
    notes += [n for n in (in_memory_note(config.parsed_mask),) if n]  # config.json: the mask by label only
    rows: list[dict[str, Any]] = []
    samples: list[dict[str, Tensor]] = []
    docs = run_documents(model, config, ids.shape[1])
    record: dict[str, Any] | None = {} if config.diagnostics else None
    depth = n_layers if config.layers is None else config.layers
    hooks = tl_hook_names(model, depth, own=_own_tensors(model, config, ids.shape[1]))
    count = len(batch_slices(int(ids.shape[0]), config.batch_size))
    if on_attention is not None and count > 1:
        raise RankCollapseError(f"saving attention patterns needs one batch; got {count} batches of "
                                f"{config.batch_size} (--batch-size at least --samples {ids.shape[0]})")
    layers = [_LayerSamples() for _ in range(depth + 1)]
    heads = model.layers[0].n_heads if config.diagnostics else None
    chunk = None  # on_attention gets each layer's whole map: the reference path
    if config.diagnostics and on_attention is None:
        heads_max = max(p.n_heads for p in model.layers)
        chunk = config.diagnostics_chunk or chunk_rows(heads_max, int(ids.shape[1]))
    bar = progress_lines((depth + 1) * count, f"analyze {model.label}", "layers", enabled=progress)
    try:
        for j, batch in enumerate(iter_batches(ids, config.batch_size, model.device, attention_mask)):
            last = j == count - 1
            real = None if lengths is None else lengths[batch.rows]  # the batch's samples' lengths
            stream = iter_hidden_states(model, batch.ids, mode=config.mode, mask=config.parsed_mask,
                                        d_qk=config.d_qk, layers=config.layers, backend=config.backend,
                                        sink_damping=config.sink_damping, record=record,
                                        attention_mask=batch.attention_mask, chunk=chunk)
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
                ok, values = sample_values(x, config.metrics, config.metric_threads, real)
                layer.ok.append(ok)
                layer.values.append(values)
                layer.zero.append(zero_samples(x))
                if docs:
                    finite_x = torch.where(torch.isfinite(x), x, torch.nan).to(torch.float64)
                    parts = document_columns(finite_x if finite_x.device.type == "cpu" else finite_x.cpu(),
                                             docs, real)
                    layer.docs.append({k: v.cpu() for k, v in parts.items()})
                if record is not None and chunk is not None:
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
                    layers[t] = _LayerSamples()  # its values now live in the row
                    rows.append(row)
                    samples.append(values)
                seconds["metrics"] += time.perf_counter() - start
                bar.update(1)
                if last and on_row is not None:
                    on_row(rows[-1])
    finally:
        bar.close()
    result = AnalyzeResult(config=config, rows=rows, model_info=model_info(model, config), seconds=seconds,
                           notes=notes, samples=samples, ids=ids)
    bad = result.overflow_layers
    if bad:
        result.notes.append(f"non-finite hidden states (overflow) from layer {bad[0]} on in {len(bad)} of "
                            f"{len(rows)} rows; metrics there cover the finite samples only (NaN if none)")
    zero = [int(r["layer"]) for r in rows if r["status"] == "underflow"]
    if zero:
        result.notes.append(f"hidden states exactly zero (underflow) from layer {zero[0]} on in {len(zero)} "
                            f"rows: mu_rel there is 0/0, undefined (NaN), not collapse")
    return result


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
    depth = config.layers if config.layers is not None else len(model.layers)
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
    depth = config.layers if config.layers is not None else len(model.layers)
    return layer_masks(model, config.parsed_mask, depth)[t - 1]


def write_run(result: AnalyzeResult, out_dir: str | Path, per_sample: bool = False,
              overwrite: bool = False) -> Path:
    """Write ``config.json`` and ``metrics.csv`` of a finished result (see also the streaming CLI);
    ``per_sample``: also ``per_sample.csv`` (:func:`write_per_sample`). Through the output layer: staged
    and published together, the marker complete last. An earlier analyze run in ``out_dir`` is replaced
    with ``overwrite=True``; without it, replacing is deprecated (a warning now, refused next release).
    Returns the path of ``metrics.csv``."""
    from rankcollapse.edge.folder import OutputFolder
    from rankcollapse.edge.runs import RunWriter

    existing = "replace" if overwrite else "deprecated-replace"
    legacy = ("config.json", RunWriter.FINAL, RunWriter.PARTIAL, "per_sample.csv")  # before manifests
    with OutputFolder(out_dir, "analyze", option="out_dir", existing=existing, outputs=legacy) as folder:
        with RunWriter(folder, {"analyze": asdict(result.config), "model": result.model_info,
                                "notes": result.notes}) as writer:
            for row in result.rows:
                writer.write_row(row)
        if per_sample:
            write_per_sample(result, folder.file("per_sample.csv"))
    return writer.metrics_path


def write_per_sample(result: AnalyzeResult, path: str | Path) -> Path:
    """Write :meth:`AnalyzeResult.per_sample_rows` as a CSV (atomically)."""
    import csv
    import io

    from rankcollapse.edge.atomic import atomic_write
    from rankcollapse.edge.inputs import os_error

    rows = result.per_sample_rows()
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    try:
        atomic_write(path, buf.getvalue())
    except OSError as err:
        raise os_error("per-sample table", path, err, verb="write") from None
    return Path(path)
