"""Tasks of the paper's experiments (Figs. 2-4, 6-9): one model, many conditions, per-sample measures.

Both tasks load one model once per run (a process keeps the last one loaded), draw the text
excerpts once (``rankcollapse.models.excerpts``: the model's start token, then N - 1 tokens of
the corpus, seeded) and measure every sample separately, so the stories can show the paper's
mean ± std over samples and judge claims with an uncertainty.

- :func:`paper_curves` (Figs. 2, 3, 6, 7): for every variant x mask x d_qk it runs the model's
  layers on the same excerpts; the conditions advance layer by layer together, so each layer's
  weights are built once per run. Rows (``kind = curve``): the per-layer columns of
  :func:`~rankcollapse.experiments.paper_curves.curve_rows` of ``mu`` and ``mu_rel``.
- :func:`paper_geometry` (Figs. 4, 8, 9): the model's own blocks; rows ``kind = geometry`` (per
  layer: full-rank share, sigma_min, sigma_max, their ratio, sigma_1/sigma_2, mean |cos|, each
  mean / std / min / max over samples), ``kind = sv`` (every singular value of the first
  ``spectrum_samples`` samples), ``kind = cos_hist`` (histogram of the pairwise cosines of the
  initial embeddings of the first ``cosine_samples`` samples) and ``kind = phi0`` (per sample:
  the smallest pairwise cosine of the initial embeddings, the ``phi(0)`` of Corollary 1).

Model names: ``pretrained:<checkpoint>`` is the paper's checkpoint when it is in the local
Hugging Face cache, else the stand-in ``stand_in`` (default: the registry's best), labelled as
such in every row (``model_label``); any other name is loaded as given (``random:<checkpoint>``,
``tiny:<family>``, ...). ``fresh_layers`` (ours): a depth beyond the model's own draws new
independent layers (block ``j`` of the model's depth is the random model with seed
``seed + 10007 j``) instead of cycling the same ones, as in the paper's 128-layer random BERT.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.precision import dtype_name
from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, config_from
from rankcollapse.experiments.paper_curves import curve_rows, sample_stats

PRETRAINED = "pretrained:"
#: Seed stride between blocks of fresh random layers (``fresh_layers``).
FRESH_STRIDE = 10007
_LOADED: dict[tuple[str, str, str, int], Any] = {}


def model_source(name: str, stand_in: str | None = None) -> Any:
    """The :class:`~rankcollapse.models.ModelSource` of a task's ``model`` parameter (see module doc)."""
    from rankcollapse.models import paper_model, resolve_model

    if name.startswith(PRETRAINED):
        return paper_model(name[len(PRETRAINED):], stand_in)
    return resolve_model(name)


def load_cached(name: str, dtype: str, seed: int, stand_in: str | None = None) -> Any:
    """``load_model`` of a task's model, keeping the last one loaded in this process."""
    from rankcollapse.models import load_model

    key = (name, str(stand_in), dtype_name(dtype), int(seed))
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = load_model(model_source(name, stand_in), dtype_name(dtype), seed=seed)
    return _LOADED[key]


class FreshLayers(Sequence):
    """``depth`` layers: block 0 is ``model``'s own, block j >= 1 a new random draw (seed + 10007 j).

    Holds one extra block at a time, so runs that step all conditions layer by layer together
    build each block once.
    """

    def __init__(self, model: Any, depth: int, seed: int) -> None:
        self.model, self.depth, self.seed = model, depth, seed
        self.block = len(model.layers)
        self._cached: tuple[int, list[Any]] = (0, list(model.layers))

    def __len__(self) -> int:
        return self.depth

    def __getitem__(self, i: Any) -> Any:
        if not isinstance(i, int) or not 0 <= i < self.depth:
            raise IndexError(i)
        j, k = divmod(i, self.block)
        if self._cached[0] != j:
            from rankcollapse.models import load_model

            fresh = load_model(self.model.source, self.model.dtype, seed=self.seed + FRESH_STRIDE * j)
            self._cached = (j, list(fresh.layers))
        return self._cached[1][k]


@dataclass
class CurvesConfig:
    """One run of :func:`paper_curves`: one model, dtype and seed; every variant x mask x d_qk."""

    model: str = "random:bert-base-uncased"
    stand_in: str | None = None
    variants: tuple[str, ...] = ("attn", "attn+skip", "attn+ln", "attn+skip+ln", "full")
    masks: tuple[str, ...] = ("complete", "causal", "window:w=1", "causal-window:w=1")
    d_qk: tuple[float | None, ...] = (None,)
    layers: int | None = None
    fresh_layers: bool = False
    corpus: str = "wikipedia"
    samples: int = 4
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    float64_variants: tuple[str, ...] | None = None  # variants run when dtype is float64 (None: all)

    def __post_init__(self) -> None:
        from rankcollapse.models import MODES

        if self.float64_variants is not None and dtype_name(self.dtype) == "float64":
            self.variants = tuple(self.float64_variants)

        self.variants, self.masks = tuple(self.variants), tuple(self.masks)
        self.d_qk = tuple(None if d is None else float(d) for d in self.d_qk)
        bad = [v for v in self.variants if v not in MODES]
        if bad:
            raise RankCollapseError(f"unknown variant {bad[0][:40]!r}; allowed: {', '.join(MODES)}")
        if not (self.variants and self.masks and self.d_qk):
            raise RankCollapseError("variants, masks and d_qk each need at least one value")
        if any(d is not None and not (d > 0 and math.isfinite(d)) for d in self.d_qk):
            raise RankCollapseError(f"d_qk values must be positive finite numbers, got {list(self.d_qk)}")
        if self.samples < 1 or self.tokens < 2:
            raise RankCollapseError(f"need samples >= 1 and tokens >= 2, got {self.samples}, {self.tokens}")
        if self.layers is not None and self.layers < 1:
            raise RankCollapseError(f"layers must be >= 1 (or null: the model's own), got {self.layers}")
        self.dtype = dtype_name(self.dtype)


def model_columns(model: Any) -> dict[str, Any]:
    """What every row says about its model: words for figures, and whether it is a stand-in."""
    src = model.source
    return {
        "model_label": model.label,
        "model_name": model.name,
        "model_kind": getattr(src, "kind", ""),
        "pretrained": bool(getattr(src, "pretrained", True)),
        "stand_in_for": getattr(src, "stand_in_for", None) or "",
        "d_model": int(model.d_model),
    }


def per_sample(x: Tensor, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``collapse_metrics`` per sample as float64 arrays [b]; NaN for a sample with non-finite tokens."""
    from rankcollapse.metrics import collapse_metrics

    ok = torch.isfinite(x).flatten(1).all(dim=1)
    out = {k: np.full(x.shape[0], np.nan) for k in names}
    if bool(ok.any()):
        vals = collapse_metrics(x[ok], names)
        idx = ok.nonzero().flatten().numpy()
        for k in names:
            out[k][idx] = vals[k].detach().to(torch.float64).numpy()
    return out


def paper_curves(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """mu and mu_rel per layer, mean ± std over samples, of every variant x mask x d_qk of one model."""
    from rankcollapse.models import excerpts, iter_hidden_states

    cfg = config_from(CurvesConfig, params)
    start = time.perf_counter()
    model = load_cached(cfg.model, cfg.dtype, cfg.seed, cfg.stand_in)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    depth = len(model.layers) if cfg.layers is None else cfg.layers
    view = model
    if cfg.fresh_layers and depth > len(model.layers):
        if model.source is None or model.source.pretrained:
            raise RankCollapseError("fresh_layers needs a random model (random:<checkpoint>, tiny:<family>)")
        view = replace(model, layers=FreshLayers(model, depth, cfg.seed))
    loaded = time.perf_counter() - start
    conds = [(v, m, d) for v in cfg.variants for m in cfg.masks for d in cfg.d_qk]
    streams = [iter_hidden_states(view, ids, mode=v, mask=m, d_qk=d, layers=depth) for v, m, d in conds]
    values = {c: {"mu": [], "mu_rel": []} for c in conds}
    zeros: dict[tuple, list[np.ndarray]] = {c: [] for c in conds}
    for t in range(depth + 1):
        for cond, stream in zip(conds, streams, strict=True):
            t_got, _, x = next(stream)
            assert t_got == t
            got = per_sample(x, ("mu", "mu_rel"))
            values[cond]["mu"].append(got["mu"])
            values[cond]["mu_rel"].append(got["mu_rel"])
            # finite tokens whose norm rounds to 0 in the dtype: mu_rel = 0/0 (an underflow, not an overflow)
            zeros[cond].append(torch.isfinite(x).flatten(1).all(dim=1).numpy() & np.isnan(got["mu_rel"]))
        on_layer(t)
    info = model_columns(model)
    rows, nonfinite = [], []
    for (v, m, d), vals in values.items():
        arrays = {q: np.stack(a, axis=1) for q, a in vals.items()}  # [b, L+1]
        d_used = float(model.own_d_qk) if d is None else d
        for row in curve_rows(arrays, cfg.dtype, np.stack(zeros[(v, m, d)], axis=1)):
            rows.append({"kind": "curve", "variant": v, "mask": m, "d_qk": d_used, **info, **row})
        if not np.isfinite(arrays["mu"]).all():
            nonfinite.append(f"{v} / {m} / d_qk={d_used:g}")
    summary = {**info, "conditions": len(conds), "layers_run": depth, "load_s": round(loaded, 2),
               "nonfinite_conditions": "; ".join(nonfinite),
               "fresh_layers": isinstance(view.layers, FreshLayers)}
    return RunOutput(rows, summary)


@dataclass
class GeometryConfig:
    """One run of :func:`paper_geometry`: one model, its own blocks (``mode``), its own depth."""

    model: str = "pretrained:bert-base-uncased"
    stand_in: str | None = None
    mode: str = "full"
    layers: int | None = None
    corpus: str = "wikipedia"
    samples: int = 8
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    spectrum_samples: int = 0
    cosine_samples: int = 0
    cosine_bins: int = 40

    def __post_init__(self) -> None:
        if self.samples < 1 or self.tokens < 2:
            raise RankCollapseError(f"need samples >= 1 and tokens >= 2, got {self.samples}, {self.tokens}")
        if not 0 <= self.spectrum_samples <= self.samples or not 0 <= self.cosine_samples <= self.samples:
            raise RankCollapseError(
                f"spectrum_samples and cosine_samples must be in 0..samples={self.samples}, got "
                f"{self.spectrum_samples}, {self.cosine_samples}"
            )
        if self.layers is not None and self.layers < 0:
            raise RankCollapseError(f"layers must be >= 0 (or null: the model's own), got {self.layers}")
        self.dtype = dtype_name(self.dtype)


def unit_cosines(x: Tensor) -> Tensor:
    """Pairwise cosines ``<x_i, x_j> / (|x_i| |x_j|)``: [b, n, d] -> [b, n, n] (float64)."""
    x = x.to(torch.float64)
    u = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
    return u @ u.transpose(-1, -2)


def geometry_measures(x: Tensor, distinct: Tensor | None = None) -> tuple[dict[str, np.ndarray], Tensor]:
    """Per-sample token geometry of x [b, n, d] (NaN for non-finite samples) and the singular values.

    ``distinct`` [b]: the number of different rows of each sample's X(0) (None: n). A model without
    absolute positions (T5, Llama) embeds a repeated token as the same row: a rank the input lacks,
    not one the model loses. With ``k_b = min(distinct_b, d)``: ``full_rank`` (1 if the rank at
    torch.linalg.matrix_rank's tolerance is at least ``k_b``), ``rank``, ``sigma_min`` (the
    ``k_b``-th singular value: the smallest the input can have above 0), ``sigma_max``,
    ``sigma_ratio = sigma_min / sigma_max``, ``sigma_dominance = sigma_1 / sigma_2``, ``mean_abs_cos``.
    """
    from rankcollapse.metrics import mean_abs_cos, rank_tolerance

    b, n, d = x.shape
    names = ("full_rank", "rank", "sigma_min", "sigma_max", "sigma_ratio", "sigma_dominance", "mean_abs_cos")
    full = torch.full((b,), min(n, d)) if distinct is None else distinct.clamp(max=min(n, d))
    out = {k: np.full(b, np.nan) for k in names}
    ok = torch.isfinite(x).flatten(1).all(dim=1)
    sv = torch.full((b, min(n, d)), math.nan, dtype=torch.float64)
    if bool(ok.any()):
        xs = x[ok]
        s = torch.linalg.svdvals(xs)
        idx = ok.nonzero().flatten().numpy()
        tol = rank_tolerance(s, n, d)
        smin = s.gather(1, (full[ok] - 1).clamp(min=0)[:, None].to(torch.long))[:, 0]
        vals = {
            "full_rank": ((s > tol[:, None]).sum(-1) >= full[ok]).to(torch.float64),
            "rank": (s > tol[:, None]).sum(-1).to(torch.float64),
            "sigma_min": smin, "sigma_max": s[:, 0], "sigma_ratio": smin / s[:, 0],
            "sigma_dominance": s[:, 0] / s[:, 1] if s.shape[1] > 1 else s[:, 0] * math.nan,
            "mean_abs_cos": mean_abs_cos(xs),
        }
        for k in names:
            out[k][idx] = vals[k].to(torch.float64).numpy()
        sv[ok] = s.to(torch.float64)
    return out, sv


def paper_geometry(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """Token geometry per layer (Fig. 4), singular values (Fig. 8), initial cosines (Fig. 9)."""
    from rankcollapse.models import excerpts, iter_hidden_states

    cfg = config_from(GeometryConfig, params)
    model = load_cached(cfg.model, cfg.dtype, cfg.seed, cfg.stand_in)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    info = model_columns(model)
    distinct: Tensor | None = None
    rows: list[dict[str, Any]] = []
    per_layer: dict[str, list[np.ndarray]] = {}
    for t, _, x in iter_hidden_states(model, ids, mode=cfg.mode, layers=cfg.layers):
        if distinct is None:  # X(0): rows equal only where the model embeds a repeated token alike
            distinct = torch.tensor([torch.unique(x[s], dim=0).shape[0] for s in range(x.shape[0])])
        got, sv = geometry_measures(x, distinct)
        for k, v in got.items():
            per_layer.setdefault(k, []).append(v)
        for s in range(cfg.spectrum_samples):
            rows.extend({"kind": "sv", "layer": t, "sample": s, "index": i, "sigma": float(v), **info}
                        for i, v in enumerate(sv[s].tolist()))
        if t == 0:
            rows.extend(_initial_cosines(x, cfg, info))
        on_layer(t)
    for t in range(len(per_layer["full_rank"])):
        row: dict[str, Any] = {"kind": "geometry", "layer": t, "samples": cfg.samples, **info,
                               "distinct_rows": float(distinct.to(torch.float64).mean())}
        finite = np.isfinite(per_layer["sigma_max"][t])
        row["finite"] = float(finite.mean())
        for k, v in per_layer.items():
            row.update(sample_stats(k, v[t]))
        rows.append(row)
    return RunOutput(rows, {**info, "layers_run": len(per_layer["full_rank"]) - 1})


def _initial_cosines(x: Tensor, cfg: GeometryConfig, info: dict[str, Any]) -> list[dict[str, Any]]:
    """``phi0`` rows of every sample and ``cos_hist`` rows of the first ``cosine_samples``."""
    cos = unit_cosines(x)
    n = cos.shape[-1]
    off = ~torch.eye(n, dtype=torch.bool)
    rows: list[dict[str, Any]] = []
    edges = np.linspace(-1.0, 1.0, cfg.cosine_bins + 1)
    for s in range(cos.shape[0]):
        pairs = cos[s][off].numpy()
        rows.append({"kind": "phi0", "layer": 0, "sample": s, "phi0": float(pairs.min()),
                     "negative_share": float((pairs < 0).mean()), "mean_cos": float(pairs.mean()), **info})
        if s < cfg.cosine_samples:
            counts, _ = np.histogram(pairs, bins=edges)
            rows.extend({"kind": "cos_hist", "layer": 0, "sample": s, "bin_lo": float(lo),
                         "bin_hi": float(hi), "count": int(c), **info}
                        for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True))
    return rows


#: Measured cost of one layer for one 128-token sample of a BERT-base-sized model (d = 768, 12
#: heads) on this project's 2-core reference machine, one thread, float32, in seconds, including
#: the per-sample measures; float64 costs FLOAT64_FACTOR times as much. Used only for estimates.
LAYER_SAMPLE_S: dict[str, float] = {"attn": 0.0095, "attn+skip": 0.0095, "attn+ln": 0.0095,
                                    "attn+skip+ln": 0.0095, "full": 0.0235}
GEOMETRY_EXTRA_S = 0.005  # one SVD and the pairwise cosines of a 128 x 768 sample
FLOAT64_FACTOR = 2.0
LOAD_S = 3.0  # loading (or drawing) one 12-layer model


def _scale(params: dict[str, Any]) -> float:
    n = float(params.get("tokens", 128))
    f = FLOAT64_FACTOR if dtype_name(str(params.get("dtype", "float32"))) == "float64" else 1.0
    return f * (n / 128.0)


def paper_curves_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`paper_curves` run (BERT-base-sized model; see LAYER_SAMPLE_S)."""
    variants = params.get("variants") or list(LAYER_SAMPLE_S)
    if params.get("float64_variants") and dtype_name(str(params.get("dtype", "float32"))) == "float64":
        variants = params["float64_variants"]
    per_layer = sum(LAYER_SAMPLE_S.get(v, 0.0235) for v in variants)
    per_layer *= len(params.get("masks") or [1] * 4) * len(params.get("d_qk") or [None])
    layers = int(params.get("layers") or 12)
    blocks = -(-layers // 12) if params.get("fresh_layers") else 1
    return per_layer * layers * int(params.get("samples", 4)) * _scale(params) + LOAD_S * blocks


def paper_geometry_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`paper_geometry` run (own depth taken as 12 when null)."""
    layers = params.get("layers")
    layers = 12 if layers is None else int(layers)
    per = (LAYER_SAMPLE_S["full"] * layers + GEOMETRY_EXTRA_S * (layers + 1)) * int(params.get("samples", 8))
    return per * _scale(params) + LOAD_S


def model_facts(params: dict[str, Any]) -> dict[str, Any]:
    """What a run's ``model`` loads on this machine: ``{"weights": <resolved name>}`` for
    ``pretrained:<ckpt>`` (the checkpoint when cached, else its stand-in), nothing for other names.
    Part of the run identity, so results of a stand-in are not reused once the checkpoint is cached."""
    name = str(params.get("model", ""))
    if not name.startswith(PRETRAINED):
        return {}
    try:
        return {"weights": model_source(name, params.get("stand_in")).name}
    except RankCollapseError:
        return {"weights": None}  # nothing loads: the run fails with its own one-line error


paper_curves.cost_s = paper_curves_cost  # type: ignore[attr-defined]
paper_geometry.cost_s = paper_geometry_cost  # type: ignore[attr-defined]
paper_curves.identity_facts = model_facts  # type: ignore[attr-defined]
paper_geometry.identity_facts = model_facts  # type: ignore[attr-defined]
