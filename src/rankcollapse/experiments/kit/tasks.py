"""Thin task adapters over ``models`` and ``dynamics``: one grid point in, per-layer rows out.

Every adapter turns the flat params of one run into the API's config (unknown keys are an error),
runs it, and returns rows the kit's curves read (``kind = curve`` rows of :func:`curve_rows`: per
layer, over the run's samples, mean / sample std / min / max / log drop of ``mu`` and ``mu_rel``).

- :func:`model_curves` (Figs. 2, 3, 6, 7): one model, every variant x mask x d_qk on the same
  excerpts, the conditions advancing layer by layer together (each layer built once per run);
- :func:`model_geometry` (Figs. 4, 8, 9): the model's own blocks; per-layer geometry
  (``metrics.token_geometry``), singular values, initial pairwise cosines with the offending pairs;
- :func:`simulate_curves`: the simulator (``rankcollapse.dynamics``), one run's batch as samples,
  with Theorem 1's bound per layer where it applies;
- :func:`simulate`, :func:`analyze`: the plain simulator and model analysis rows, for custom sweeps.

Model names are ``rankcollapse.models`` names: ``paper:<checkpoint>`` is the paper's checkpoint when
it is in the local Hugging Face cache, else its stand-in (labelled in every row: ``model_label``,
``stand_in_for``); ``random:<checkpoint>,layers=L`` a random init with ``L`` independent layers. Each
adapter is declared with its cost estimate and identity facts as a :class:`Task`.

Every adapter takes ``execution`` (``{"device": ..., "batch_size": ...}``, from ``reproduce --device
--batch-size`` or a profile's ``batch_size``; never part of a run's identity): the model adapters load
the model on that device and stream the run's samples through it ``batch_size`` at a time, each
statistic computed from all samples' values together (rows equal to one batch's, to the last bit on
the CPU); the simulator adapters run on that device with their whole batch at once (``batch_size``
does not apply: the simulator draws every sample from one generator). Each run's summary says
``device`` and ``batch_size`` as used.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.precision import dtype_name
from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.grid import EXECUTION_KEYS, named_depth
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from
from rankcollapse.experiments.kit.curves import curve_rows, sample_stats

Execution = dict[str, Any] | None

#: The value of a ``masks`` entry that means each layer's own mask (the model's config).
OWN_MASK = "own"


def _execution(execution: Execution) -> tuple[str, int | None]:
    """``(device, batch_size)`` of a run's execution settings (absent: ``cpu``, one batch)."""
    execution = execution or {}
    return str(execution.get("device") or "cpu"), execution.get("batch_size")


class _Ticks:
    """``on_layer`` called ``layers`` times in all (as for one batch), spread evenly over the
    ``layers x batches`` steps of a run streamed in batches, with the layer indices 0, 1, ... in order."""

    def __init__(self, on_layer: OnLayer, layers: int, batches: int) -> None:
        self.on_layer, self.layers, self.steps = on_layer, layers, max(1, layers * batches)
        self.done = self.sent = 0

    def step(self) -> None:
        self.done += 1
        while self.sent < self.done * self.layers // self.steps:
            self.on_layer(self.sent)
            self.sent += 1


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


@dataclass
class CurvesConfig:
    """One run of :func:`model_curves`: one model, dtype and seed; every variant x mask x d_qk."""

    model: str = "random:bert-base-uncased"
    variants: tuple[str, ...] = ("attn", "attn+skip", "attn+ln", "attn+skip+ln", "full")
    masks: tuple[str, ...] = ("complete", "causal", "window:w=1", "causal-window:w=1")
    d_qk: tuple[float | None, ...] = (None,)
    layers: int | None = None
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


def model_curves(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """mu and mu_rel per layer, over the samples, of every variant x mask x d_qk of one model.

    ``execution``: the device and batch size (module docstring); per batch of excerpts [b', n] every
    condition's stream advances layer by layer together, and each condition's per-sample values
    [b, L+1] are the batches' concatenated before :func:`curve_rows` summarises them.
    """
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.metrics import per_sample_metrics
    from rankcollapse.models import excerpts, iter_hidden_states
    from rankcollapse.models.analyze import load_model_cached
    from rankcollapse.models.stream import iter_batches

    cfg = config_from(CurvesConfig, params)
    device, batch_size = _execution(execution)
    start = time.perf_counter()
    model = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    depth = len(model.layers) if cfg.layers is None else cfg.layers
    loaded = time.perf_counter() - start
    conds = [(v, m, d) for v in cfg.variants for m in cfg.masks for d in cfg.d_qk]
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = _Ticks(on_layer, depth + 1, len(chunks))
    # per condition: one [b', L+1] array per batch, of mu, mu_rel and "underflowed" (mu_rel = 0/0)
    values: dict[tuple, dict[str, list[np.ndarray]]] = {c: {"mu": [], "mu_rel": []} for c in conds}
    zeros: dict[tuple, list[np.ndarray]] = {c: [] for c in conds}
    norms: dict[tuple, list[np.ndarray]] = {c: [] for c in conds}
    for batch in iter_batches(ids, batch_size, model.device):
        streams = [
            iter_hidden_states(
                model, batch.ids, mode=v, mask=None if m == OWN_MASK else m, d_qk=d, layers=depth
            )
            for v, m, d in conds
        ]
        layers: dict[tuple, dict[str, list[np.ndarray]]] = {
            c: {"mu": [], "mu_rel": [], "zero": [], "x_norm": []} for c in conds
        }
        for t in range(depth + 1):
            for cond, stream in zip(conds, streams, strict=True):
                t_got, _, x = next(stream)
                assert t_got == t
                x = batch.real(x)
                got = {k: v.numpy() for k, v in per_sample_metrics(x, ("mu", "mu_rel")).items()}
                layers[cond]["mu"].append(got["mu"])
                layers[cond]["mu_rel"].append(got["mu_rel"])
                # finite tokens whose norm rounds to 0 in the dtype: mu_rel = 0/0 (underflow, not overflow)
                finite = torch.isfinite(x).flatten(1).all(dim=1).cpu().numpy()
                layers[cond]["zero"].append(finite & np.isnan(got["mu_rel"]))
                layers[cond]["x_norm"].append(
                    torch.linalg.vector_norm(x.flatten(1).double(), dim=1).cpu().numpy()
                )
            ticks.step()
        for cond in conds:
            for q in ("mu", "mu_rel"):
                values[cond][q].append(np.stack(layers[cond][q], axis=1))
            zeros[cond].append(np.stack(layers[cond]["zero"], axis=1))
            norms[cond].append(np.stack(layers[cond]["x_norm"], axis=1))
    info = model_columns(model)
    rows, nonfinite = [], []
    for (v, m, d), vals in values.items():
        arrays = {q: np.concatenate(a, axis=0) for q, a in vals.items()}  # [b, L+1]
        d_used = float(model.own_d_qk) if d is None else d
        zero, norm = np.concatenate(zeros[(v, m, d)], axis=0), np.concatenate(norms[(v, m, d)], axis=0)
        for row in curve_rows(arrays, cfg.dtype, zero, norm):
            rows.append(
                {"kind": "curve", "variant": v, "mask": m, "d_qk": d_used, "dtype": cfg.dtype, **info, **row}
            )
        if not np.isfinite(arrays["mu"]).all():
            nonfinite.append(f"{v} / {m} / d_qk={d_used:g}")
    summary = {
        **info,
        "conditions": len(conds),
        "layers_run": depth,
        "load_s": round(loaded, 2),
        "nonfinite_conditions": "; ".join(nonfinite),
        "device": str(model.device),
        "batch_size": chunks[0].stop - chunks[0].start if chunks else 0,
    }
    return RunOutput(rows, summary)


@dataclass
class GeometryConfig:
    """One run of :func:`model_geometry`: one model, its own blocks (``mode``), its own depth."""

    model: str = "paper:bert-base-uncased"
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


def model_geometry(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """Token geometry per layer (Fig. 4), singular values (Fig. 8), initial cosines (Fig. 9).

    Rows ``kind = geometry`` (per layer: each column of ``metrics.token_geometry`` as mean / sample std /
    min / max over samples, and ``rank_limit``: how the structural maximum rank was set), ``kind = sv``
    (every singular value of the first ``spectrum_samples`` samples), ``kind = cos_hist`` (histogram of
    the pairwise cosines of X(0) of the first ``cosine_samples``), ``kind = phi0`` (per sample: the
    smallest pairwise cosine of X(0), its token pair, the share of negative pairs).

    ``execution``: the device and batch size (module docstring); the rows, in their order, are those
    of one batch: per-sample values are concatenated over the batches before they are summarised.
    """
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.metrics import GEOMETRY_NAMES, token_geometry
    from rankcollapse.models import excerpts, iter_hidden_states
    from rankcollapse.models.analyze import load_model_cached
    from rankcollapse.models.loading import structural_rank
    from rankcollapse.models.stream import iter_batches

    cfg = config_from(GeometryConfig, params)
    device, batch_size = _execution(execution)
    model = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    info = model_columns(model)
    cap, why = structural_rank(model, cfg.tokens)
    own = len(model.layers) if model.dissected else model.n_model_layers
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = _Ticks(on_layer, (own if cfg.layers is None else cfg.layers) + 1, len(chunks))
    distinct_all: list[Tensor] = []
    sv_rows: dict[int, list[dict[str, Any]]] = {}  # per layer, over the batches in sample order
    cos_rows: list[dict[str, Any]] = []
    per_layer: dict[str, dict[int, list[np.ndarray]]] = {}  # name -> layer -> one array per batch
    for batch in iter_batches(ids, batch_size, model.device):
        first = batch.rows.start
        distinct: Tensor | None = None
        for t, _, x in iter_hidden_states(model, batch.ids, mode=cfg.mode, layers=cfg.layers):
            x = batch.real(x)
            if distinct is None:  # X(0): rows equal only where the model embeds a repeated token alike
                distinct = torch.tensor([torch.unique(x[s], dim=0).shape[0] for s in range(x.shape[0])])
                distinct_all.append(distinct)
                limit = distinct.clamp(max=cap)
            else:
                limit = distinct
            got, sv = token_geometry(x, limit)
            for k, v in got.items():
                per_layer.setdefault(k, {}).setdefault(t, []).append(v.numpy())
            for s in range(first, min(cfg.spectrum_samples, batch.rows.stop)):
                sv_rows.setdefault(t, []).extend(
                    {
                        "kind": "sv",
                        "layer": t,
                        "sample": s,
                        "index": i,
                        "sigma": float(v),
                        "dtype": cfg.dtype,
                        **info,
                    }
                    for i, v in enumerate(sv[s - first].tolist())
                )
            if t == 0:
                cos_rows.extend(_initial_cosines(x, ids[batch.rows], model, cfg, info, first))
            ticks.step()
    mean_distinct = float(torch.cat(distinct_all).double().mean())
    note = f"rank_max = distinct rows of X(0) (mean {mean_distinct:.4g}), capped at X(0) by {why}"
    layers = sorted(per_layer["full_rank"])
    rows: list[dict[str, Any]] = []
    for t in layers:
        rows.extend(sv_rows.get(t, []))
        if t == 0:
            rows.extend(cos_rows)
    for t in layers:
        row: dict[str, Any] = {
            "kind": "geometry",
            "layer": t,
            "samples": cfg.samples,
            "dtype": cfg.dtype,
            **info,
            "rank_limit": note,
        }
        values = {k: np.concatenate(per_layer[k][t]) for k in per_layer}
        row["finite"] = float(np.isfinite(values["sigma_max"]).mean())
        for k in GEOMETRY_NAMES:
            row.update(sample_stats(k, values[k]))
        rows.append(row)
    summary = {**info, "layers_run": len(layers) - 1, "rank_limit": note, "device": str(model.device)}
    summary["batch_size"] = chunks[0].stop - chunks[0].start
    return RunOutput(rows, summary)


def _initial_cosines(
    x: Tensor, ids: Tensor, model: Any, cfg: GeometryConfig, info: dict[str, Any], first: int = 0
) -> list[dict[str, Any]]:
    """``phi0`` rows of every sample of X(0) ``x`` [b, n, d] (with its most negative token pair, decoded)
    and ``cos_hist`` rows; ``first``: the run's index of the batch's first sample."""
    from rankcollapse.metrics import pairwise_cosines

    cos = pairwise_cosines(x).cpu()
    n = cos.shape[-1]
    off = ~torch.eye(n, dtype=torch.bool)
    rows: list[dict[str, Any]] = []
    edges = np.linspace(-1.0, 1.0, cfg.cosine_bins + 1)
    tok = getattr(model, "tokenizer", None)
    for b in range(cos.shape[0]):
        s = first + b  # the sample's index in the run
        c = cos[b].masked_fill(~off, math.inf)
        flat = int(torch.argmin(c))
        i, j = divmod(flat, n)
        pair = ""
        if tok is not None:
            words = tok.convert_ids_to_tokens([int(ids[b, i]), int(ids[b, j])])
            pair = f"{words[0]} / {words[1]}"
        pairs = cos[b][off].numpy()
        rows.append(
            {
                "kind": "phi0",
                "layer": 0,
                "sample": s,
                "phi0": float(pairs.min()),
                "pair": pair,
                "pair_positions": f"{i},{j}",
                "negative_share": float((pairs < 0).mean()),
                "mean_cos": float(pairs.mean()),
                "tokenizer": str(model.info.get("tokenizer", "")),
                **info,
            }
        )
        if s < cfg.cosine_samples:
            counts, _ = np.histogram(pairs, bins=edges)
            rows.extend(
                {
                    "kind": "cos_hist",
                    "layer": 0,
                    "sample": s,
                    "bin_lo": float(lo),
                    "bin_hi": float(hi),
                    "count": int(k),
                    **info,
                }
                for lo, hi, k in zip(edges[:-1], edges[1:], counts, strict=True)
            )
    return rows


def _simulation_config(params: dict[str, Any], execution: Execution) -> Any:
    """The ``SimulationConfig`` of a run's params, on the execution's device when one is given."""
    from rankcollapse.dynamics.simulate import SimulationConfig

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    if execution and execution.get("device"):
        params["device"] = str(execution["device"])
    return config_from(SimulationConfig, params)


def simulate_curves(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """The simulator on a ``SimulationConfig`` built from ``params``; its batch are the samples.

    Rows (``kind = curve``): :func:`curve_rows` of the per-sample mu and mu_rel, the ``variant``
    (the simulator's preset: ``attn`` = SAN, ``attn+sphere`` = the theory's LayerNorm), model words
    for figures, and ``bound`` (Theorem 1's ``C (1 - eps^r)^{t/r}``, the largest C) where it applies.
    Summary: the Theorem 1 check (``theory.*``), the mask radius, final values, ``device`` and
    ``batch_size`` (the simulator's whole batch: ``execution``'s batch size does not apply).
    """
    from rankcollapse.dynamics.simulate import simulate as run_simulation

    config = _simulation_config(params, execution)
    result = run_simulation(config, on_layer=lambda row: on_layer(int(row["layer"])))
    arrays = {"mu": result.mu.T.double().numpy(), "mu_rel": result.mu_rel.T.double().numpy()}
    zero = np.isnan(arrays["mu_rel"]) & np.isfinite(arrays["mu"])
    with np.errstate(divide="ignore", invalid="ignore"):  # ||X||_F = mu / mu_rel where mu_rel > 0
        x_norm = np.where(arrays["mu_rel"] > 0, arrays["mu"] / arrays["mu_rel"], np.nan)
    info = {
        "model_label": f"Gaussian SAN (N = {config.n}, d = {config.d}, ours)",
        "model_name": "simulator",
        "model_kind": "simulated",
        "pretrained": False,
        "stand_in_for": "",
        "d_model": config.d,
    }
    theory = result.theory
    bound = (
        theory.bound(list(range(len(result.rows)))).tolist()
        if theory is not None and theory.applicable and theory.log_rate is not None
        else None
    )
    rows = []
    for row in curve_rows(arrays, config.dtype, zero, x_norm):
        extra = {"bound": bound[row["layer"]]} if bound is not None else {}
        rows.append(
            {
                "kind": "curve",
                "variant": config.preset,
                "mask": str(params.get("mask", "complete")),
                "d_qk": float(config.d_qk),
                "dtype": config.dtype,
                **info,
                **row,
                **extra,
            }
        )
    summary = _flatten("", result.summary())
    summary["radius"] = result.radius
    summary.update(device=config.device, batch_size=config.batch)
    return RunOutput(rows, summary)


def _flatten(prefix: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts to ``a.b`` keys; lists and tuples (per-sample values) are left out."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(f"{name}.", value))
        elif not isinstance(value, list | tuple):
            out[name] = value
    return out


def simulate(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """``rankcollapse.dynamics.simulate`` as it is: the simulator's per-layer rows (batch means, min,
    max) and its summary. For custom sweeps (``--config-dir``). ``execution``: as :func:`simulate_curves`."""
    from rankcollapse.dynamics.simulate import simulate as run_simulation

    config = _simulation_config(params, execution)
    result = run_simulation(config, on_layer=lambda row: on_layer(int(row["layer"])))
    summary = _flatten("", result.summary())
    summary["radius"] = result.radius
    summary.update(device=config.device, batch_size=config.batch)
    return RunOutput([dict(r) for r in result.rows], summary)


def analyze(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """``rankcollapse.models.analyze`` as it is: one row per hidden state, model facts and timings.
    For custom sweeps (``--config-dir``). ``execution``: ``AnalyzeConfig.device`` and ``batch_size``."""
    from rankcollapse.models import AnalyzeConfig
    from rankcollapse.models import analyze as run_analysis

    params = dict(params)
    if isinstance(params.get("metrics"), list):
        params["metrics"] = tuple(params["metrics"])
    params.update({k: v for k, v in (execution or {}).items() if k in EXECUTION_KEYS})
    config = config_from(AnalyzeConfig, params)
    result = run_analysis(config, on_row=lambda row: on_layer(int(row["layer"])))
    summary = {k: v for k, v in result.model_info.items() if isinstance(v, str | int | float | bool)}
    summary.update({f"seconds.{k}": v for k, v in result.seconds.items()})
    summary["final_mu_rel"] = float(result.rows[-1]["mu_rel"])
    summary.update(device=config.device, batch_size=min(config.batch_size or config.samples, config.samples))
    return RunOutput([dict(r) for r in result.rows], summary)


#: Measured cost of one layer for one 128-token sample of a BERT-base-sized model (d = 768, 12
#: heads) on this project's 2-core reference machine, one thread, float32, in seconds, including
#: the per-sample measures; float64 costs FLOAT64_FACTOR times as much. Used only for estimates.
LAYER_SAMPLE_S: dict[str, float] = {
    "attn": 0.0095,
    "attn+skip": 0.0095,
    "attn+ln": 0.0095,
    "attn+skip+ln": 0.0095,
    "full": 0.0235,
}
GEOMETRY_EXTRA_S = 0.005  # one SVD and the pairwise cosines of a 128 x 768 sample
FLOAT64_FACTOR = 2.0
LOAD_S = 3.0  # loading (or drawing) one 12-layer model
FRESH_LAYER_S = 0.25  # drawing one fresh BERT-base layer with Hugging Face's init
#: Seconds per (layer x sample x n^2 d) of the simulator, float64, one thread (measured, 2026-12-01).
SIM_UNIT_S = 2.0e-9


def _scale(params: dict[str, Any]) -> float:
    n = float(params.get("tokens", 128))
    f = FLOAT64_FACTOR if dtype_name(str(params.get("dtype", "float32"))) == "float64" else 1.0
    return f * (n / 128.0)


def _depth(params: dict[str, Any]) -> int:
    if params.get("layers"):
        return int(params["layers"])
    named = named_depth(params.get("model"))
    return 12 if named is None else named


def model_curves_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`model_curves` run (BERT-base-sized model; see LAYER_SAMPLE_S)."""
    variants = params.get("variants") or list(LAYER_SAMPLE_S)
    if params.get("float64_variants") and dtype_name(str(params.get("dtype", "float32"))) == "float64":
        variants = params["float64_variants"]
    per_layer = sum(LAYER_SAMPLE_S.get(v, 0.0235) for v in variants)
    per_layer *= len(params.get("masks") or [1] * 4) * len(params.get("d_qk") or [None])
    layers = _depth(params)
    fresh = max(0, layers - 12) * FRESH_LAYER_S if named_depth(params.get("model")) is not None else 0.0
    return per_layer * layers * int(params.get("samples", 4)) * _scale(params) + LOAD_S + fresh


def model_geometry_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`model_geometry` run (own depth taken as 12 when null)."""
    layers = params.get("layers")
    layers = 12 if layers is None else int(layers)
    per = (LAYER_SAMPLE_S["full"] * layers + GEOMETRY_EXTRA_S * (layers + 1)) * int(params.get("samples", 8))
    return per * _scale(params) + LOAD_S


def simulate_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one simulator run: ``SIM_UNIT_S x layers x batch x n^2 d`` (float32 half)."""
    size = (
        float(params.get("layers") or 128)
        * float(params.get("batch", 8))
        * float(params.get("n", 32)) ** 2
        * float(params.get("d", 16))
    )
    half = 0.5 if dtype_name(str(params.get("dtype", "float64"))) == "float32" else 1.0
    return SIM_UNIT_S * size * half + 0.05


def model_facts(params: dict[str, Any]) -> dict[str, Any]:
    """What a run's ``model`` loads on this machine: ``{"weights": <resolved name>}`` for ``paper:<ckpt>``
    (the checkpoint when cached, else its stand-in), nothing for other names. Part of the run identity,
    so results of a stand-in are not reused once the checkpoint is cached."""
    from rankcollapse.models import resolve_model

    name = str(params.get("model", ""))
    if not name.startswith("paper:"):
        return {}
    try:
        return {"weights": resolve_model(name).name}
    except RankCollapseError:
        return {"weights": None}  # nothing loads: the run fails with its own one-line error


MODEL_CURVES = Task(model_curves, cost_s=model_curves_cost, identity_facts=model_facts)
MODEL_GEOMETRY = Task(model_geometry, cost_s=model_geometry_cost, identity_facts=model_facts)
SIMULATE_CURVES = Task(simulate_curves, cost_s=simulate_cost)
#: Tasks a custom sweep (``--config-dir``) may name, besides every story's task.
GENERIC_TASKS: dict[str, Task] = {t.name: t for t in (Task(simulate, cost_s=simulate_cost), Task(analyze))}
