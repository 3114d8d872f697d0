"""The equilibria LN map is the simulator's sphere normalisation (one function): post- and pre-LN agree
to 1e-15 with ``rankcollapse.dynamics.simulate`` (``norm="sphere"``, ``W_Q = W_K = 0``, a given W_V)."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.draws import haar_orthogonal, sphere_tokens
from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.equilibria.lnmap import causal_mask, iterate


@pytest.mark.parametrize("placement", ["post", "pre"])
@pytest.mark.parametrize("mask", ["causal", "complete"])
def test_equilibria_map_equals_the_simulator_sphere_preset(placement: str, mask: str) -> None:
    n, d, layers = 5, 4, 6
    g = torch.Generator().manual_seed(3)
    w_v = haar_orthogonal(d, g) * 1.3 + 0.2 * torch.eye(d, dtype=torch.float64)
    x0 = sphere_tokens(2, n, d, g)
    res = simulate(SimulationConfig(mask=mask, tokens=n, d=d, layers=layers, samples=2, mode="attn",
                                    norm="sphere",
                                    placement=placement, qk_scale=0.0, value_matrix=w_v, input_tokens=x0,
                                    metrics=("mu_rel",), track_min_weight=False), keep_trajectory=True)
    assert res.trajectory is not None
    m = causal_mask(n) if mask == "causal" else None
    ours = iterate(x0, w_v, layers, m, torch.zeros(d, d, dtype=torch.float64), 1.0, keep_trajectory=True,
                   placement=placement)
    assert float((ours - res.trajectory).abs().max()) <= 1e-15
