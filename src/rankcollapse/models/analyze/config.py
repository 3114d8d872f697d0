"""The configuration of one :func:`~rankcollapse.models.analyze.analyze` run, checked on construction.

:class:`AnalyzeConfig` parses every input once (the mask or schedule, the metric names, the dtype,
the device, the batch size) and refuses a bad one in one line
(:class:`~rankcollapse.edge.errors.RankCollapseError`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from rankcollapse.core.execution import check_batch_size, parse_device
from rankcollapse.core.precision import check_half_device, dtype_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_int, check_threads, quote
from rankcollapse.masks import Mask
from rankcollapse.masks.schedule import MAX_LAYERS, MaskSchedule
from rankcollapse.metrics import metric_names
from rankcollapse.metrics.diagnostics import SINK_THRESHOLD
from rankcollapse.models.corpora import CORPORA, DEFAULT_CORPUS
from rankcollapse.models.diagnose import ABLATIONS
from rankcollapse.models.parts import MODES
from rankcollapse.models.stream import check_d_qk, user_schedule

#: N of a text run when ``tokens`` is not given (a vision encoder's N is set by its image and patch size).
DEFAULT_TOKENS = 128

#: From this many tokens ``metric_threads="auto"`` measures on torch's threads (benchmarks/bench_metrics.py:
#: at 8,192 tokens the exact all-pairs |cos| alone is about 28 % of the forward's multiply-adds).
LONG_TOKENS = 1024

#: Query tokens of a sampled mean |cos| (``cos_rows``), used from 4 x 256 = 1,024 tokens on: at 8,192
#: tokens 1/16 of every pair's multiply-adds (benchmarks/bench_long_context.py; docs/measurements.md).
DEFAULT_COS_ROWS = 256

__all__ = ["DEFAULT_COS_ROWS", "DEFAULT_TOKENS", "AnalyzeConfig", "AnalyzeOutputs", "check_excerpt_size"]


#: Samples (excerpts, or images) of a run when none are given.
DEFAULT_SAMPLES = 16


def check_excerpt_size(samples: int, tokens: int) -> None:
    """A run reads ``samples`` excerpts of ``tokens`` tokens each (the ids ``[b, n]``): ``b >= 1`` and
    ``n >= 2`` (the start token and one more), else one line. The one check of every config that reads
    excerpts (:class:`AnalyzeConfig`, ``measure.CurvesConfig``, ``measure.GeometryConfig``)."""
    if samples < 1 or tokens < 2:
        raise RankCollapseError(f"need samples >= 1 and tokens >= 2, got {samples}, {tokens}")


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
    ``tokens``: N, the excerpt length including the model's start token (None: :data:`DEFAULT_TOKENS`);
    a vision encoder's N is ``1 + (H / p)(W / p)``, set by its image and patch size: another N is refused
    (:func:`~rankcollapse.models.images.check_tokens`), and its run's config records its own.
    ``metrics``: metric names (None: all). ``metric_threads``: torch threads while measuring
    (``"auto"``, the default: 1 below :data:`LONG_TOKENS` tokens, where the per-layer SVDs are small
    and multi-threaded small ops stall on a loaded machine; torch's own from there, where the
    all-pairs |cos| alone is n^2 d / 2 multiply-adds and one thread cannot keep up with the forward;
    None: torch's own). ``cos_rows``: a sample of ``n >= 4 cos_rows`` tokens gets its ``mean_abs_cos``
    from the pairs of ``cos_rows`` query tokens drawn without replacement with ``seed`` (the same rows
    at every layer; ``metrics.sampled_mean_abs_cos``: unbiased, ``m n d`` multiply-adds instead of
    ``n^2 d / 2``) and its standard error in ``mean_abs_cos_se`` (0 for a sample measured on every pair);
    ``"all"``: every pair at every length, and no ``mean_abs_cos_se`` column (:attr:`measure_cos_rows`).
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

    ``dtype``: the model's weights and hidden states, ``float32`` (default), ``float64``, ``bfloat16`` or
    ``float16`` (``bf16``, ``fp16``: aliases). A half-precision run's metrics are reduced in float32
    (never an SVD in half precision) against the precision floor of its own dtype (``at_floor``: ``mu <=
    32 eps ||X||_F``, 0.25 for bfloat16, 0.031 for float16), the floor its figures draw and its title
    names. A dtype the device cannot compute in is refused here (bfloat16 on a GPU below compute
    capability 8.0; float64 where the device has none). None: float32 for a model loaded by name; an
    in-memory model is measured in its own dtype and its result says so (:meth:`labelled`), and a dtype
    given that differs from the model's is refused.
    """

    model: str = "minilm"
    mode: str = "full"
    mask: str | Any | None = None
    d_qk: float | None = None
    layers: int | None = None
    corpus: str | None = None
    text_file: str | None = None
    samples: int | None = None  # None: DEFAULT_SAMPLES (16); a vision encoder's: its images' count
    tokens: int | None = None  # None: DEFAULT_TOKENS for text; a vision encoder's own count (its image)
    dtype: str | None = None  # None: float32 for a model loaded by name, an in-memory model's own dtype
    seed: int = 0
    backend: str = "auto"
    metrics: tuple[str, ...] | str | None = None  # "mu,mu_rel" or names; metrics.metric_names parses it
    metric_threads: int | Literal["auto"] | None = "auto"
    cos_rows: int | Literal["all"] = DEFAULT_COS_ROWS
    diagnostics: bool = False
    diagnostics_chunk: int | None = None
    sink_threshold: float = SINK_THRESHOLD
    ablation: str | None = None
    sink_damping: float | None = None
    device: str = "cpu"
    batch_size: int | None = None

    @property
    def measure_threads(self) -> int | None:
        """The torch threads the metrics run on (``metric_threads`` with ``"auto"`` resolved)."""
        if self.metric_threads == "auto":
            return 1 if self.tokens < LONG_TOKENS else None
        return self.metric_threads

    @property
    def measure_cos_rows(self) -> int | None:
        """``cos_rows`` as the metrics take it (None: every pair)."""
        return None if self.cos_rows == "all" else int(self.cos_rows)

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
                "give a corpus or a text file, not both (--corpus does not apply with --text-file)"
            )
        self._tokens_given = self.tokens is not None  # a vision encoder refuses another token count
        self._samples_given = self.samples is not None  # a vision encoder reads that many of its images
        if self.samples is None:
            self.samples = DEFAULT_SAMPLES
        self._corpus_given = self.corpus is not None  # a vision encoder reads no text
        if self.tokens is None:
            self.tokens = DEFAULT_TOKENS
        if self.text_file is None and self.corpus is None:
            self.corpus = DEFAULT_CORPUS
        if self.corpus is not None and self.corpus not in CORPORA:
            raise RankCollapseError(
                f"unknown corpus {quote(str(self.corpus))}; allowed: {', '.join(CORPORA)} "
                "(or --text-file FILE)"
            )
        check_excerpt_size(self.samples, self.tokens)
        if self.layers is not None:  # before a schedule names the depth
            self.layers = check_int("layers", self.layers, low=0, high=MAX_LAYERS)
        check_d_qk(self.d_qk)
        if self.metric_threads not in (None, "auto"):
            self.metric_threads = check_threads("metric_threads", self.metric_threads)
        if self.cos_rows != "all" and (isinstance(self.cos_rows, bool) or not isinstance(self.cos_rows, int)
                                       or self.cos_rows < 2):
            raise RankCollapseError(f"--cos-rows {quote(self.cos_rows, 20)} is invalid; allowed: all, or a "
                                    "whole number >= 2 of query tokens")
        self.metrics = metric_names(self.metrics)
        self._dtype_given = self.dtype is not None  # an in-memory model of another dtype is refused
        self.dtype = dtype_name(self.dtype or "float32", half=True)
        self.device = str(parse_device(self.device, self.dtype))
        check_half_device(self.dtype, self.device)
        self.batch_size = check_batch_size(self.batch_size)
        self._mask = user_schedule(self.mask)  # a bad spec fails here
        if self._mask is not None and len(self._mask.period) == 1:
            self._mask = self._mask.period[0]
        self.mask = None if self._mask is None else self._mask.spec

    def labelled(self, dtype: str) -> AnalyzeConfig:
        """This config as the run it made records it: ``dtype`` the model's own when none was given (an
        in-memory model's: ``AnalyzeConfig()`` reads ``float32`` until a bfloat16 model runs under it). The
        same object when ``dtype`` was given (the model was loaded in it, or an in-memory model of another
        dtype refused) or is already the model's; else a shallow copy (the caller's config unchanged, so a
        later run under it loads a model by name in float32 again)."""
        own = dtype_name(dtype, half=True)
        if own == self.dtype or self._dtype_given:
            return self
        out = copy.copy(self)
        out.dtype = own
        return out

    @property
    def parsed_mask(self) -> Mask | MaskSchedule | None:
        """The mask (or schedule) object, parsed once in ``__post_init__``; None for the model's own."""
        return self._mask


@dataclass(frozen=True)
class AnalyzeOutputs:
    """What a run writes beside ``config.json`` and ``metrics.csv`` (``rankcollapse analyze``'s output
    flags), checked against its :class:`AnalyzeConfig` on construction, each conflict one line:
    ``save_attention`` needs ``diagnostics`` and one batch of every sample; ``plot_format`` needs
    ``plot``; ``plot`` needs a column a figure draws (``mu``, ``mu_rel`` or the token geometry).

    ``formats``: the figures' formats (``plot_format`` parsed, default png)."""

    config: AnalyzeConfig
    plot: bool = False
    plot_format: str | None = None
    per_sample: bool = False
    save_attention: bool = False
    check_masks: bool = False

    def __post_init__(self) -> None:
        from rankcollapse.models.plots import figure_names, plot_formats

        c = self.config
        if self.save_attention and not c.diagnostics:
            raise RankCollapseError("--save-attention applies only with --diagnostics")
        if self.plot_format is not None and not self.plot:
            raise RankCollapseError("--plot-format applies only with --plot")
        plot_formats(self.plot_format or "png")  # one line for a format matplotlib does not write
        if self.plot and not figure_names(c.metrics, c.diagnostics):
            shown = ",".join(c.metrics or ())
            raise RankCollapseError(f"--plot draws mu, mu_rel or the token geometry; --metrics {shown} has "
                                    "none of them (add mu_rel)")
        if self.save_attention and (c.batch_size or c.samples) < c.samples:
            raise RankCollapseError(f"--save-attention writes every sample of a layer at once; it needs one "
                                    f"batch (--batch-size {c.batch_size} < --samples {c.samples})")

    @property
    def formats(self) -> tuple[str, ...]:
        """The figures' formats: ``plot_format`` parsed (``png`` by default)."""
        from rankcollapse.models.plots import plot_formats

        return plot_formats(self.plot_format or "png")
