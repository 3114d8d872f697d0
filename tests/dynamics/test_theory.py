"""The paper's claims, checked with fixed seeds (float64, n = 32, d = 16, fresh Gaussian W_V, sigma = 1).

Relative mu is the measure: raw mu also follows the norm of the value-matrix product.
"""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
import torch

from rankcollapse.dynamics import SimulationConfig, check_theorem1, simulate
from rankcollapse.dynamics.theory import log_rate, radius_of_dense

N, D = 32, 16


def run(mask: str, layers: int, **kw) -> float:  # type: ignore[no-untyped-def]
    """Largest (over 4 samples) relative mu after ``layers`` layers (early stop at 1e-10)."""
    base = {"mask": mask, "n": N, "d": D, "layers": layers, "batch": 4, "seed": 0, "metrics": ("mu_rel",),
            "track_min_weight": False}
    base.update(kw)
    r = simulate(SimulationConfig(**base))
    return r.rows[-1]["mu_rel_max"]


@pytest.mark.parametrize("mask", ["complete", "causal"])
def test_pure_attention_collapses_within_128_layers(mask: str) -> None:
    assert run(mask, 128, stop_below=1e-10) < 1e-10


@pytest.mark.parametrize("mask", ["window:w=8", "causal-window:w=1"])
def test_local_masks_collapse_within_1024_layers(mask: str) -> None:
    assert run(mask, 1024, stop_below=1e-10) < 1e-10


def test_mask_without_center_node_keeps_rank() -> None:
    r = simulate(SimulationConfig(mask="block:size=8", n=N, d=D, layers=1024, batch=4, seed=0,
                                  metrics=("mu_rel",), track_min_weight=False))
    assert min(row["mu_rel_min"] for row in r.rows) > 1e-3


def layers_to(w: int, seed: int, target: float = 1e-3, cap: int = 4096) -> int:
    r = simulate(SimulationConfig(mask=f"window:w={w}", n=N, d=D, layers=cap, batch=1, seed=seed,
                                  metrics=("mu_rel",), stop_below=target, track_min_weight=False))
    return len(r.rows) - 1


def test_narrower_window_collapses_more_slowly() -> None:
    """Median (5 seeds) of the layers needed to reach mu_rel = 1e-3 falls as w = 2, 4, 8, 16."""
    medians = [statistics.median(layers_to(w, s) for s in range(5)) for w in (2, 4, 8, 16)]
    assert medians[0] < 4096
    assert all(a > b for a, b in itertools.pairwise(medians)), medians


@pytest.mark.parametrize("mask", ["complete", "causal"])
def test_sphere_layernorm_orthogonal_values_hemisphere_inputs_collapse(mask: str) -> None:
    final = run(mask, 1024, preset="attn+ln", value="orthogonal", inputs="hemisphere", stop_below=1e-10)
    assert final < 1e-10


def test_theorem1_check_reports_epsilon_radius_and_bound() -> None:
    r = simulate(SimulationConfig(mask="causal", n=N, d=D, layers=64, batch=2, seed=0, metrics=("mu_rel",)))
    th = r.theory
    assert th is not None and th.applicable and th.radius == 1
    assert th.epsilon is not None and 0 < th.epsilon <= 1 / N
    assert r.min_weight is not None and th.epsilon == float(r.min_weight.min())
    assert th.c == pytest.approx([float(v) for v in r.mu[0]])
    assert th.holds is not None and th.max_ratio is not None and th.max_ratio >= 1.0  # layer 0: mu = C


def test_theorem1_check_detects_violation_and_no_center() -> None:
    mu = torch.tensor([[1.0], [0.5], [0.9]], dtype=torch.float64)
    th = check_theorem1(mu, 0.5, 1)  # rate sqrt(0.5) = 0.707 per layer: 0.9 > 0.5 at t = 2
    assert th.applicable and not th.holds and th.first_violation == 2
    assert th.rate == pytest.approx(math.sqrt(0.5))
    assert torch.allclose(th.bound(torch.arange(3)), torch.tensor([1.0, 0.5**0.5, 0.5], dtype=torch.float64))
    assert not check_theorem1(mu, 0.5, None).applicable
    assert log_rate(1e-20, 40) == 0.0  # eps^r underflows: the bound says nothing


def test_bfs_radius_matches_closed_forms() -> None:
    n = 17
    idx = torch.arange(n)
    diff = idx.view(1, n) - idx.view(n, 1)
    assert radius_of_dense(diff.abs() <= 2) == math.ceil(math.ceil((n - 1) / 2) / 2)
    assert radius_of_dense((diff <= 0) & (diff >= -3)) == math.ceil((n - 1) / 3)
    assert radius_of_dense(torch.block_diag(*[torch.ones(4, 4)] * 4).bool()) is None
