"""Each preset computes exactly its documented formula."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.attention import attention_weights
from rankcollapse.dynamics.kernels import plan_kernel
from rankcollapse.dynamics.layers import (
    NGPT_STEP,
    PRESETS,
    LayerSpec,
    apply_layer,
    get_preset,
    multihead_attention,
)
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


# ---- Peri-LN, Mix-LN, nGPT: a plain loop written from each paper's formula is the reference ----------------

def _plain_block(x, w, mask, placement, norm, step=0.05):  # type: ignore[no-untyped-def]
    """One block (attention then MLP, skip 1) written out by hand from the module docstring."""
    def mlp_ref(y):  # type: ignore[no-untyped-def]
        return torch.nn.functional.gelu(y @ w.w_1) @ w.w_2

    for f in (lambda y: attn_ref(y, w, mask), mlp_ref):
        if placement == "peri":
            x = x + norm(f(norm(x)))
        elif placement == "ngpt":
            x = norm(x + step * (norm(f(x)) - x))
        elif placement == "post":
            x = norm(x + f(x))
        else:
            x = x + f(norm(x))
    return x


def _ln(y):  # type: ignore[no-untyped-def]
    return torch.nn.functional.layer_norm(y, (D,))


def _sphere(y):  # type: ignore[no-untyped-def]
    return y / y.norm(dim=-1, keepdim=True)


def test_peri_ln_block_equals_a_plain_loop_to_1e_12() -> None:
    w, x, m = setup(mlp=True)
    expected = _plain_block(x, w, m, "peri", _ln)
    assert torch.allclose(run("transformer-peri", x, w, m), expected, atol=1e-12, rtol=0)


def test_ngpt_block_equals_a_plain_loop_to_1e_12() -> None:
    w, x, m = setup(mlp=True)
    expected = _plain_block(x, w, m, "ngpt", _sphere, step=NGPT_STEP)
    assert torch.allclose(run("transformer-ngpt", x, w, m), expected, atol=1e-12, rtol=0)
    spec = LayerSpec("sphere", "ngpt", 1.0, True, ngpt_step=0.3)
    y, _ = apply_layer(x, w, spec, plan_kernel(m, kernel="dense"), 1.5)
    assert torch.allclose(y, _plain_block(x, w, m, "ngpt", _sphere, step=0.3), atol=1e-12, rtol=0)


def test_mix_ln_stack_is_post_ln_for_the_first_quarter_then_pre_ln() -> None:
    """A plain loop of 8 layers: post-LN at t = 0, 1 (round(0.25 * 8) = 2), pre-LN after; a stack that swapped
    the order (pre first) or the share would differ."""
    g = torch.Generator().manual_seed(1)
    layers = 8
    ws = [draw_layer_weights(d=D, heads=1, qk_dim=D, value="gaussian", value_scale=1.0, qk_scale=1.0,
                             output="mean", mlp=True, generator=g) for _ in range(layers)]
    x0 = torch.randn(2, N, D, generator=g, dtype=torch.float64)
    m = torch.ones(N, N, dtype=torch.bool).tril()
    plan = plan_kernel(m, kernel="dense")
    spec = get_preset("transformer-mix")
    assert spec.post_layers(layers) == 2 and spec.post_layers(12) == 3 and spec.post_layers(24) == 6
    x, ref = x0, x0
    for t, w in enumerate(ws):
        x, _ = apply_layer(x, w, spec.at(t, layers), plan, 1.5)
        ref = _plain_block(ref, w, m, "post" if t < 2 else "pre", _ln)
    assert torch.allclose(x, ref, atol=1e-12, rtol=0)
    with pytest.raises(RankCollapseError, match="changes with depth"):
        apply_layer(x0, ws[0], spec, plan, 1.5)


def test_peri_ln_moves_every_token_by_exactly_the_skip_weight() -> None:
    """Peri-LN's output norm fixes each update's size: with the sphere norm ||x_i(t+1) - x_i(t)|| = lam for
    every token (post- or pre-norm orders give other sizes)."""
    w, x, m = setup()
    plan = plan_kernel(m, kernel="dense")
    for lam in (0.5, 1.0, 2.0):
        y, _ = apply_layer(x, w, LayerSpec("sphere", "peri", lam), plan, 1.5)
        step = (y - x).norm(dim=-1)
        assert torch.allclose(step, torch.full_like(step, lam), atol=1e-12, rtol=0)
        for other in ("post", "pre"):
            z, _ = apply_layer(x, w, LayerSpec("sphere", other, lam), plan, 1.5)
            assert not torch.allclose((z - x).norm(dim=-1), torch.full_like(step, lam), atol=1e-6)


def test_ngpt_keeps_tokens_on_the_sphere_and_steps_along_the_arc() -> None:
    """nGPT's output is on the unit sphere, between x_i and Norm(f(x))_i: the new token is
    Norm((1 - alpha) x_i + alpha u_i), so it lies in their plane, on the short arc."""
    w, x, m = setup()
    x = x / x.norm(dim=-1, keepdim=True)
    spec = LayerSpec("sphere", "ngpt", 1.0, ngpt_step=0.2)
    y, _ = apply_layer(x, w, spec, plan_kernel(m, kernel="dense"), 1.5)
    assert torch.allclose(y.norm(dim=-1), torch.ones(2, N, dtype=torch.float64), atol=1e-12, rtol=0)
    u = attn_ref(x, w, m)
    u = u / u.norm(dim=-1, keepdim=True)
    cos_xy, cos_uy, cos_xu = ((x * y).sum(-1), (u * y).sum(-1), (x * u).sum(-1))
    assert bool((cos_xy >= cos_xu - 1e-12).all()) and bool((cos_uy >= cos_xu - 1e-12).all())


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"norm": "none", "placement": "peri", "skip": 1.0}, "places a norm"),
    ({"norm": "sphere", "placement": "ngpt", "skip": None}, "skip must be 1"),
    ({"norm": "sphere", "placement": "ngpt", "skip": 2.0}, "skip must be 1"),
    ({"norm": "sphere", "placement": "pre", "ngpt_step": 0.1}, "applies to placement 'ngpt'"),
    ({"norm": "layernorm", "placement": "post", "mix_post_share": 0.5}, "applies to placement 'mix'"),
    ({"norm": "layernorm", "placement": "mix", "mix_post_share": 1.5}, "mix_post_share"),
    ({"norm": "sphere", "placement": "ngpt", "skip": 1.0, "ngpt_step": 0.0}, "ngpt_step"),
    ({"norm": "sphere", "placement": "sandwich"}, "unknown placement"),
])
def test_new_placements_refuse_what_does_not_apply_in_one_line(kwargs: dict, words: str) -> None:
    with pytest.raises(RankCollapseError, match=words) as err:
        LayerSpec(**kwargs)
    assert "\n" not in str(err.value)


def test_existing_presets_keep_their_assemblies() -> None:
    """The presets that were there before Peri-LN, Mix-LN and nGPT keep their parts, with none of the new
    fields set (so ``apply_layer`` runs the same operations for them)."""
    old = {
        "attn": LayerSpec(), "attn+sphere": LayerSpec("sphere"), "attn+layernorm": LayerSpec("layernorm"),
        "attn+rmsnorm": LayerSpec("rmsnorm"), "attn+skip": LayerSpec(skip=1.0),
        "attn+skip+sphere": LayerSpec("sphere", skip=1.0),
        "attn+skip+layernorm": LayerSpec("layernorm", skip=1.0),
        "transformer": LayerSpec("layernorm", "post", 1.0, True),
        "transformer-pre": LayerSpec("layernorm", "pre", 1.0, True),
    }
    for name, spec in old.items():
        assert PRESETS[name][0] == spec
        assert spec.at(3, 8) is spec
