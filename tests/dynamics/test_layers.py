"""Each preset computes exactly its documented formula."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.attention import attention_weights
from rankcollapse.dynamics.kernels import plan_kernel
from rankcollapse.dynamics.layers import PRESETS, apply_layer, get_preset, multihead_attention
from rankcollapse.dynamics.weights import draw_layer_weights
from rankcollapse.edge.errors import RankCollapseError

N, D = 12, 6


def setup(heads: int = 1, mlp: bool = False, output: str = "mean"):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(0)
    w = draw_layer_weights(d=D, heads=heads, qk_dim=D // heads, value="gaussian", value_scale=1.0,
                           qk_scale=1.0, output=output, mlp=mlp, generator=g)
    x = torch.randn(2, N, D, generator=g, dtype=torch.float64)
    mask = torch.ones(N, N, dtype=torch.bool).tril()
    return w, x, mask


def attn_ref(x, w, mask, h=0):  # type: ignore[no-untyped-def]
    a = attention_weights(x @ w.w_q[h], x @ w.w_k[h], mask, 1.5)
    return a @ x @ w.w_v[h]


def run(preset: str, x, w, mask):  # type: ignore[no-untyped-def]
    y, _ = apply_layer(x, w, get_preset(preset), plan_kernel(mask, kernel="dense"), 1.5)
    return y


def test_pure_attention_is_A_X_WV() -> None:
    w, x, m = setup()
    assert torch.allclose(run("attn", x, w, m), attn_ref(x, w, m))


def test_sphere_ln_preset_divides_each_token_by_its_norm() -> None:
    w, x, m = setup()
    z = attn_ref(x, w, m)
    assert torch.allclose(run("attn+sphere", x, w, m), z / z.norm(dim=-1, keepdim=True))


def test_layernorm_and_skip_presets() -> None:
    w, x, m = setup()
    z = attn_ref(x, w, m)
    ln = torch.nn.functional.layer_norm
    assert torch.allclose(run("attn+layernorm", x, w, m), ln(z, (D,)))
    assert torch.allclose(run("attn+skip", x, w, m), x + z)
    assert torch.allclose(run("attn+skip+layernorm", x, w, m), ln(x + z, (D,)))


def test_transformer_preset_is_post_ln_block_with_mlp() -> None:
    w, x, m = setup(mlp=True)
    ln = torch.nn.functional.layer_norm
    y = ln(x + attn_ref(x, w, m), (D,))
    assert w.w_1 is not None and w.w_2 is not None
    expected = ln(y + torch.nn.functional.gelu(y @ w.w_1) @ w.w_2, (D,))
    assert torch.allclose(run("transformer", x, w, m), expected)


def test_pre_ln_block() -> None:
    w, x, m = setup(mlp=True)
    ln = torch.nn.functional.layer_norm
    assert w.w_1 is not None and w.w_2 is not None
    y = x + attn_ref(ln(x, (D,)), w, m)
    expected = y + torch.nn.functional.gelu(ln(y, (D,)) @ w.w_1) @ w.w_2
    assert torch.allclose(run("transformer-pre", x, w, m), expected)


@pytest.mark.parametrize("output", ["mean", "gaussian"])
def test_multihead_is_sum_over_heads(output: str) -> None:
    w, x, m = setup(heads=3, output=output)
    y, _ = multihead_attention(x, w, plan_kernel(m, kernel="dense"), 1.5)
    parts = [attn_ref(x, w, m, h) for h in range(3)]
    expected = sum(parts) / 3 if w.w_o is None else sum(p @ w.w_o[h] for h, p in enumerate(parts))
    assert torch.allclose(y, expected)


def test_presets_documented_and_unknown_rejected() -> None:
    required = {"attn", "attn+sphere", "attn+layernorm", "attn+skip", "attn+skip+layernorm", "transformer"}
    assert required <= set(PRESETS)
    assert all(formula for _, formula in PRESETS.values())
    with pytest.raises(RankCollapseError, match="unknown mode"):
        get_preset("gpt")
