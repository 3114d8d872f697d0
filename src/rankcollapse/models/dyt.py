"""DyT (Zhu et al., CVPR 2025, arXiv 2503.10622) on real models: the fit of each norm's map, DyT in its place.

- :func:`measure_norm_fits`: every LayerNorm / RMSNorm inside the model's layers (its ``norm_attn``,
  ``norm_mlp`` and, in sandwich models, the post norms), in the order the forward calls them, recorded on
  text excerpts; per norm and excerpt the DyT fit of its map from input to output before its own affine
  (``metrics.dyt_fit.fit_dyt``: alpha, R² of the tanh against a straight line per feature, the S-shape
  share), and a sample of (input, output) points of a few norms for the figure. The embeddings' own LayerNorm
  (BERT's) is not inside a layer and is left out.
- :func:`with_dyt`: a copy of a loaded model whose layers' norms are DyT, ``weight * tanh(alpha x) + bias``,
  with each norm's own affine (RMSNorm: no bias) and one ``alpha`` (``core.norms.dyt``); the embeddings keep
  theirs. :func:`measure_dyt_curves` runs the paper's modes (``models.parts.run_block``: SAN, SAN + norm,
  SAN + skip + norm, the full block) with the model's own norm and with DyT in its place, every mask, on the
  same excerpts: the NeurIPS paper's Figs. 2 and 6 asked of DyT (ours).

Both read the model through its dissected parts (``backend="parts"``); nothing here judges.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.norms import DYT_ALPHA, dyt, layer_norm, rms_norm
from rankcollapse.core.precision import dtype_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.models.analyze.config import check_excerpt_size
from rankcollapse.models.loading import LoadedModel
from rankcollapse.models.measure import OWN_MASK, OnLayer, Ticks, model_columns

Norm = Callable[[Tensor], Tensor]
#: A layer's norms by their ``LayerParts`` field, named as the rows name them.
NORM_FIELDS: dict[str, str] = {"norm_attn": "attention", "norm_mlp": "mlp",
                               "post_attn_norm": "post-attention", "post_mlp_norm": "post-mlp"}


@dataclass(frozen=True)
class NormSpec:
    """What a model's norm function is: ``kind`` (``layer`` or ``rms``), its affine ``weight`` [d] and
    ``bias`` [d] or None, ``eps`` and (RMSNorm) the dtype it computes in."""

    kind: str
    weight: Tensor | None
    bias: Tensor | None
    eps: float
    compute_dtype: torch.dtype | None = None

    def pre_affine(self, x: Tensor) -> Tensor:
        """The norm's output before its affine: ``(x - mean) / sqrt(var + eps)`` or ``x / sqrt(mean(x^2) +
        eps)``. x: [..., n, d]."""
        if self.kind == "layer":
            return layer_norm(x, None, None, self.eps)
        return rms_norm(x, None, self.eps, self.compute_dtype)


def norm_spec(fn: Norm) -> NormSpec:
    """The :class:`NormSpec` of a dissected model's norm (a ``functools.partial`` of ``core.norms.layer_norm``
    or ``rms_norm``, ``models.spec.norm_fn``); RankCollapseError for any other (Gemma's ``(1 + w)`` RMSNorm,
    T5's scale-only norm in Hugging Face's casts: no pre-affine form read here)."""
    if isinstance(fn, functools.partial) and fn.func in (layer_norm, rms_norm):
        kw = fn.keywords
        if fn.func is layer_norm:
            return NormSpec("layer", kw.get("weight"), kw.get("bias"), float(kw.get("eps", 1e-5)))
        return NormSpec("rms", kw.get("weight"), None, float(kw.get("eps", 1e-6)), kw.get("compute_dtype"))
    raise RankCollapseError(f"norm {quote(fn)}: DyT reads a LayerNorm or RMSNorm of core.norms (allowed: the "
                            "families bert, mpnet, llama, qwen2, gpt2, ...), not this one")


def _norm_fields(parts: Any) -> list[str]:
    return [f for f in NORM_FIELDS if getattr(parts, f, None) is not None]


def with_norms(model: LoadedModel, make: Callable[[Norm, int, str], Norm]) -> LoadedModel:
    """A shallow copy of ``model`` whose layer ``i``'s norm ``f`` (:data:`NORM_FIELDS`) is ``make(norm, i,
    which)``; the weights, embeddings and Hugging Face modules are shared, the cached model is untouched.
    The copy's layers have no ``hf_forward`` and its ``info["hf_casts"]`` is False, so every backend choice
    runs the dissected parts (Hugging Face's own layer modules still hold the old norms); a query or key
    norm (``q_norm``, ``k_norm``) is no norm of the stream and is kept."""
    layers = [
        dataclasses.replace(p, hf_forward=None,
                            **{f: make(getattr(p, f), i, NORM_FIELDS[f]) for f in _norm_fields(p)})
        for i, p in enumerate(model.layers)
    ]
    return dataclasses.replace(model, layers=layers, info={**model.info, "hf_casts": False})


def with_dyt(model: LoadedModel, alpha: float = DYT_ALPHA) -> LoadedModel:
    """``model`` with every norm inside its layers replaced by ``weight * tanh(alpha x) + bias`` (module
    docstring). RankCollapseError for a norm :func:`norm_spec` does not read, or a non-positive alpha."""
    if not (isinstance(alpha, int | float) and alpha > 0 and np.isfinite(alpha)):
        raise RankCollapseError(f"dyt_alpha must be a positive finite number, got {quote(alpha)}")

    def make(fn: Norm, i: int, which: str) -> Norm:
        spec = norm_spec(fn)
        return functools.partial(dyt, alpha=float(alpha), weight=spec.weight, bias=spec.bias)

    return with_norms(model, make)


# ---- the fits ----------------------------------------------------------------------------------------------
@dataclass
class NormFitConfig:
    """One run of :func:`measure_norm_fits`: one model, its own blocks and masks, ``samples`` excerpts of
    ``tokens`` tokens; ``scatter_points``: (input, output) points kept per figure norm (first excerpt)."""

    model: str = "minilm"
    corpus: str = "wikipedia"
    samples: int = 8
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    scatter_points: int = 1500

    def __post_init__(self) -> None:
        check_excerpt_size(self.samples, self.tokens)
        self.dtype = dtype_name(self.dtype)
        if self.scatter_points < 0:
            raise RankCollapseError(f"scatter_points must be >= 0, got {self.scatter_points}")


@dataclass
class NormFitMeasurement:
    """Per norm ``k`` (1-based, in call order): ``block[k]`` (the layer t it sits in), ``which[k]``
    (attention, mlp, ...), ``kind`` (layer or rms), ``fits[k][column]`` [b] per excerpt
    (``metrics.dyt_fit.FIT_NAMES``), ``scatter[k]`` ((x, y, fitted y, fitted y with the mean gamma and beta)
    points of the first excerpt, for the figure's norms), ``model`` the model's columns, ``summary`` the run's
    facts."""

    block: dict[int, int]
    which: dict[int, str]
    kind: str
    fits: dict[int, dict[str, np.ndarray]]
    scatter: dict[int, np.ndarray]
    model: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread inside the block (its own setting back after it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def figure_norms(count: int) -> list[int]:
    """The norms whose points a run keeps: the first, the middle one and the last (1-based)."""
    return sorted({1, (count + 1) // 2, count}) if count else []


def measure_norm_fits(
    cfg: NormFitConfig, on_layer: OnLayer, device: str = "cpu", batch_size: int | None = None
) -> NormFitMeasurement:
    """The DyT fit of every norm's map on ``cfg``'s excerpts (module docstring), batch by batch."""
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.metrics.dyt_fit import FIT_NAMES, fit_dyt
    from rankcollapse.models import excerpts, iter_hidden_states
    from rankcollapse.models.run_model import load_model_cached
    from rankcollapse.models.stream import iter_batches

    start = time.perf_counter()
    base = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    ids = excerpts(base, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    pending: list[tuple[str, NormSpec, Tensor]] = []

    def make(fn: Norm, i: int, which: str) -> Norm:
        spec = norm_spec(fn)

        def recorded(x: Tensor) -> Tensor:
            pending.append((which, spec, x.detach().clone()))
            return fn(x)

        return recorded

    model = with_norms(base, make)
    depth = len(model.layers)
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = Ticks(on_layer, depth + 1, len(chunks))
    block: dict[int, int] = {}
    which: dict[int, str] = {}
    kinds: set[str] = set()
    per: dict[int, dict[str, list[float]]] = {}
    scatter: dict[int, np.ndarray] = {}
    first_batch = True
    for batch in iter_batches(ids, batch_size, model.device):
        k = 0
        stream = iter_hidden_states(model, batch.ids, mode="full", backend="parts")
        try:
            for t, _, _ in stream:
                for name, spec, x in pending:
                    k += 1
                    block[k], which[k] = t, name
                    kinds.add(spec.kind)
                    x = batch.real(x).to(torch.float64)
                    y = spec.pre_affine(x)
                    cols = per.setdefault(k, {c: [] for c in FIT_NAMES})
                    for b in range(x.shape[0]):
                        with one_thread():  # small reductions: a second thread only waits on a busy machine
                            fit = fit_dyt(x[b], y[b])
                        for c, v in fit.columns().items():
                            cols[c].append(v)
                        if b == 0 and first_batch and cfg.scatter_points:
                            scatter[k] = _points(x[0], y[0], fit, cfg.scatter_points, cfg.seed)
                pending.clear()
                ticks.step()
        finally:
            stream.close()
            pending.clear()
        first_batch = False
    keep = figure_norms(len(per))
    fits = {k: {c: np.asarray(v) for c, v in cols.items()} for k, cols in per.items()}
    info = model_columns(base)
    summary = {**info, "norms": len(fits), "load_s": round(time.perf_counter() - start, 2),
               "device": str(model.device), "batch_size": chunks[0].stop - chunks[0].start if chunks else 0}
    return NormFitMeasurement(block, which, "/".join(sorted(kinds)), fits,
                              {k: v for k, v in scatter.items() if k in keep}, info, summary)


def _points(x: Tensor, y: Tensor, fit: Any, count: int, seed: int) -> np.ndarray:
    """``count`` (input, output, fitted output at the point's own feature, fitted output with the features'
    mean gamma and beta: one smooth curve) points of one excerpt, drawn without replacement: [count, 4]."""
    g = torch.Generator().manual_seed(seed)
    flat = torch.randperm(x.numel(), generator=g)[:count]
    cols = flat % x.shape[1]
    xs, ys = x.flatten()[flat], y.flatten()[flat]
    squashed = torch.tanh(fit.dyt_alpha * xs)
    fitted = fit.gamma[cols] * squashed + fit.beta[cols]
    mean = fit.gamma.mean() * squashed + fit.beta.mean()
    return torch.stack([xs, ys, fitted, mean], dim=1).numpy()


# ---- DyT in LayerNorm's place ------------------------------------------------------------------------------
#: The modes of :func:`measure_dyt_curves` (``models.parts`` modes) and how each is named with DyT.
DYT_MODES: dict[str, str] = {"attn": "attn", "attn+ln": "attn+dyt", "attn+skip+ln": "attn+skip+dyt",
                             "full": "full+dyt", "attn+skip": "attn+skip"}
NORMS = ("ln", "dyt")


@dataclass
class DytCurvesConfig:
    """One run of :func:`measure_dyt_curves`: one model, dtype and seed; every variant x norm x mask.

    ``variants``: ``models.parts`` modes; ``norms``: ``ln`` (the model's own) and/or ``dyt`` (DyT in its
    place, alpha ``dyt_alpha``); a mode without a norm (``attn``, ``attn+skip``) runs once.
    ``float64_variants``: the variants of a float64 run (None: all)."""

    model: str = "random:bert-base-uncased"
    variants: tuple[str, ...] = ("attn", "attn+ln", "attn+skip+ln", "full")
    norms: tuple[str, ...] = NORMS
    masks: tuple[str, ...] = ("complete", "causal", "window:w=1", "causal-window:w=1")
    dyt_alpha: float = DYT_ALPHA
    layers: int | None = None
    corpus: str = "wikipedia"
    samples: int = 4
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    float64_variants: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        self.dtype = dtype_name(self.dtype)
        if self.float64_variants is not None and self.dtype == "float64":
            self.variants = tuple(self.float64_variants)
        self.variants, self.norms, self.masks = tuple(self.variants), tuple(self.norms), tuple(self.masks)
        bad = [v for v in self.variants if v not in DYT_MODES] + [n for n in self.norms if n not in NORMS]
        if bad:
            raise RankCollapseError(f"unknown variant or norm {quote(bad[0], 40)}; allowed: "
                                    f"{', '.join(DYT_MODES)}; norms {', '.join(NORMS)}")
        if not (self.variants and self.norms and self.masks):
            raise RankCollapseError("variants, norms and masks each need at least one value")
        check_excerpt_size(self.samples, self.tokens)
        if self.layers is not None and self.layers < 1:
            raise RankCollapseError(f"layers must be >= 1 (or null: the model's own), got {self.layers}")
        if not (self.dyt_alpha > 0 and np.isfinite(self.dyt_alpha)):
            raise RankCollapseError(f"dyt_alpha must be a positive finite number, got {self.dyt_alpha!r}")

    def conditions(self) -> list[tuple[str, str, str]]:
        """``(mode as named in the rows, parts mode, norm)`` per condition; a mode without a norm (``attn``,
        ``attn+skip``) once, under its own name."""
        out: list[tuple[str, str, str]] = []
        for v in self.variants:
            if DYT_MODES[v] == v:
                out.append((v, v, "ln"))
                continue
            out += [(v if norm == "ln" else DYT_MODES[v], v, norm) for norm in self.norms]
        return out


@dataclass
class DytCurves:
    """Per condition ``(mode name, mask)``: ``values[c]`` {mu, mu_rel} [b, L+1], ``x_norm[c]`` ``||X||_F``
    [b, L+1] and ``zero[c]`` (``||X||_F`` rounded to 0); ``model`` the model's columns; ``summary``."""

    conditions: list[tuple[str, str]]
    values: dict[tuple[str, str], dict[str, np.ndarray]]
    x_norm: dict[tuple[str, str], np.ndarray]
    zero: dict[tuple[str, str], np.ndarray]
    model: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)


def measure_dyt_curves(
    cfg: DytCurvesConfig, on_layer: OnLayer, device: str = "cpu", batch_size: int | None = None
) -> DytCurves:
    """mu and mu_rel per sample at every layer of every (mode, norm) x mask of one model (class docstring),
    the conditions advancing layer by layer together on each batch of excerpts (as ``models.measure``)."""
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.metrics import per_sample_metrics
    from rankcollapse.models import excerpts, iter_hidden_states
    from rankcollapse.models.run_model import load_model_cached
    from rankcollapse.models.stream import iter_batches

    start = time.perf_counter()
    base = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    models = {"ln": base, "dyt": with_dyt(base, cfg.dyt_alpha)}
    ids = excerpts(base, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    depth = len(base.layers) if cfg.layers is None else cfg.layers
    wanted = [(name, v, norm, m) for name, v, norm in cfg.conditions() for m in cfg.masks]
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = Ticks(on_layer, depth + 1, len(chunks))
    keys = ("mu", "mu_rel", "x_norm", "zero")
    parts: dict[tuple[str, str], dict[str, list[np.ndarray]]] = {(w[0], w[3]): {k: [] for k in keys}
                                                                for w in wanted}
    for batch in iter_batches(ids, batch_size, base.device):
        streams = [iter_hidden_states(models[norm], batch.ids, mode=v, mask=None if m == OWN_MASK else m,
                                      layers=depth, backend="parts") for _, v, norm, m in wanted]
        layers: dict[tuple[str, str], dict[str, list[np.ndarray]]] = {c: {k: [] for k in keys} for c in parts}
        try:
            for t in range(depth + 1):
                for (name, _, _, m), stream in zip(wanted, streams, strict=True):
                    t_got, _, x = next(stream)
                    if t_got != t:
                        raise RuntimeError(f"hidden state {t_got} where layer {t} was expected")
                    x = batch.real(x)
                    got = per_sample_metrics(x, ("mu", "mu_rel"))
                    norm = torch.linalg.vector_norm(x.flatten(1).double(), dim=1).cpu().numpy()
                    finite = torch.isfinite(x).flatten(1).all(dim=1).cpu().numpy()
                    cell = layers[(name, m)]
                    cell["mu"].append(got["mu"].numpy())
                    cell["mu_rel"].append(got["mu_rel"].numpy())
                    cell["x_norm"].append(norm)
                    cell["zero"].append(finite & np.isnan(got["mu_rel"].numpy()) & (got["mu"].numpy() == 0))
                ticks.step()
        finally:
            for stream in reversed(streams):
                stream.close()
        for c in parts:
            for k in keys:
                parts[c][k].append(np.stack(layers[c][k], axis=1))
    conditions = list(parts)
    arrays = {c: {k: np.concatenate(a, axis=0) for k, a in parts[c].items()} for c in conditions}
    info = model_columns(base)
    summary = {**info, "conditions": len(conditions), "layers_run": depth, "dyt_alpha": cfg.dyt_alpha,
               "seconds": round(time.perf_counter() - start, 2), "device": str(base.device),
               "batch_size": chunks[0].stop - chunks[0].start if chunks else 0}
    return DytCurves(conditions, {c: {q: arrays[c][q] for q in ("mu", "mu_rel")} for c in conditions},
                     {c: arrays[c]["x_norm"] for c in conditions}, {c: arrays[c]["zero"] for c in conditions},
                     info, summary)
