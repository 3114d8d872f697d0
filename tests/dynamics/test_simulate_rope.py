"""The simulator's RoPE arm: queries and keys rotated by position before the one masked softmax.

Checked against a plain per-entry loop (2 x 2 rotations, sums and exponentials one entry at a time), the
relative-position property, the closed form of the score decay, and the refusals.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from rankcollapse.cli.main import main
from rankcollapse.core.names import QUANTITIES
from rankcollapse.dynamics.layers import layer_logits
from rankcollapse.dynamics.simulate import SimulationConfig, _seeds, _WeightStream, score_decay, simulate
from rankcollapse.edge.errors import RankCollapseError


def _rot(v: list[float], p: int, base: float, scale: float) -> list[float]:
    """Pair k = (v_k, v_{k + e/2}) turned by ``p scale base^(-2k/e)``, one pair at a time."""
    e = len(v)
    out = list(v)
    for k in range(e // 2):
        a = p * scale * base ** (-2.0 * k / e)
        out[k] = math.cos(a) * v[k] - math.sin(a) * v[k + e // 2]
        out[k + e // 2] = math.sin(a) * v[k] + math.cos(a) * v[k + e // 2]
    return out


def _plain_layer(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor, causal: bool,
                 d_qk: float, base: float, scale: float) -> torch.Tensor:
    """One SAN layer ``X <- A X W_V`` of one sample, every entry by hand (float64 Python floats)."""
    n, d = x.shape
    e = wq.shape[1]
    rows = x.tolist()
    q = [_rot([sum(rows[i][c] * float(wq[c, f]) for c in range(d)) for f in range(e)], i, base, scale)
         for i in range(n)]
    k = [_rot([sum(rows[j][c] * float(wk[c, f]) for c in range(d)) for f in range(e)], j, base, scale)
         for j in range(n)]
    v = [[sum(rows[j][c] * float(wv[c, f]) for c in range(d)) for f in range(d)] for j in range(n)]
    out = []
    for i in range(n):
        keys = range(i + 1) if causal else range(n)
        s = {j: sum(q[i][f] * k[j][f] for f in range(e)) / math.sqrt(d_qk) for j in keys}
        top = max(s.values())
        z = sum(math.exp(s[j] - top) for j in keys)
        out.append([sum(math.exp(s[j] - top) / z * v[j][f] for j in keys) for f in range(d)])
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize(("mask", "kernel"), [("causal", "auto"), ("causal", "dense"), ("complete", "auto")])
def test_a_rope_run_matches_a_plain_per_entry_loop(mask: str, kernel: str) -> None:
    cfg = SimulationConfig(mask=mask, tokens=7, d=6, layers=3, samples=2, mode="attn", rope_base=50.0,
                           rope_scale=0.7, d_qk=6.0, seed=4, kernel=kernel, metrics=("mu", "mu_rel"))
    r = simulate(cfg, keep_trajectory=True)
    assert r.trajectory is not None
    stream = _WeightStream(cfg, cfg.layer_spec(), _seeds(cfg.seed)[1], torch.float64)
    x = r.trajectory[0]
    for t in range(3):
        w = stream.layer(t)
        x = torch.stack([_plain_layer(x[b], w.w_q[0], w.w_k[0], w.w_v[0], mask == "causal", 6.0, 50.0, 0.7)
                         for b in range(2)])
        torch.testing.assert_close(r.trajectory[t + 1], x, rtol=0, atol=1e-12)


def test_the_rollout_uses_the_rotated_attention_the_layers_run() -> None:
    """Values ``W_V = I`` and one layer: X(1) = A X(0), so the rollout's P(1) is that A (its last row)."""
    cfg = SimulationConfig(mask="causal", tokens=6, d=8, layers=1, samples=1, value="identity",
                           rope_base=10.0, influence="last", metrics=("mu", "mu_rel"))
    r = simulate(cfg, keep_trajectory=True)
    assert r.trajectory is not None and r.influence is not None
    x0, x1 = r.trajectory[0][0], r.trajectory[1][0]
    got = torch.linalg.lstsq(x0.T, x1[-1:].T).solution.flatten()  # x1[-1] = P(1)[-1] @ x0
    torch.testing.assert_close(r.influence[1], got, rtol=0, atol=1e-10)


def test_scores_depend_on_i_minus_j_only_when_the_content_is_the_same_at_every_position() -> None:
    for inputs, toeplitz in (("repeated", True), ("gaussian", False)):
        cfg = SimulationConfig(mask="causal", tokens=9, d=8, layers=1, samples=3, inputs=inputs,
                               rope_base=100.0, d_qk=8.0)
        stream = _WeightStream(cfg, cfg.layer_spec(), _seeds(cfg.seed)[1], torch.float64)
        r = simulate(cfg, keep_trajectory=True)
        assert r.trajectory is not None
        from rankcollapse.dynamics.simulate import rotary_positions

        s = layer_logits(r.trajectory[0], stream.layer(0), cfg.layer_spec(), 8.0,
                         rotary_positions(cfg, torch.float64, torch.device("cpu")))
        same = all(torch.allclose(s.diagonal(-d, -2, -1), s.diagonal(-d, -2, -1)[..., :1].expand_as(
            s.diagonal(-d, -2, -1)), rtol=0, atol=1e-12) for d in range(-8, 9))
        assert same is toeplitz


def test_the_score_decay_is_the_closed_form_with_tied_queries_and_zero_without_rope() -> None:
    """q = k, content repeated: ``D(Δ) = Σ_k |q_k|² (1 - cos(Δ θ_k)) / sqrt(d_qk)``; no RoPE: D = 0."""
    cfg = SimulationConfig(mask="causal", tokens=12, d=8, layers=1, samples=2, inputs="repeated",
                           tied_qk=True, rope_base=100.0, rope_scale=0.2, d_qk=8.0, seed=3)
    got = score_decay(cfg)
    assert got.shape == (2, 1, 12)
    x = simulate(cfg, keep_trajectory=True).trajectory[0][:, 0]  # [b, d]
    w = _WeightStream(cfg, cfg.layer_spec(), _seeds(cfg.seed)[1], torch.float64).layer(0)
    q = x @ w.w_q[0]  # [b, e]
    pair = q[:, :4] ** 2 + q[:, 4:] ** 2
    theta = 0.2 * 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    delta = torch.arange(12, dtype=torch.float64)
    want = (pair[:, None, :] * (1 - torch.cos(delta[:, None] * theta))).sum(-1) / math.sqrt(8.0)
    torch.testing.assert_close(got[:, 0], want, rtol=0, atol=1e-12)
    plain = SimulationConfig(mask="causal", tokens=12, d=8, layers=1, samples=2, inputs="repeated",
                             tied_qk=True)
    assert torch.equal(score_decay(plain), torch.zeros(2, 1, 12, dtype=torch.float64))


def test_rope_off_leaves_the_run_as_it_was() -> None:
    """The fields at their defaults draw and run exactly the network of a config without them."""
    base = dict(mask="causal", tokens=8, d=4, layers=4, samples=2, metrics=("mu", "mu_rel"))
    a = simulate(SimulationConfig(**base), keep_trajectory=True)
    b = simulate(SimulationConfig(**base, rope_base=None, rope_scale=1.0, tied_qk=False),
                 keep_trajectory=True)
    assert torch.equal(a.trajectory, b.trajectory)
    on = simulate(SimulationConfig(**base, rope_base=100.0), keep_trajectory=True)
    assert torch.equal(on.trajectory[0], a.trajectory[0])
    assert not torch.allclose(on.trajectory[1], a.trajectory[1])


@pytest.mark.parametrize(("extra", "words"), [
    ({"rope_base": 100.0, "d": 5}, "width e = 5 is odd"),
    ({"rope_base": 100.0, "d": 6, "qk_dim": 3}, "width e = 3 is odd"),
    ({"rope_base": 1.0}, "rope_base"),
    ({"rope_base": math.nan}, "rope_base"),
    ({"rope_scale": 0.5}, "applies with rope_base only"),
    ({"rope_base": 100.0, "rope_scale": 0.0}, "rope_scale"),
    ({"tied_qk": 1}, "tied_qk"),
])
def test_rope_settings_that_do_not_apply_are_one_line(extra: dict, words: str) -> None:
    with pytest.raises(RankCollapseError, match=words):
        SimulationConfig(**{"mask": "causal", "tokens": 8, "d": 4, **extra})


ARGS = ["simulate", "--mask", "causal", "--tokens", "8", "--d", "4", "--layers", "3", "--samples", "2",
        "--no-progress"]


def test_the_flag_runs_the_api_s_rope(tmp_path: Path, capsys) -> None:
    flags = ["--rope-base", "100", "--rope-scale", "0.5", "--tied-qk"]
    assert main([*ARGS, *flags, "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    got = pd.read_csv(tmp_path / "r" / "metrics.csv")
    api = simulate(SimulationConfig(mask="causal", tokens=8, d=4, layers=3, samples=2, rope_base=100.0,
                                    rope_scale=0.5, tied_qk=True))
    assert got["mu_rel"].tolist() == pytest.approx([r["mu_rel"] for r in api.rows], rel=1e-12)
    assert QUANTITIES["rope_base"].flag == "--rope-base" and QUANTITIES["rope_scale"].flag == "--rope-scale"
    assert main([*ARGS, "--rope-base", "100", "--d", "5", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "odd" in err
