"""The simulator: run a deep self-attention network layer by layer and measure collapse as it goes.

>>> result = simulate(SimulationConfig(mask="causal", tokens=32, d=16, layers=128))
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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.positions import rotary_angles
from rankcollapse.core.precision import floor_rel, parse_dtype
from rankcollapse.dynamics.config import SimulationConfig, estimate_memory
from rankcollapse.dynamics.kernels import KernelPlan, plan_kernel
from rankcollapse.dynamics.layers import LayerSpec, apply_layer, layer_attention, layer_logits, norm_step
from rankcollapse.dynamics.theory import TheoryCheck, check_theorem1
from rankcollapse.dynamics.weights import LayerWeights, draw_inputs, draw_layer_weights
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.runtime import trim_heap_every
from rankcollapse.edge.validate import trusted
from rankcollapse.masks.position import decay_bias
from rankcollapse.masks.resolved import ResolvedMask, resolve_mask
from rankcollapse.metrics import (
    METRIC_NAMES,
    collapse_metrics,
    document_columns,
    head_mean,
    identity_context,
    influence_profile,
    rank_columns,
    rollout_columns,
    rollout_step,
    speed_columns,
    summarize,
)

__all__ = [
    "ResolvedMask",
    "SimulationConfig",
    "SimulationResult",
    "estimate_memory",
    "layer_weights",
    "resolve_mask",
    "score_decay",
    "simulate",
]


@dataclass
class SimulationResult:
    """What a run keeps.

    rows: one dict per layer (row t describes X(t)): ``layer``, the batch mean of every metric,
    then ``<name>_min``/``<name>_max``; for a mask of several independent parts (``document:``,
    ``block:``) ``mu_rel_doc{k}`` per part and ``mu_rel_docs_max`` (largest part, batch means);
    ``attn_min`` (smallest attention weight on an edge used to
    produce X(t); NaN for row 0) when tracked, and ``overflow`` (share of samples whose tokens are
    no longer finite; their metrics are NaN). mu, mu_rel: [T+1, b] per sample.
    min_weight: [T, b] or None. final: X(T) [b, n, d]; trajectory: [T+1, b, n, d] or None.
    kernel: the attention path used. theory: the Theorem 1 check (pure attention only).
    rollout: the cumulative-context columns asked for (``first_token_share_mean``,
    ``first_token_gap_max``), per sample [T+1, b] (also batch means in ``rows``); influence: the batch-mean
    influence profile per layer, [T+1, n] (``influence="last"``) or [T+1, n, n] (``"all"``), else None.
    Both use ``P(t) = M(t) ... M(1)`` of the head-averaged attention, ``M = lam I + (1 - lam) A``.
    ranks: the rank columns asked for (``metrics.affine.RANK_NAMES``), per sample [T+1, b] (NaN where a
    column does not apply: ``norm_*`` at row 0), also batch means in ``rows``.
    speeds: the token-speed columns asked for (``metrics.SPEED_NAMES``: ``token_speed``, the move of layer t,
    X(t-1) -> X(t)), per sample [T+1, b], NaN at row 0 (nothing moved the input); batch means in ``rows``.
    stopped: why the run ended before ``layers`` (``""`` if it did not); nonfinite_layer: the
    first layer with a non-finite token (None if none).
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
    nonfinite_layer: int | None = None
    rollout: dict[str, Tensor] = field(default_factory=dict)
    influence: Tensor | None = None
    ranks: dict[str, Tensor] = field(default_factory=dict)
    speeds: dict[str, Tensor] = field(default_factory=dict)

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame (one row per layer, columns as in ``metrics.csv``)."""
        import pandas as pd

        return pd.DataFrame(self.rows)

    @property
    def state(self) -> str:
        """The final state: ``overflow`` (tokens turned non-finite), ``undefined`` (0/0: every token
        vanished, mu_rel is NaN), ``collapsed`` (every sample at the precision floor) or ``running``."""
        last = self.rows[-1]
        if self.nonfinite_layer is not None:
            return "overflow"
        if math.isnan(last["mu_rel_max"]):
            return "undefined"
        return "collapsed" if last["mu_rel_max"] <= floor_rel(self.config.dtype) else "running"

    def summary(self) -> dict[str, Any]:
        """Final-layer collapse, floor flag, numerical state and theory check, JSON-able (``--json``).

        ``at_precision_floor``: every sample's ``mu_rel <= FLOOR_FACTOR * eps(dtype)`` (the
        ``at_floor`` metric's test), ``precision_floor`` that threshold; ``state`` see :attr:`state`;
        ``overflow``: the run turned non-finite (at ``nonfinite_layer``). With a mask of several
        independent parts: ``documents`` (columns written, at most 16) and ``final_mu_rel_docs_max``.
        """
        last = self.rows[-1]
        floor = floor_rel(self.config.dtype)
        state = self.state
        out: dict[str, Any] = {
            "layers_run": int(last["layer"]),
            "final_mu": last["mu"],
            "final_mu_rel": last["mu_rel"],
            "final_mu_rel_max": last["mu_rel_max"],
            "at_precision_floor": state == "collapsed",  # every sample at the floor
            "precision_floor": floor,
            "state": state,
            "overflow": self.nonfinite_layer is not None,
            "nonfinite_layer": self.nonfinite_layer,
            "kernel": self.kernel,
            "stopped": self.stopped,
        }
        if "mu_rel_docs_max" in last:
            out["documents"] = sum(1 for k in self.rows[0] if k.startswith("mu_rel_doc") and k[10:].isdigit())
            out["final_mu_rel_docs_max"] = last["mu_rel_docs_max"]
        if self.theory is not None:
            out["theory"] = self.theory.to_dict()
        return out


def _measure(x: Tensor, names: tuple[str, ...], threads: int | None) -> dict[str, Tensor]:
    """``collapse_metrics`` per sample (non-finite samples give NaN, never an SVD failure)."""
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


def _initial_tokens(cfg: SimulationConfig, gen: torch.Generator, dtype: torch.dtype) -> Tensor:
    if cfg.input_tokens is not None:
        x = cfg.input_tokens.detach().to("cpu", torch.float64)
        x = x.expand(cfg.samples, cfg.tokens, cfg.d).clone()
    else:
        x = draw_inputs(cfg.inputs, cfg.samples, cfg.tokens, cfg.d, gen)
    cast = x.to(dtype=dtype)
    if not bool(torch.isfinite(cast).all()):
        big = float(x.abs().max())
        raise RankCollapseError(f"input_tokens overflow {cfg.dtype} (largest |entry| {big:.3g} > "
                                f"{torch.finfo(dtype).max:.3g}); allowed: entries finite in {cfg.dtype}")
    return cast.to(cfg.device)


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
            value_scale=cfg.scale, qk_scale=cfg.qk_scale, output=cfg.output, mlp=self.spec.mlp,
            generator=self.gen, value_given=None if given is None else given.detach().cpu(),
            tied_qk=cfg.tied_qk,
        ).to(self.dtype, cfg.device)
        if cfg.shared_weights:
            self.shared = w
        return w


def rotary_positions(
    cfg: SimulationConfig, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    """The ``(cos, sin)`` [n, e] of a run's rotary embedding at positions ``0 .. N-1``
    (``core.positions``)."""
    assert cfg.rope_base is not None
    cos, sin = rotary_angles(torch.arange(cfg.tokens), cfg.qk_width, cfg.rope_base, cfg.rope_scale, dtype)
    return cos.to(device), sin.to(device)


def score_decay(config: SimulationConfig) -> Tensor:
    """The last query's score decay over the distance in the first layer of ``simulate(config)`` (the same
    draws: X(0) and layer 1's weights), ``D(Δ) = S[N-1, N-1] - S[N-1, N-1-Δ]`` for ``Δ = 0 .. N-1``, with
    ``S`` the scores before the mask (``dynamics.layers.layer_logits``: the rotary embedding of
    ``rope_base`` included, no ``alibi_slope`` bias). Per sample and head: [b, h, N], in the run's dtype.

    With the same content at every position (``inputs="repeated"``) ``S[i, j]`` depends on positions only
    through the rotation; under RoPE with ``tied_qk`` (q = k) it is
    ``D(Δ) = Σ_k |q_k|² (1 - cos(Δ θ_k)) / sqrt(d_qk)`` (pairs ``q_k`` of the query, ``θ_k`` of
    ``core.positions.rotary_frequencies``): ``≈ Δ² Σ_k |q_k|² θ_k² / (2 sqrt(d_qk))`` at small ``Δ θ_1``.
    """
    if not isinstance(config, SimulationConfig):
        from rankcollapse.edge.errors import RankCollapseTypeError
        from rankcollapse.edge.validate import type_name

        raise RankCollapseTypeError(f"config must be a SimulationConfig, got {type_name(config)}")
    cfg = config
    cfg.validate()
    dtype, device = parse_dtype(cfg.dtype), torch.device(cfg.device)
    in_seed, w_seed = _seeds(cfg.seed)
    x = _initial_tokens(cfg, torch.Generator().manual_seed(in_seed), dtype)
    w = _WeightStream(cfg, cfg.layer_spec(), w_seed, dtype).layer(0)
    rotary = None if cfg.rope_base is None else rotary_positions(cfg, dtype, device)
    with torch.no_grad(), trusted():
        last = layer_logits(x, w, cfg.layer_spec(), cfg.d_qk, rotary)[..., -1, :]  # [b, h, N] over keys j
    return last[..., -1:] - last.flip(-1)


def layer_weights(config: SimulationConfig) -> Callable[[int], LayerWeights]:
    """``t -> W(t)``: the weights ``simulate(config)`` draws for layer ``t`` (0-based; the same stream, in
    the run's dtype and device), to be asked in order ``t = 0, 1, ...`` (each draw continues the stream).
    For measuring what a layer did on a kept trajectory (``dynamics.phases``)."""
    config.validate()
    stream = _WeightStream(config, config.layer_spec(), _seeds(config.seed)[1], parse_dtype(config.dtype))
    return stream.layer


def simulate(
    config: SimulationConfig,
    *,
    keep_trajectory: bool = False,
    on_layer: Callable[[dict[str, float]], None] | None = None,
) -> SimulationResult:
    """Run ``config.layers`` layers on ``config.samples`` input samples and measure every layer.

    Returns a :class:`SimulationResult`; row t of ``rows`` describes X(t) (row 0 the input).
    Stops early (``stopped`` says why) once every sample's mu_rel is below ``stop_below`` or the
    tokens stop being finite (over/underflow of a growing network): that last row carries
    ``overflow > 0`` and NaN metrics for the non-finite samples, and ``nonfinite_layer`` is set.
    """
    if not isinstance(config, SimulationConfig):
        from rankcollapse.edge.errors import RankCollapseTypeError
        from rankcollapse.edge.validate import type_name

        raise RankCollapseTypeError(f"config must be a SimulationConfig, got {type_name(config)}")
    cfg = config
    cfg.validate()
    if keep_trajectory:
        from rankcollapse.edge.validate import check_memory

        size = (cfg.layers + 1.0) * cfg.samples * cfg.tokens * cfg.d * parse_dtype(cfg.dtype).itemsize
        check_memory(f"keep_trajectory with layers = {cfg.layers}", size)
    spec = cfg.layer_spec()
    dtype = parse_dtype(cfg.dtype)
    device = torch.device(cfg.device)
    mask = resolve_mask(cfg.mask_matrix if cfg.mask_matrix is not None else cfg.parsed_mask, cfg.tokens)
    bias = None if cfg.alibi_slope is None else decay_bias(cfg.tokens, cfg.alibi_slope).to(device, dtype)
    plan: KernelPlan = plan_kernel(mask.dense.to(device), kernel=cfg.kernel, band=mask.band,
                                   complete=mask.complete, block=cfg.band_block, bias=bias)
    if cfg.rope_base is not None:
        plan = replace(plan, rotary=rotary_positions(cfg, dtype, device))
    track = spec.is_pure_attention if cfg.track_min_weight is None else cfg.track_min_weight
    names = METRIC_NAMES if cfg.metrics is None else tuple(
        dict.fromkeys(("mu", "mu_rel", *(m for m in cfg.metrics if m in METRIC_NAMES))))
    rolled = cfg.rollout_names
    ranked = cfg.rank_names
    stepped = any(k.startswith("norm_") for k in ranked)
    moved = cfg.speed_names
    docs = mask.documents()
    docs = docs if len(docs) > 1 else []  # one part: the whole sequence, no per-document columns
    in_seed, w_seed = _seeds(cfg.seed)
    x = _initial_tokens(cfg, torch.Generator().manual_seed(in_seed), dtype)
    weights = _WeightStream(cfg, spec, w_seed, dtype)

    rows: list[dict[str, float]] = []
    mus: list[Tensor] = []
    mu_rels: list[Tensor] = []
    mins: list[Tensor] = []
    traj: list[Tensor] = []
    rollouts: dict[str, list[Tensor]] = {k: [] for k in rolled}
    profiles: list[Tensor] = []
    ranks: dict[str, list[Tensor]] = {k: [] for k in ranked}
    speeds: dict[str, list[Tensor]] = {k: [] for k in moved}
    context = identity_context((cfg.samples,), cfg.tokens, dtype, device) if cfg.rollout else None
    stopped = ""
    nonfinite: int | None = None

    def measure(
        t: int, x: Tensor, min_w: Tensor | None, step: tuple[Tensor, Tensor] | None = None,
        before: Tensor | None = None,
    ) -> bool:
        """Measure X(t) (and the norm step of the layer that made it, and its move from ``before`` =
        X(t-1)), emit its row; True when some sample is no longer finite."""
        per = _measure(x, names, cfg.metric_threads)
        if ranked:
            per.update(rank_columns(x, ranked, step))
        if moved:
            per.update(speed_columns(before, x, moved))
        if context is not None:
            cols = rollout_columns(context)
            per.update({k: cols[k] for k in rolled})
            kept = context if cfg.influence == "all" else influence_profile(context, -1)
            if cfg.influence is not None:
                profiles.append(kept.detach().to("cpu", torch.float64).nanmean(dim=0))
        bad = ~torch.isfinite(x).flatten(1).all(dim=1)
        if bool(bad.any()):  # a non-finite sample has no metric (NaN), only ``overflow``
            per = {k: torch.where(bad.to(v.device), torch.full_like(v, math.nan), v) for k, v in per.items()}
        mus.append(per["mu"].detach().to("cpu", torch.float64))
        mu_rels.append(per["mu_rel"].detach().to("cpu", torch.float64))
        for k in rolled:
            rollouts[k].append(per[k].detach().to("cpu", torch.float64))
        for k in ranked:
            ranks[k].append(per[k].detach().to("cpu", torch.float64))
        for k in moved:
            speeds[k].append(per[k].detach().to("cpu", torch.float64))
        row: dict[str, float] = {"layer": t, **summarize(per)}
        if docs:  # per document: mu_rel of each independent part, and the largest over parts
            parts = document_columns(torch.where(bad[:, None, None], torch.nan, x), docs)
            row.update({k: float(v.to(torch.float64).nanmean()) for k, v in parts.items()})
        if track:
            row["attn_min"] = math.nan if min_w is None else float(min_w.min())
        row["overflow"] = float(bad.to(torch.float64).mean())
        rows.append(row)
        if keep_trajectory:
            traj.append(x.detach().to("cpu").clone())
        if on_layer is not None:
            on_layer(row)
        return bool(bad.any())

    # everything below was validated with the config: the layer loop runs the parts unchecked
    with torch.no_grad(), trusted():
        measure(0, x, None)
        for t in range(cfg.layers):
            w = weights.layer(t)
            layer = spec.at(t, cfg.layers)  # Mix-LN's placement at this depth; every other spec itself
            if context is not None:  # P(t+1) = M(t+1) P(t) from the attention this layer applies to X(t)
                attn = head_mean(layer_attention(x, w, layer, plan.mask, cfg.d_qk, plan.bias, plan.rotary))
                context = rollout_step(context, attn, cfg.rollout_residual)
            step = norm_step(x, w, layer, plan, cfg.d_qk) if stepped else None
            before = x
            x, min_w = apply_layer(x, w, layer, plan, cfg.d_qk, need_min=track)
            if min_w is not None:
                mins.append(min_w.detach().to("cpu", torch.float64))
            if measure(t + 1, x, min_w, step, before):
                nonfinite = t + 1
                stopped = f"tokens not finite at layer {t + 1} (the network overflows in {cfg.dtype})"
                break
            trim_heap_every(t + 1)
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
        eps_edge = float(min_weight[torch.isfinite(min_weight)].min()) if bool(
            torch.isfinite(min_weight).any()) else math.nan
        if math.isfinite(eps_edge):
            theory = check_theorem1(mu_t, eps_edge, radius, mu_rel=torch.stack(mu_rels),
                                    floor_rel=floor_rel(cfg.dtype))
        else:  # every attention weight overflowed (e.g. a huge --qk-scale): nothing to check the bound on
            theory = TheoryCheck(False, f"no finite attention weight ({cfg.dtype} overflow); Theorem 1 "
                                 "not checked")
    elif not spec.is_pure_attention:
        theory = TheoryCheck(False, f"preset is not pure attention ({spec}); Theorem 1 does not apply")
    return SimulationResult(
        config=cfg, rows=rows, mu=mu_t, mu_rel=torch.stack(mu_rels), min_weight=min_weight,
        final=x.detach(), kernel=plan.name, radius=radius, theory=theory,
        trajectory=torch.stack(traj) if keep_trajectory else None, stopped=stopped,
        nonfinite_layer=nonfinite, rollout={k: torch.stack(v) for k, v in rollouts.items()},
        influence=torch.stack(profiles) if profiles else None,
        ranks={k: torch.stack(v) for k, v in ranks.items()},
        speeds={k: torch.stack(v) for k, v in speeds.items()},
    )


