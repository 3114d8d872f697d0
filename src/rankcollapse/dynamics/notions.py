"""Two notions of collapse measured on one simulator run: the one-step affine rank and the limit of mu.

Index letters: b batch, n tokens, d features, t layers. Cirrincione (arXiv 2604.23681, known from its
abstract) reads rank collapse as the *affine rank* of the token set, one normalisation step at a time
(``metrics.affine``: ``aff(X) = rank(X - 1 gamma_X)`` at the precision floor); the NeurIPS 2024 paper reads
it as the *limit of mu* with depth (``mu_rel(X(t)) -> 0``). :func:`measure_notions` measures both on the
same run, plus the span of the tokens against the value products:

================== ======================================================================================
``affine_rank``    ``aff(X(t))`` per sample
``norm_in/out_*``  ``aff`` of what layer t's first normalisation received (``Z``) and returned (``Norm(Z)``)
                   (``dynamics.layers.norm_step``); ``norm_rank_margin`` how many decades the nearest
                   singular value of either sits from the floor (a rank is resolved only with a margin)
``span_residual``  ``||X(t) - X(t) Q Q^T||_F / ||X(t)||_F``, ``Q`` an orthonormal basis of the row space of
                   ``X(0) W_V(1) ... W_V(t)`` (``metrics.affine.span_residual``): 0 for an attention-only
                   stack, whose ``X(t) = P(t) X(0) W_V(1) ... W_V(t)`` (``P(t)`` the product of the attention
                   matrices) stays in that row space exactly; a residual or LayerNorm's centring leaves it
================== ======================================================================================

The value matrices are drawn here (``weights.value_matrix`` from a generator seeded by the run's seed) and
passed to the simulator as its ``value_matrix`` ``[T, 1, d, d]``, so that their products are known; the
queries and keys come from the simulator's own stream. Single head only (the products are per head).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.core.precision import floor_rel
from rankcollapse.dynamics.config import SimulationConfig
from rankcollapse.dynamics.simulate import SimulationResult, simulate
from rankcollapse.dynamics.weights import value_matrix
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.affine import span_residual

#: The rank columns every notion run measures (those of a layer's normalisation only where it has one).
NOTION_RANKS: tuple[str, ...] = ("affine_rank", "linear_rank")
NORM_RANKS: tuple[str, ...] = ("norm_in_affine_rank", "norm_out_affine_rank", "norm_rank_margin")
#: Offset of the value-matrix generator's seed from the run's seed (apart from the simulator's streams).
VALUE_SEED_OFFSET = 7919


@dataclass(frozen=True)
class Notions:
    """Both notions on one run: the simulator's result (``mu``, ``mu_rel`` [T+1, b], ``ranks``) and
    ``span_residual`` [T+1, b] against the value products; ``floor_rel`` the dtype's relative floor."""

    result: SimulationResult
    span_residual: Tensor
    floor_rel: float

    @property
    def has_norm(self) -> bool:
        return "norm_in_affine_rank" in self.result.ranks


def value_stack(d: int, layers: int, family: str, scale: float, seed: int) -> Tensor:
    """``W_V(1) .. W_V(T)`` as the simulator's ``value_matrix`` [T, 1, d, d] (float64), one generator
    seeded ``seed + VALUE_SEED_OFFSET``."""
    gen = torch.Generator().manual_seed(seed + VALUE_SEED_OFFSET)
    return torch.stack([value_matrix(family, d, scale, gen) for _ in range(layers)]).unsqueeze(1)


def value_products(x0: Tensor, stack: Tensor) -> Tensor:
    """``X(0) W_V(1) ... W_V(t)`` for ``t = 0..T``: x0 [b, n, d], stack [T, 1, d, d] -> [T+1, b, n, d]."""
    out = [x0]
    for t in range(stack.shape[0]):
        out.append(out[-1] @ stack[t, 0].to(x0.dtype))
    return torch.stack(out)


def measure_notions(config: SimulationConfig) -> Notions:
    """Run ``config`` (one head, no user value matrix, ``layers >= 1``) with explicit value matrices and
    measure both notions (module docstring) on every layer and sample."""
    if not isinstance(config, SimulationConfig):
        raise RankCollapseError(f"config must be a SimulationConfig, got {type(config).__name__}")
    if config.heads != 1 or config.value_matrix is not None or config.layers < 1:
        raise RankCollapseError(
            f"measure_notions needs heads = 1, no value_matrix and layers >= 1; got heads = {config.heads}, "
            f"value_matrix {'given' if config.value_matrix is not None else 'none'}, layers = {config.layers}"
        )
    spec = config.layer_spec()
    ranks = NOTION_RANKS + (NORM_RANKS if spec.norm != "none" else ())
    metrics = tuple(dict.fromkeys(("mu", "mu_rel", *(config.metrics or ()), *ranks)))
    stack = value_stack(config.d, config.layers, config.value, config.scale, config.seed)
    run = dataclasses.replace(config, value_matrix=stack, value_scale=None, metrics=metrics)
    result = simulate(run, keep_trajectory=True)
    traj = result.trajectory  # [T+1, b, n, d]
    assert traj is not None
    products = value_products(traj[0], stack)[: traj.shape[0]]
    residual = torch.stack([span_residual(traj[t], products[t]) for t in range(traj.shape[0])])
    return Notions(result, residual.to(torch.float64), floor_rel(config.dtype))
