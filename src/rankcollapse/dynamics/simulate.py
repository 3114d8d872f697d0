"""The simulator: run a deep self-attention network layer by layer and measure collapse as it goes.

>>> result = simulate(SimulationConfig(mask="causal", n=32, d=16, layers=128))
>>> result.rows[-1]["mu_rel"]        # row t describes X(t); row 0 the input

Only metric rows (and the per-sample mu, mu_rel, smallest attention weight) are kept, so memory
does not grow with depth, unless ``keep_trajectory=True``. ``on_layer(row)`` is called with each
row as soon as it is measured (the CLI streams it to ``metrics.csv``).

Reproducibility: ``seed`` feeds two independent ``torch.Generator`` streams (inputs, weights)
derived with ``numpy.random.SeedSequence``; every draw is float64 on the CPU, then cast and
moved, so the same seed gives the same network whatever the dtype, device or kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.norms import NORMS
from rankcollapse.dynamics.kernels import KERNELS, KernelPlan, plan_kernel
from rankcollapse.dynamics.layers import PLACEMENTS, PRESETS, LayerSpec, apply_layer, get_preset
from rankcollapse.dynamics.theory import TheoryCheck, check_theorem1, radius_of_dense
from rankcollapse.dynamics.weights import (
    INPUT_KINDS,
    OUTPUT_FAMILIES,
    VALUE_FAMILIES,
    LayerWeights,
    draw_inputs,
    draw_layer_weights,
)
from rankcollapse.errors import RankCollapseError
from rankcollapse.metrics import FLOOR_FACTOR, METRIC_NAMES, collapse_metrics, summarize
from rankcollapse.runtime import trim_heap_every

DTYPES = {"float64": torch.float64, "f64": torch.float64, "float32": torch.float32, "f32": torch.float32}


@dataclass
class SimulationConfig:
    """Everything that defines a run (JSON-able unless tensors are given).

    mask: mask spec (``rankcollapse.masks.parse_mask``), e.g. ``"causal"``, ``"window:w=8"``.
    n, d, layers, batch: tokens, features, depth, independent input samples (same network).
    preset: layer assembly, see ``PRESETS``; ``norm``/``placement``/``skip``/``mlp`` override it
    (``skip``: lambda of ``X + lambda f(X)``; 0 or None in an override means no skip).
    heads, qk_dim (per-head query/key width, default d // heads), temperature (``d_QK`` in
    ``logits / sqrt(d_QK)``), value (W_V family) with value_scale (sigma), qk_scale, output (W_O).
    shared_weights: one layer's weights reused at every depth (else fresh per layer).
    inputs: ``gaussian``, ``sphere``, ``hemisphere`` (or ``input_tokens``: [n, d] or [b, n, d]).
    value_matrix: user W_V, [d, d] or [h, d, d] (shared by all layers) or [layers, h, d, d].
    mask_matrix: a user boolean [n, n] mask instead of ``mask``.
    dtype ``float64``/``float32``; device ``cpu``/``cuda``; kernel ``auto``/``dense``/``sdpa``/``band``.
    metrics: column names to compute per layer (None = all of ``METRIC_NAMES``; mu and mu_rel
    always). stop_below: stop once every sample's mu_rel is below it. track_min_weight: record
    the smallest attention weight on an edge (None = only for pure attention, where the Theorem 1
    check uses it; it forces the explicit attention matrix, hence the dense cost).
    metric_threads: torch intra-op threads while measuring (default 1: the per-layer measures are
    small reductions, and on a loaded machine every multi-threaded op waits a scheduler slice for
    its partner thread, measured 16 ms per op on the shared 2-core box; None keeps torch's
    setting, better for large n with SVD or cosine metrics on a quiet machine).
    """

    mask: str = "complete"
    n: int = 32
    d: int = 16
    layers: int = 128
    preset: str = "attn"
    norm: str | None = None
    placement: str | None = None
    skip: float | None = None
    mlp: bool | None = None
    heads: int = 1
    qk_dim: int | None = None
    temperature: float = 1.0
    value: str = "gaussian"
    value_scale: float = 1.0
    qk_scale: float = 1.0
    output: str = "mean"
    shared_weights: bool = False
    inputs: str = "gaussian"
    batch: int = 8
    seed: int = 0
    dtype: str = "float64"
    device: str = "cpu"
    kernel: str = "auto"
    band_block: int | None = None
    metrics: tuple[str, ...] | None = None
    stop_below: float | None = None
    track_min_weight: bool | None = None
    metric_threads: int | None = 1
    value_matrix: Tensor | None = field(default=None, repr=False)
    input_tokens: Tensor | None = field(default=None, repr=False)
    mask_matrix: Tensor | None = field(default=None, repr=False)

    def layer_spec(self) -> LayerSpec:
        """The preset with the explicit overrides applied."""
        base = get_preset(self.preset)
        skip = base.skip if self.skip is None else (None if self.skip == 0 else float(self.skip))
        return LayerSpec(
            norm=base.norm if self.norm is None else self.norm,
            placement=base.placement if self.placement is None else self.placement,
            skip=skip,
            mlp=base.mlp if self.mlp is None else self.mlp,
        )

    def validate(self) -> None:
        """Raise RankCollapseError (one line) on any bad setting."""

        def bad(what: str, value: Any, allowed: str) -> RankCollapseError:
            return RankCollapseError(f"{what} must be {allowed}, got {value!r}")

        for name in ("n", "d", "layers", "batch", "heads"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < (0 if name == "layers" else 1):
                raise bad(name, v, "a non-negative integer" if name == "layers" else "a positive integer")
        if self.n < 2:
            raise bad("n", self.n, "at least 2 (pairwise measures need two tokens)")
        if self.qk_dim is not None and (not isinstance(self.qk_dim, int) or self.qk_dim < 1):
            raise bad("qk_dim", self.qk_dim, "a positive integer")
        if self.qk_dim is None and self.d % self.heads:
            raise bad("heads", self.heads, f"a divisor of d = {self.d} (or give qk_dim)")
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise bad("temperature", self.temperature, "a positive number")
        for name, allowed in (("value", VALUE_FAMILIES), ("output", OUTPUT_FAMILIES), ("inputs", INPUT_KINDS),
                              ("kernel", KERNELS), ("dtype", tuple(DTYPES)), ("preset", tuple(PRESETS))):
            if getattr(self, name) not in allowed:
                raise bad(name, getattr(self, name), "one of " + ", ".join(allowed))
        if self.norm is not None and self.norm not in NORMS:
            raise bad("norm", self.norm, "one of " + ", ".join(NORMS))
        if self.placement is not None and self.placement not in PLACEMENTS:
            raise bad("placement", self.placement, "one of " + ", ".join(PLACEMENTS))
        for name in ("value_scale", "qk_scale"):
            if not math.isfinite(getattr(self, name)):
                raise bad(name, getattr(self, name), "a finite number")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise RankCollapseError(f"device {self.device!r} requested but torch sees no GPU; use cpu")
        if self.device != "cpu" and not self.device.startswith("cuda"):
            raise bad("device", self.device, "cpu or cuda[:k]")
        if self.metrics is not None:
            unknown = [m for m in self.metrics if m not in METRIC_NAMES]
            if unknown:
                raise bad("metrics", unknown, "names among " + ", ".join(METRIC_NAMES))
        if self.stop_below is not None and not self.stop_below > 0:
            raise bad("stop_below", self.stop_below, "a positive number")
        if self.metric_threads is not None and self.metric_threads < 1:
            raise bad("metric_threads", self.metric_threads, "a positive integer or None")
        if self.band_block is not None and self.band_block < 1:
            raise bad("band_block", self.band_block, "a positive integer")
        self._check_tensors()

    def _check_tensors(self) -> None:
        d, h = self.d, self.heads
        if self.value_matrix is not None:
            shape = tuple(self.value_matrix.shape)
            if shape not in ((d, d), (h, d, d), (self.layers, h, d, d)):
                raise RankCollapseError(
                    f"value_matrix shape {shape} not allowed; use ({d}, {d}), ({h}, {d}, {d}) or "
                    f"({self.layers}, {h}, {d}, {d})"
                )
        if self.input_tokens is not None:
            shape = tuple(self.input_tokens.shape)
            if shape not in ((self.n, d), (self.batch, self.n, d)):
                raise RankCollapseError(
                    f"input_tokens shape {shape} not allowed; "
                    f"use ({self.n}, {d}) or ({self.batch}, {self.n}, {d})"
                )
        if self.mask_matrix is not None and tuple(self.mask_matrix.shape) != (self.n, self.n):
            shape = tuple(self.mask_matrix.shape)
            raise RankCollapseError(f"mask_matrix shape {shape} must be ({self.n}, {self.n})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able settings (user tensors reported by shape only)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else (
                {"given_shape": list(v.shape)} if isinstance(v, Tensor) else v)
        out["layer_spec"] = self.layer_spec().__dict__
        return out


@dataclass
class ResolvedMask:
    """The mask of a run at length n: dense matrix, band (lo, hi) or None, completeness, radius."""

    spec: str
    dense: Tensor
    band: tuple[int, int] | None
    complete: bool
    _radius: int | str | None = "unknown"

    @property
    def radius(self) -> int | None:
        if self._radius == "unknown":
            self._radius = _radius_of(self)
        return self._radius  # type: ignore[return-value]


def _radius_of(m: ResolvedMask) -> int | None:
    """Radius from the masks package (``analyze_mask``); a plain BFS if that is unavailable."""
    try:
        from rankcollapse.masks import analyze_mask, parse_mask
    except ImportError:
        return radius_of_dense(m.dense.cpu())
    target = m.dense.cpu().numpy() if m.spec == "<matrix>" else parse_mask(m.spec)
    r = analyze_mask(target, m.dense.shape[0]).radius
    return None if r is None else int(r)


def resolve_mask(spec: str | Tensor, n: int) -> ResolvedMask:
    """A mask spec (via ``rankcollapse.masks.parse_mask``) or a boolean [n, n] matrix, at length n."""
    if isinstance(spec, Tensor):
        if spec.dtype != torch.bool or tuple(spec.shape) != (n, n):
            got = f"{spec.dtype} {tuple(spec.shape)}"
            raise RankCollapseError(f"mask matrix must be bool ({n}, {n}), got {got}")
        return ResolvedMask("<matrix>", spec.cpu(), None, bool(spec.all()))
    from rankcollapse.masks import parse_mask

    mask = parse_mask(spec)
    return ResolvedMask(mask.spec, mask.dense(n), mask.band(n), bool(mask.is_complete(n)))


@dataclass
class SimulationResult:
    """What a run keeps.

    rows: one dict per layer (row t describes X(t)): ``layer``, the batch mean of every metric,
    then ``<name>_min``/``<name>_max``, and ``attn_min`` (smallest attention weight on an edge
    used to produce X(t); NaN for row 0) when tracked. mu, mu_rel: [T+1, b] per sample.
    min_weight: [T, b] or None. final: X(T) [b, n, d]; trajectory: [T+1, b, n, d] or None.
    kernel: the attention path used. theory: the Theorem 1 check (pure attention only).
    stopped: why the run ended before ``layers`` (``""`` if it did not).
    """

    config: SimulationConfig
    rows: list[dict[str, float]]
    mu: Tensor
    mu_rel: Tensor
    min_weight: Tensor | None
    final: Tensor
    kernel: str
    radius: int | None = None
    theory: TheoryCheck | None = None
    trajectory: Tensor | None = None
    stopped: str = ""

    def frame(self) -> Any:
        """The rows as a pandas DataFrame (one row per layer)."""
        import pandas as pd

        return pd.DataFrame(self.rows)

    def summary(self) -> dict[str, Any]:
        """Final-layer collapse, floor flag and theory check, JSON-able (the CLI's ``--json``).

        ``at_precision_floor``: every sample's ``mu_rel <= FLOOR_FACTOR * eps(dtype)`` (the
        ``at_floor`` metric's test), ``precision_floor`` that threshold.
        """
        last = self.rows[-1]
        floor = FLOOR_FACTOR * torch.finfo(DTYPES[self.config.dtype]).eps
        out: dict[str, Any] = {
            "layers_run": int(last["layer"]),
            "final_mu": last["mu"],
            "final_mu_rel": last["mu_rel"],
            "final_mu_rel_max": last["mu_rel_max"],
            "at_precision_floor": bool(last["mu_rel_max"] <= floor),  # every sample at the floor
            "precision_floor": floor,
            "kernel": self.kernel,
            "stopped": self.stopped,
        }
        if self.theory is not None:
            out["theory"] = self.theory.to_dict()
        return out


def _measure(x: Tensor, names: tuple[str, ...], threads: int | None) -> dict[str, Tensor]:
    if threads is None or x.device.type != "cpu" or threads == torch.get_num_threads():
        return collapse_metrics(x, names)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return collapse_metrics(x, names)
    finally:
        torch.set_num_threads(before)


def _seeds(seed: int) -> tuple[int, int]:
    inputs, weights = np.random.SeedSequence(seed).spawn(2)
    return int(inputs.generate_state(1, np.uint64)[0] >> 1), int(weights.generate_state(1, np.uint64)[0] >> 1)


def _initial_tokens(cfg: SimulationConfig, gen: torch.Generator) -> Tensor:
    if cfg.input_tokens is not None:
        x = torch.as_tensor(cfg.input_tokens, dtype=torch.float64)
        return x.expand(cfg.batch, cfg.n, cfg.d).clone()
    return draw_inputs(cfg.inputs, cfg.batch, cfg.n, cfg.d, gen)


class _WeightStream:
    """Layer weights in order, fresh or shared, drawn on the CPU in float64 then cast."""

    def __init__(self, cfg: SimulationConfig, spec: LayerSpec, seed: int, dtype: torch.dtype) -> None:
        self.cfg, self.spec, self.dtype = cfg, spec, dtype
        self.gen = torch.Generator().manual_seed(seed)
        self.shared: LayerWeights | None = None

    def layer(self, t: int) -> LayerWeights:
        cfg = self.cfg
        if cfg.shared_weights and self.shared is not None:
            return self.shared
        given = cfg.value_matrix
        if given is not None and given.ndim == 4:
            given = given[t]
        w = draw_layer_weights(
            d=cfg.d, heads=cfg.heads, qk_dim=cfg.qk_dim or cfg.d // cfg.heads, value=cfg.value,
            value_scale=cfg.value_scale, qk_scale=cfg.qk_scale, output=cfg.output, mlp=self.spec.mlp,
            generator=self.gen, value_given=given,
        ).to(self.dtype, cfg.device)
        if cfg.shared_weights:
            self.shared = w
        return w


def simulate(
    config: SimulationConfig,
    *,
    keep_trajectory: bool = False,
    on_layer: Callable[[dict[str, float]], None] | None = None,
) -> SimulationResult:
    """Run ``config.layers`` layers on ``config.batch`` input samples and measure every layer.

    Returns a :class:`SimulationResult`; row t of ``rows`` describes X(t) (row 0 the input).
    Stops early (``stopped`` says why) once every sample's mu_rel is below ``stop_below`` or the
    tokens stop being finite (over/underflow of a growing/shrinking network).
    """
    cfg = config
    cfg.validate()
    spec = cfg.layer_spec()
    dtype = DTYPES[cfg.dtype]
    device = torch.device(cfg.device)
    mask = resolve_mask(cfg.mask_matrix if cfg.mask_matrix is not None else cfg.mask, cfg.n)
    plan: KernelPlan = plan_kernel(mask.dense.to(device), kernel=cfg.kernel, band=mask.band,
                                   complete=mask.complete, block=cfg.band_block)
    track = spec.is_pure_attention if cfg.track_min_weight is None else cfg.track_min_weight
    names = METRIC_NAMES if cfg.metrics is None else tuple(
        dict.fromkeys(("mu", "mu_rel", *cfg.metrics)))
    in_seed, w_seed = _seeds(cfg.seed)
    x = _initial_tokens(cfg, torch.Generator().manual_seed(in_seed)).to(dtype=dtype, device=device)
    weights = _WeightStream(cfg, spec, w_seed, dtype)

    rows: list[dict[str, float]] = []
    mus: list[Tensor] = []
    mu_rels: list[Tensor] = []
    mins: list[Tensor] = []
    traj: list[Tensor] = []
    stopped = ""

    def measure(t: int, x: Tensor, min_w: Tensor | None) -> dict[str, float]:
        per = _measure(x, names, cfg.metric_threads)
        mus.append(per["mu"].detach().to("cpu", torch.float64))
        mu_rels.append(per["mu_rel"].detach().to("cpu", torch.float64))
        row: dict[str, float] = {"layer": t, **summarize(per)}
        if track:
            row["attn_min"] = math.nan if min_w is None else float(min_w.min())
        rows.append(row)
        if keep_trajectory:
            traj.append(x.detach().to("cpu").clone())
        if on_layer is not None:
            on_layer(row)
        return row

    with torch.no_grad():
        measure(0, x, None)
        for t in range(cfg.layers):
            x, min_w = apply_layer(x, weights.layer(t), spec, plan, cfg.temperature, need_min=track)
            if min_w is not None:
                mins.append(min_w.detach().to("cpu", torch.float64))
            measure(t + 1, x, min_w)
            trim_heap_every(t + 1)
            if not bool(torch.isfinite(mus[-1]).all()):
                stopped = f"tokens not finite at layer {t + 1} (the network over/underflows in {cfg.dtype})"
                break
            if cfg.stop_below is not None and bool((mu_rels[-1] < cfg.stop_below).all()):
                stopped = f"every sample below mu_rel {cfg.stop_below:g} at layer {t + 1}"
                break

    mu_t = torch.stack(mus)
    min_weight = torch.stack(mins) if mins else None
    theory = None
    radius = None
    if spec.is_pure_attention and min_weight is not None:
        radius = mask.radius
        # theory block (Theorem 1, dynamics/theory.py): the tail rate skips layers at the precision floor
        theory = check_theorem1(mu_t, float(min_weight.min()), radius, mu_rel=torch.stack(mu_rels),
                                floor_rel=FLOOR_FACTOR * torch.finfo(DTYPES[cfg.dtype]).eps)
    elif not spec.is_pure_attention:
        theory = TheoryCheck(False, f"preset is not pure attention ({spec}); Theorem 1 does not apply")
    return SimulationResult(
        config=cfg, rows=rows, mu=mu_t, mu_rel=torch.stack(mu_rels), min_weight=min_weight,
        final=x.detach(), kernel=plan.name, radius=radius, theory=theory,
        trajectory=torch.stack(traj) if keep_trajectory else None, stopped=stopped,
    )


def with_overrides(config: SimulationConfig, **changes: Any) -> SimulationConfig:
    """A copy of ``config`` with some fields changed (dataclasses.replace)."""
    return replace(config, **changes)
