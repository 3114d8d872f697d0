"""Per-layer measures of a simulator run for the phase diagrams of the follow-ups (ours).

Rank against entropy collapse (Giorlandino & Goldt, arXiv 2505.24333), ``Y = LN(lam X + SA(X))`` (Joseph
et al., arXiv 2410.10609) and residual MLP stacks (Everett, arXiv 2607.14018) read three measures of the same
run, per sample ``b`` and hidden state ``X(t)``, t = 0..L:

- ``mu_rel`` (``metrics.mu_rel``): the token spread relative to the norm (rank collapse: -> 0);
- ``effective_rank`` (``metrics.effective_rank``): ``exp(H(p))`` of the normalised singular values of X(t);
- ``attention_entropy`` (``metrics.normalized_attention_entropy``, the mean over heads): the entropy of the
  attention that made X(t) from X(t-1), each row over its maximum ``log |N_i|`` (entropy collapse: -> 0);
  NaN at t = 0 and for a layer without attention.

:func:`measure_layers` runs ``dynamics.simulate`` itself (``keep_trajectory``) and forms each layer's
attention from the same draws (``simulate.layer_weights``): the trajectory is the simulator's, not a copy
of its loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.dynamics.config import SimulationConfig
from rankcollapse.dynamics.layers import layer_attention
from rankcollapse.dynamics.simulate import layer_weights, simulate
from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.edge.validate import type_name
from rankcollapse.masks import resolve_mask
from rankcollapse.metrics import effective_rank, mu_rel, normalized_attention_entropy

#: The measures of :class:`LayerMeasures`, in their column order.
PHASE_NAMES: tuple[str, ...] = ("mu_rel", "effective_rank", "attention_entropy")


@dataclass(frozen=True)
class LayerMeasures:
    """Per hidden state and sample, float64 on the CPU: ``values[name]`` [L+1, b] for each name of
    :data:`PHASE_NAMES`; ``layers_run`` (fewer than ``config.layers`` where the run stopped: ``stopped``)."""

    values: dict[str, Tensor]
    layers_run: int
    stopped: str


def measure_layers(config: SimulationConfig) -> LayerMeasures:
    """The measures of the module docstring for one run of ``config`` (its ``metrics`` narrowed to mu and
    mu_rel: the others are measured here). RankCollapseTypeError for another config type."""
    if not isinstance(config, SimulationConfig):
        raise RankCollapseTypeError(f"config must be a SimulationConfig, got {type_name(config)}")
    if config.alibi_slope is not None or config.rope_base is not None:
        raise RankCollapseError("measure_layers forms the attention without position terms: alibi_slope and "
                                "rope_base are not allowed here (allowed: None)")
    result = simulate(config, keep_trajectory=True)
    assert result.trajectory is not None
    x = result.trajectory  # [T+1, b, n, d] in the run's dtype
    spec = config.layer_spec()
    rel = mu_rel(x).to(torch.float64)
    erank = effective_rank(x.to(torch.float64))
    entropy = torch.full_like(rel, float("nan"))
    if spec.attention:
        mask = resolve_mask(config.mask_matrix if config.mask_matrix is not None else config.parsed_mask,
                            config.tokens).matrix
        weights = layer_weights(config)
        with torch.no_grad():
            for t in range(1, x.shape[0]):
                layer = spec.at(t - 1, config.layers)
                a = layer_attention(x[t - 1], weights(t - 1), layer, mask, config.d_qk)
                entropy[t] = normalized_attention_entropy(a, mask).to(torch.float64).mean(dim=1)
    values = {"mu_rel": rel, "effective_rank": erank, "attention_entropy": entropy}
    return LayerMeasures({k: v.cpu() for k, v in values.items()}, x.shape[0] - 1, result.stopped)
