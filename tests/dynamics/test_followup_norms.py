"""DyT (arXiv 2503.10622) and LayerNorm Scaling (arXiv 2502.05795) in the simulator: each preset computes
its documented formula, written out by hand as the reference; options that do not apply are refused in one
line."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.attention import attention_weights
from rankcollapse.core.norms import DYT_ALPHA, dyt, get_norm
from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.dynamics.kernels import plan_kernel
from rankcollapse.dynamics.layers import PRESETS, LayerSpec, apply_layer, get_preset
from rankcollapse.dynamics.weights import draw_layer_weights
from rankcollapse.edge.errors import RankCollapseError

N, D = 10, 6


def _setup(mlp: bool = False, seed: int = 0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    w = draw_layer_weights(d=D, heads=1, qk_dim=D, value="gaussian", value_scale=1.0, qk_scale=1.0,
                           output="mean", mlp=mlp, generator=g)
    x = torch.randn(2, N, D, generator=g, dtype=torch.float64)
    return w, x, torch.ones(N, N, dtype=torch.bool).tril()


def _attn(x, w, mask):  # type: ignore[no-untyped-def]
    return attention_weights(x @ w.w_q[0], x @ w.w_k[0], mask, 1.0) @ x @ w.w_v[0]


def _mlp(y, w):  # type: ignore[no-untyped-def]
    return torch.nn.functional.gelu(y @ w.w_1) @ w.w_2


def _run(spec: LayerSpec, x, w, mask):  # type: ignore[no-untyped-def]
    return apply_layer(x, w, spec, plan_kernel(mask, kernel="dense"), 1.0)[0]


def test_dyt_is_an_elementwise_tanh_with_its_affine() -> None:
    x = torch.linspace(-3, 3, 12, dtype=torch.float64).reshape(2, 6)
    assert torch.equal(get_norm("dyt")(x), torch.tanh(DYT_ALPHA * x))
    weight, bias = torch.arange(1.0, 7.0, dtype=torch.float64), torch.full((6,), 0.5, dtype=torch.float64)
    assert torch.allclose(dyt(x, 2.0, weight, bias), weight * torch.tanh(2.0 * x) + bias, atol=0, rtol=0)
    # no statistic of the token: scaling one token leaves the others' outputs unchanged, entry by entry
    y = x.clone()
    y[0] *= 7.0
    assert torch.equal(dyt(y)[1], dyt(x)[1]) and not torch.allclose(dyt(y)[0], dyt(x)[0])
    with pytest.raises(RankCollapseError, match="finite"):
        dyt(x, math.inf)


def test_dyt_presets_are_their_formulas() -> None:
    w, x, m = _setup(mlp=True)
    z = _attn(x, w, m)
    assert torch.allclose(_run(get_preset("attn+dyt"), x, w, m), torch.tanh(0.5 * z), atol=1e-14, rtol=0)
    assert torch.allclose(_run(get_preset("attn+skip+dyt"), x, w, m), torch.tanh(0.5 * (x + z)), atol=1e-14,
                          rtol=0)
    y = torch.tanh(0.5 * (x + z))
    post = torch.tanh(0.5 * (y + _mlp(y, w)))
    assert torch.allclose(_run(get_preset("transformer-dyt"), x, w, m), post, atol=1e-14, rtol=0)
    y = x + _attn(torch.tanh(0.5 * x), w, m)
    pre = y + _mlp(torch.tanh(0.5 * y), w)
    assert torch.allclose(_run(get_preset("transformer-pre-dyt"), x, w, m), pre, atol=1e-14, rtol=0)
    spec = LayerSpec("dyt", dyt_alpha=3.0)
    assert torch.allclose(_run(spec, x, w, m), torch.tanh(3.0 * z), atol=1e-14, rtol=0)


def test_layernorm_scaling_divides_every_norm_output_of_layer_l_by_sqrt_l() -> None:
    """A plain loop of 5 pre-LN layers with LN(x) / sqrt(l) (l = 1..5) is the reference; the same stack
    without the scaling (transformer-pre) differs from layer 2 on and equals it at layer 1."""
    g = torch.Generator().manual_seed(3)
    ws = [draw_layer_weights(d=D, heads=1, qk_dim=D, value="gaussian", value_scale=1.0, qk_scale=1.0,
                             output="mean", mlp=True, generator=g) for _ in range(5)]
    x0 = torch.randn(2, N, D, generator=g, dtype=torch.float64)
    m = torch.ones(N, N, dtype=torch.bool).tril()
    spec, pre = get_preset("transformer-pre-lns"), get_preset("transformer-pre")
    ln = torch.nn.functional.layer_norm
    x, ref, plain = x0, x0, x0
    for t, w in enumerate(ws):
        layer = spec.at(t, 5)
        assert layer.placement == "pre" and layer.norm_scale == pytest.approx(1 / math.sqrt(t + 1))
        x = _run(layer, x, w, m)
        s = 1.0 / math.sqrt(t + 1)
        y = ref + _attn(s * ln(ref, (D,)), w, m)
        ref = y + _mlp(s * ln(y, (D,)), w)
        plain = _run(pre, plain, w, m)
        assert torch.allclose(x, ref, atol=1e-12, rtol=0)
        assert torch.allclose(x, plain, atol=1e-12, rtol=0) == (t == 0)
    with pytest.raises(RankCollapseError, match="changes with depth"):
        _run(spec, x0, ws[0], m)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"norm": "layernorm", "dyt_alpha": 1.0}, "applies to norm 'dyt'"),
    ({"norm": "dyt", "dyt_alpha": 0.0}, "dyt_alpha"),
    ({"norm": "none", "placement": "pre+lns", "skip": 1.0}, "scales a norm"),
    ({"norm": "layernorm", "placement": "post", "norm_scale": 0.5}, "norm_scale"),
])
def test_the_new_fields_refuse_what_does_not_apply_in_one_line(kwargs: dict, words: str) -> None:
    with pytest.raises(RankCollapseError, match=words) as err:
        LayerSpec(**kwargs)
    assert "\n" not in str(err.value)


def test_the_simulator_runs_the_new_presets_and_dyt_alpha_reaches_the_layer() -> None:
    names = ("attn+dyt", "attn+skip+dyt", "transformer-dyt", "transformer-pre-dyt", "transformer-pre-lns")
    for name in names:
        assert name in PRESETS
        r = simulate(SimulationConfig(mode=name, tokens=8, d=8, layers=4, samples=2))
        assert all(math.isfinite(row["mu"]) for row in r.rows), name
    x0 = torch.randn(8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = simulate(SimulationConfig(mode="attn+dyt", tokens=8, d=8, layers=1, samples=1, input_tokens=x0,
                                  dyt_alpha=0.01), keep_trajectory=True)
    assert a.trajectory is not None and float(a.trajectory[-1].abs().max()) < 0.05  # tanh(0.01 z) ~ 0.01 z
    with pytest.raises(RankCollapseError, match="dyt_alpha"):
        SimulationConfig(mode="attn+layernorm", dyt_alpha=1.0)
    cfg = SimulationConfig(mode="transformer-pre", placement="pre+lns", tokens=8, d=8, layers=2)
    assert cfg.layer_spec().placement == "pre+lns"
