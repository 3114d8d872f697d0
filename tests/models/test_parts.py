"""Generic blocks from parts against Hugging Face (the oracle) and against the written formulas."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.norms import layer_norm, rms_norm
from rankcollapse.models import iter_hidden_states, run_block
from rankcollapse.models.checkpoints import TINY_CONFIGS
from rankcollapse.models.families import HF_CASTS_FAMILIES
from rankcollapse.models.images import random_pixels
from rankcollapse.models.parts import LayerParts, Positions, attention

ARCHS = tuple(TINY_CONFIGS)  # every family we dissect: bert, albert, gpt2, llama, t5, mpnet, roberta, ... vit
TOL = {"f32": 1e-5, "f64": 1e-10}


def _inputs(model, ids):
    """The batch a model reads: the token ids, or for a vision encoder (ViT) as many seeded images."""
    return ids if model.image is None else random_pixels(model.image, ids.shape[0], seed=1)


def _hf_hidden_states(model, inputs):
    with torch.inference_mode():
        return model.hf_model(**{model.input_name: inputs}, output_hidden_states=True).hidden_states


def _max_rel_err(model, ids, backend, hf_states):
    errs = []
    for t, _, x in iter_hidden_states(model, ids, backend=backend):
        ref = hf_states[t]
        if t == len(hf_states) - 1 and model.final_norm is not None:
            x = model.final_norm(x)  # HF's last element is after the final norm; our rows are before it
        errs.append(float((x - ref).abs().max() / ref.abs().max()))
    assert len(errs) == len(hf_states)
    return max(errs)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("backend", ["hf", "parts"])
def test_full_mode_matches_hf_hidden_states(tiny_models, ids, arch, dtype, backend):
    model = tiny_models(arch, dtype, hf_casts=True)
    inputs = _inputs(model, ids)
    assert _max_rel_err(model, inputs, backend, _hf_hidden_states(model, inputs)) <= TOL[dtype]


@pytest.mark.parametrize("arch", HF_CASTS_FAMILIES)
def test_exact_f64_parts_differ_from_hf_only_by_its_float32_casts(tiny_models, ids, arch):
    model = tiny_models(arch, "f64")  # default in f64: no casts, exact float64
    assert model.info["hf_casts"] is False
    inputs = _inputs(model, ids)
    err = _max_rel_err(model, inputs, "parts", _hf_hidden_states(model, inputs))
    assert 1e-12 < err < 1e-5


def test_auto_backend_avoids_hf_for_exact_llama_f64(tiny_models, ids):
    from rankcollapse.models.stream import choose_backend

    assert choose_backend(tiny_models("llama", "f64"), "full", True, None, "auto") == "parts"
    assert choose_backend(tiny_models("llama", "f32"), "full", True, None, "auto") == "hf"
    assert choose_backend(tiny_models("bert", "f64"), "full", True, None, "auto") == "hf"
    assert choose_backend(tiny_models("bert", "f64"), "full", True, 16.0, "auto") == "hf"  # its own d_qk
    assert choose_backend(tiny_models("bert", "f64"), "attn", True, None, "auto") == "parts"
    assert choose_backend(tiny_models("bert", "f64"), "full", True, 2.0, "auto") == "parts"


def _tiny_parts(placement: str, gen: torch.Generator, bias: bool = True) -> LayerParts:
    d, h, g, e = 6, 2, 1, 3
    w = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    gamma, beta = w(d), w(d)
    return LayerParts(
        w_q=w(h * e, d), b_q=w(h * e) if bias else None, w_k=w(g * e, d), b_k=w(g * e) if bias else None,
        w_v=w(g * e, d), b_v=w(g * e) if bias else None, w_o=w(d, h * e), b_o=w(d) if bias else None,
        n_heads=h, n_kv_heads=g, head_dim=e, d_qk=float(e),
        norm_attn=lambda x: layer_norm(x, gamma, beta, 1e-5), norm_mlp=lambda x: 2 * x,
        norm_placement=placement, mlp=torch.tanh)


def _attention_by_hand(p: LayerParts, x: torch.Tensor, mask: torch.Tensor, d_qk: float,
                       bias: torch.Tensor | None = None):
    out = torch.zeros(x.shape[0], x.shape[1], p.w_o.shape[0], dtype=x.dtype)
    for b in range(x.shape[0]):
        for hh in range(p.n_heads):
            gg = hh // (p.n_heads // p.n_kv_heads)
            sl_q = slice(hh * p.head_dim, (hh + 1) * p.head_dim)
            sl_kv = slice(gg * p.head_dim, (gg + 1) * p.head_dim)
            q = x[b] @ p.w_q[sl_q].T + p.b_q[sl_q]
            k = x[b] @ p.w_k[sl_kv].T + p.b_k[sl_kv]
            v = x[b] @ p.w_v[sl_kv].T + p.b_v[sl_kv]
            s = q @ k.T / math.sqrt(d_qk) + (0.0 if bias is None else bias[0, hh])
            s = s - s.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)
            a = torch.where(mask, s.exp(), torch.zeros_like(s))
            a = a / a.sum(-1, keepdim=True)
            out[b] += a @ v @ p.w_o[:, sl_q].T
    return out + p.b_o


def test_attention_with_gqa_mask_d_qk_and_bias_matches_formula():
    gen = torch.Generator().manual_seed(0)
    p = _tiny_parts("post", gen)
    x = torch.randn(2, 5, 6, generator=gen, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    got = attention(p, x, mask, d_qk=1 / 64)
    torch.testing.assert_close(got, _attention_by_hand(p, x, mask, 1 / 64), rtol=1e-12, atol=1e-12)
    bias = torch.randn(1, 2, 5, 5, generator=gen, dtype=torch.float64)
    got = attention(p, x, mask, positions=Positions(bias=bias))
    torch.testing.assert_close(got, _attention_by_hand(p, x, mask, 3.0, bias), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_each_mode_matches_its_documented_formula(placement):
    gen = torch.Generator().manual_seed(1)
    p = _tiny_parts(placement, gen)
    x = torch.randn(2, 5, 6, generator=gen, dtype=torch.float64)
    full_mask = torch.ones(5, 5, dtype=torch.bool)
    A = lambda z: _attention_by_hand(p, z, full_mask, 3.0)  # noqa: E731
    N1, N2 = p.norm_attn, p.norm_mlp
    if placement == "post":
        y = N1(x + A(x))
        expected = {"attn": A(x), "attn+ln": N1(A(x)), "attn+skip": x + A(x), "attn+skip+ln": y,
                    "full": N2(y + torch.tanh(y))}
    else:
        y = x + A(N1(x))
        expected = {"attn": A(x), "attn+ln": A(N1(x)), "attn+skip": x + A(x), "attn+skip+ln": y,
                    "full": y + torch.tanh(N2(y))}
    for mode, want in expected.items():
        torch.testing.assert_close(run_block(p, x, mode, None), want, rtol=1e-12, atol=1e-12, msg=mode)


def test_masked_weights_are_exactly_zero_so_future_keys_do_not_matter():
    gen = torch.Generator().manual_seed(2)
    p = _tiny_parts("pre", gen)
    x = torch.randn(1, 5, 6, generator=gen, dtype=torch.float64)
    y = x.clone()
    y[:, -1] += 10.0  # change only the last token
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    a, b = run_block(p, x, "attn", causal), run_block(p, y, "attn", causal)
    assert torch.equal(a[:, :-1], b[:, :-1])


def test_norms_are_the_textbook_formulas():
    x = torch.randn(4, 8, dtype=torch.float64)
    w, b = torch.rand(8, dtype=torch.float64), torch.rand(8, dtype=torch.float64)
    c = x - x.mean(-1, keepdim=True)
    ln = c / (c.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt() * w + b
    torch.testing.assert_close(layer_norm(x, w, b, 1e-6), ln)
    torch.testing.assert_close(rms_norm(x, w, 1e-6), x / (x.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt() * w)


@pytest.mark.parametrize("arch", ARCHS)
def test_mask_override_changes_encoder_and_decoder_outputs(tiny_models, ids, arch):
    model = tiny_models(arch, "f64")
    other = "causal" if model.own_mask == "complete" else "complete"
    inputs = _inputs(model, ids)
    last = lambda **kw: list(iter_hidden_states(model, inputs, **kw))[-1][2]  # noqa: E731
    own, over = last(mode="attn", layers=1), last(mode="attn", layers=1, mask=other)
    assert not torch.allclose(own, over, rtol=1e-6, atol=0)
    explicit = last(mode="full", mask=model.own_mask)  # the parts backend with the own mask, given by name
    torch.testing.assert_close(explicit, last(mode="full", backend="hf") if model.info["hf_casts"]
                               else last(mode="full"), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("arch,own", [("bert", 16.0), ("gpt2", 16.0), ("llama", 16.0), ("mpnet", 16.0),
                                      ("t5", 1.0), ("albert", 16.0)])
def test_default_d_qk_is_the_models_own_and_reproduces_its_logits(tiny_models, ids, arch, own):
    """d_qk is the number under the square root; each family's own value gives its own logits
    (T5 does not scale: its own d_qk is 1), so passing it explicitly changes nothing."""
    model = tiny_models(arch, "f64")
    assert model.own_d_qk == own and all(p.d_qk == own for p in model.layers)
    default = [x.clone() for _, _, x in iter_hidden_states(model, ids, mode="attn", layers=2)]
    explicit = [x.clone() for _, _, x in iter_hidden_states(model, ids, mode="attn", layers=2, d_qk=own)]
    other = list(iter_hidden_states(model, ids, mode="attn", layers=1, d_qk=own * 4))[-1][2]
    assert all(torch.equal(a, b) for a, b in zip(default, explicit, strict=True))
    assert not torch.allclose(other, default[1], rtol=1e-6, atol=0)


def test_d_qk_is_under_the_square_root(tiny_models, ids):
    model = tiny_models("bert", "f64")
    p = model.layers[0]
    x = model.embed(ids)
    quarter = LayerParts(**{**p.__dict__, "d_qk": p.d_qk * 16.0})
    torch.testing.assert_close(attention(p, x, None, d_qk=p.d_qk * 16.0), attention(quarter, x, None),
                               rtol=0, atol=0)
    q = torch.nn.functional.linear(x, p.w_q, p.b_q)[..., :16]
    k = torch.nn.functional.linear(x, p.w_k, p.b_k)[..., :16]
    logits = q @ k.transpose(-1, -2) / 4.0  # sqrt(16): BERT's own 1/sqrt(head_dim)
    from rankcollapse.core.attention import attention_logits

    torch.testing.assert_close(attention_logits(q, k, p.d_qk), logits, rtol=0, atol=0)


def test_relative_position_buckets_equal_t5_and_mpnet_reference_implementations():
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder
    from transformers.models.t5.modeling_t5 import T5Attention

    from rankcollapse.models.families import relative_position_bucket

    pos = torch.arange(300)
    rel = pos[None, :] - pos[:, None]
    ours = relative_position_bucket(rel, 32, 128)
    t5 = T5Attention._relative_position_bucket(rel, True, 32, 128)
    torch.testing.assert_close(ours, t5, rtol=0, atol=0)
    torch.testing.assert_close(ours, MPNetEncoder.relative_position_bucket(rel, 32, 128), rtol=0, atol=0)
    assert int(ours[0, 0]) == 0 and int(ours[0, 1]) == 17 and int(ours[1, 0]) == 1  # j > i: upper half
    assert int(ours.max()) == 31 and int(ours[0, 299]) == 31 and int(ours[299, 0]) == 15


@pytest.mark.parametrize("arch", ["t5", "mpnet"])
def test_relative_bias_is_shared_by_every_layer_and_changes_the_output(tiny_models, ids, arch):
    from rankcollapse.models.parts import NO_POSITIONS

    model = tiny_models(arch, "f64")
    x = model.embed(ids)
    pos = model.positions(x)
    assert pos.bias is not None and pos.bias.shape == (1, 4, ids.shape[1], ids.shape[1])
    with_bias = run_block(model.layers[2], x, "attn", None, positions=pos)
    without = run_block(model.layers[2], x, "attn", None, positions=NO_POSITIONS)
    assert not torch.allclose(with_bias, without, rtol=1e-6, atol=0)


@pytest.mark.parametrize(("arch", "dtype", "fused"), [("llama", "f32", True), ("bert", "f64", True),
                                                      ("gemma3_text", "f32", True), ("gemma2", "f32", False),
                                                      ("llama", "f64", False)])
def test_the_hf_backend_runs_torch_fused_attention_exactly_where_it_is_the_same_function(
        tiny_models, ids, monkeypatch, arch, dtype, fused):
    """Eager attention (which materialises [b, h, n, n]) made the hf backend 2.9x slower than the
    model's own default forward at 2,048 tokens. Fused where it is the same function (Llama's float32
    eager softmax in a float64 model and Gemma 2's logit soft-capping only eager reproduces); a plain
    causal mask goes as none, so that the kernel applies it itself (Gemma 3's sliding windows go as
    masks). The model stays eager afterwards."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    masks: list[bool] = []
    real = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def counting(module, q, k, v, attention_mask, *args, **kwargs):
        masks.append(attention_mask is None)
        return real(module, q, k, v, attention_mask, *args, **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "sdpa", counting)
    model = tiny_models(arch, dtype, hf_casts=True)
    ids = ids[:, :12] if arch != "gemma3_text" else torch.cat([ids, ids], dim=1)  # longer than its window
    assert _max_rel_err(model, ids, "hf", _hf_hidden_states(model, ids)) <= TOL[dtype]
    assert len(masks) == (len(model.layers) if fused else 0)
    windows = [not torch.equal(model.own_layer_mask(t).dense(ids.shape[1]),
                               torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril())
               for t in range(len(model.layers))]
    if fused and arch != "bert":
        assert masks == [not w for w in windows] and any(masks)
        assert arch != "gemma3_text" or not all(masks)
    assert model.hf_model.config._attn_implementation == "eager"
    masks.clear()
    list(iter_hidden_states(model, ids, backend="parts"))  # the parts never call it
    assert not masks
