"""Dissection of each supported family into :class:`~rankcollapse.models.parts.LayerParts`.

One entry per Hugging Face ``model_type`` in :data:`DISSECTORS`; each returns a
:class:`Dissected` (the embeddings function, the layers, the final norm, the position
information, the context length). Families:

==========  ==========  =====================================================================
family      norm place  what is special
==========  ==========  =====================================================================
``bert``    post        absolute positions in the embeddings
``albert``  post        one shared layer applied ``num_hidden_layers`` times; embedding projection
``mpnet``   post        relative-position bias (bucketed), computed once and shared by all layers
``gpt2``    pre         fused QKV (Conv1D), final ``ln_f``
``llama``   pre         RMSNorm, rotary q/k, GQA, float32 softmax and norm casts
``t5``      pre         encoder stack only; scale-only LayerNorm (RMSNorm, eps 1e-6); no
                        ``1/sqrt(d)`` in the logits (own ``d_qk = 1``); relative-position bias
                        computed in layer 0 and shared; final ``final_layer_norm``
==========  ==========  =====================================================================
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.core.norms import layer_norm, rms_norm
from rankcollapse.errors import RankCollapseError
from rankcollapse.models.parts import LayerParts, Positions, own_d_qk

Fn = Callable[[Tensor], Tensor]


@dataclass(eq=False)
class Dissected:
    """What :func:`dissect_family` extracts. ``positions(x) -> Positions`` for an input x [b, n, d]."""

    embed: Fn
    layers: list[LayerParts]
    is_decoder: bool
    max_tokens: int
    final_norm: Fn | None = None
    positions: Callable[[Tensor], Positions] | None = None


def relative_position_bucket(relative_position: Tensor, num_buckets: int = 32, max_distance: int = 128,
                             bidirectional: bool = True) -> Tensor:
    """T5 / MPNet bucket of ``r = j - i`` (key minus query position) -> int64, same shape.

    Bidirectional: half the buckets for ``r > 0``; in each half, ``|r| < m`` (``m`` = a quarter of
    ``num_buckets``) gets its own bucket and larger ``|r|`` a logarithmic one,
    ``m + floor(log(|r| / m) / log(max_distance / m) * (half - m))``, capped at ``half - 1``.
    The log is taken in float32, as both reference implementations do (bucket edges match).
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).to(torch.long) * num_buckets
        r = relative_position.abs()
    else:
        r = -torch.clamp(relative_position, max=0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(r.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(r < max_exact, r, large)


def relative_bias(table: nn.Embedding, n: int, num_buckets: int, max_distance: int) -> Tensor:
    """Bias ``B[0, h, i, j] = table[bucket(j - i), h]`` -> [1, h, n, n]."""
    pos = torch.arange(n, device=table.weight.device)
    bucket = relative_position_bucket(pos[None, :] - pos[:, None], num_buckets, max_distance)
    return table(bucket).permute(2, 0, 1).unsqueeze(0)


def _ln(module: nn.LayerNorm) -> Fn:
    return functools.partial(layer_norm, weight=module.weight, bias=module.bias, eps=module.eps)


def _rms(module: nn.Module, hf_casts: bool) -> Fn:
    return functools.partial(rms_norm, weight=module.weight, eps=module.variance_epsilon,
                             compute_dtype=torch.float32 if hf_casts else None)


def _t5_norm(module: nn.Module, hf_casts: bool) -> Fn:
    """T5's scale-only LayerNorm ``w * x / sqrt(mean(x^2) + eps)`` (RMSNorm). With ``hf_casts``,
    the mean of squares in float32 as Hugging Face's T5 computes it (the product stays in x's dtype)."""
    if not hf_casts:
        return functools.partial(rms_norm, weight=module.weight, eps=module.variance_epsilon)
    w, eps = module.weight, module.variance_epsilon

    def norm(x: Tensor) -> Tensor:
        return w * (x * torch.rsqrt(x.to(torch.float32).pow(2).mean(-1, keepdim=True) + eps))

    return norm


def _lin(module: nn.Linear) -> tuple[Tensor, Tensor | None]:
    return module.weight, module.bias


def _check_config(model: nn.Module, **expected: Any) -> None:
    for key, value in expected.items():
        got = getattr(model.config, key, value)
        if got != value:
            raise RankCollapseError(f"model config {key}={got!r} is not supported (need {value!r})")


def _post_ln_parts(q: nn.Linear, k: nn.Linear, v: nn.Linear, o: nn.Linear, n_heads: int, scaling: float,
                   norm_attn: nn.LayerNorm, norm_mlp: nn.LayerNorm, mlp: Fn,
                   hf_forward: Callable[..., Tensor]) -> LayerParts:
    d_out = q.weight.shape[0]
    return LayerParts(*_lin(q), *_lin(k), *_lin(v), *_lin(o), n_heads=n_heads, n_kv_heads=n_heads,
                      head_dim=d_out // n_heads, d_qk=own_d_qk(scaling), norm_attn=_ln(norm_attn),
                      norm_mlp=_ln(norm_mlp), norm_placement="post", mlp=mlp, hf_forward=hf_forward)


def _first(out: Any) -> Tensor:
    return out[0] if isinstance(out, tuple) else out


def bert_layer_parts(layer: nn.Module, hf_casts: bool = True) -> LayerParts:
    """Parts of one ``BertLayer`` (post-LN)."""
    att = layer.attention

    def mlp(x: Tensor) -> Tensor:
        return layer.output.dense(layer.intermediate(x))

    def hf_forward(x: Tensor, mask: Tensor | None, pos: Positions) -> Tensor:
        return _first(layer(x, attention_mask=mask))

    return _post_ln_parts(att.self.query, att.self.key, att.self.value, att.output.dense,
                          att.self.num_attention_heads, att.self.scaling, att.output.LayerNorm,
                          layer.output.LayerNorm, mlp, hf_forward)


def dissect_bert(model: nn.Module, hf_casts: bool) -> Dissected:
    _check_config(model, add_cross_attention=False, position_embedding_type="absolute")
    layers = [bert_layer_parts(layer) for layer in model.encoder.layer]
    return Dissected(embed=lambda ids: model.embeddings(input_ids=ids), layers=layers,
                     is_decoder=bool(model.config.is_decoder),
                     max_tokens=int(model.config.max_position_embeddings))


def dissect_albert(model: nn.Module, hf_casts: bool) -> Dissected:
    cfg = model.config
    groups = model.encoder.albert_layer_groups
    layers = []
    for i in range(cfg.num_hidden_layers):
        group = groups[int(i / (cfg.num_hidden_layers / cfg.num_hidden_groups))]
        for layer in group.albert_layers:
            att = layer.attention

            def mlp(x: Tensor, layer: nn.Module = layer) -> Tensor:
                return layer.ff_chunk(x)

            def hf_forward(x: Tensor, mask: Tensor | None, pos: Positions,
                           layer: nn.Module = layer) -> Tensor:
                return _first(layer(x, attention_mask=mask))

            layers.append(_post_ln_parts(att.query, att.key, att.value, att.dense, att.num_attention_heads,
                                         att.scaling, att.LayerNorm, layer.full_layer_layer_norm, mlp,
                                         hf_forward))

    def embed(ids: Tensor) -> Tensor:
        return model.encoder.embedding_hidden_mapping_in(model.embeddings(input_ids=ids))

    return Dissected(embed=embed, layers=layers, is_decoder=False,
                     max_tokens=int(cfg.max_position_embeddings))


def dissect_mpnet(model: nn.Module, hf_casts: bool) -> Dissected:
    layers = []
    for layer in model.encoder.layer:
        att = layer.attention

        def mlp(x: Tensor, layer: nn.Module = layer) -> Tensor:
            return layer.output.dense(layer.intermediate(x))

        def hf_forward(x: Tensor, mask: Tensor | None, pos: Positions, layer: nn.Module = layer) -> Tensor:
            return _first(layer(x, mask, pos.bias))

        sa = att.attn
        layers.append(_post_ln_parts(sa.q, sa.k, sa.v, sa.o, sa.num_attention_heads,
                                     sa.attention_head_size ** -0.5, att.LayerNorm, layer.output.LayerNorm,
                                     mlp, hf_forward))
    table = model.encoder.relative_attention_bias

    def positions(x: Tensor) -> Positions:  # MPNetEncoder.compute_position_bias: 32 buckets, distance 128
        return Positions(bias=relative_bias(table, x.shape[1], 32, 128).to(x.dtype))

    # positions start at padding_idx + 1 = 2, so the context is two short of the table
    return Dissected(embed=lambda ids: model.embeddings(input_ids=ids), layers=layers, is_decoder=False,
                     max_tokens=int(model.config.max_position_embeddings) - 2, positions=positions)


def gpt2_block_parts(block: nn.Module, hf_casts: bool = True) -> LayerParts:
    """Parts of one ``GPT2Block`` (pre-LN, fused QKV as Conv1D: ``y = x W + b``, W: [d, 3d])."""
    att = block.attn
    d = att.embed_dim
    w, b = att.c_attn.weight, att.c_attn.bias

    def hf_forward(x: Tensor, mask: Tensor | None, pos: Positions) -> Tensor:
        return _first(block(x, attention_mask=mask))

    return LayerParts(
        w_q=w[:, :d].t(), b_q=b[:d], w_k=w[:, d:2 * d].t(), b_k=b[d:2 * d], w_v=w[:, 2 * d:].t(),
        b_v=b[2 * d:], w_o=att.c_proj.weight.t(), b_o=att.c_proj.bias, n_heads=att.num_heads,
        n_kv_heads=att.num_heads, head_dim=att.head_dim, d_qk=float(att.head_dim),
        norm_attn=_ln(block.ln_1), norm_mlp=_ln(block.ln_2), norm_placement="pre", mlp=block.mlp,
        hf_forward=hf_forward)


def dissect_gpt2(model: nn.Module, hf_casts: bool) -> Dissected:
    _check_config(model, add_cross_attention=False, reorder_and_upcast_attn=False,
                  scale_attn_by_inverse_layer_idx=False, scale_attn_weights=True)
    layers = [gpt2_block_parts(block) for block in model.h]

    def embed(ids: Tensor) -> Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        return model.wte(ids) + model.wpe(pos)[None]

    return Dissected(embed=embed, layers=layers, is_decoder=True, max_tokens=int(model.config.n_positions),
                     final_norm=_ln(model.ln_f))


def dissect_llama(model: nn.Module, hf_casts: bool) -> Dissected:
    cfg = model.config
    layers = []
    for layer in model.layers[: cfg.num_hidden_layers]:
        att = layer.self_attn

        def hf_forward(x: Tensor, mask: Tensor | None, pos: Positions, layer: nn.Module = layer) -> Tensor:
            return _first(layer(x, attention_mask=mask, position_embeddings=pos.rotary))

        layers.append(LayerParts(
            *_lin(att.q_proj), *_lin(att.k_proj), *_lin(att.v_proj), *_lin(att.o_proj),
            n_heads=cfg.num_attention_heads, n_kv_heads=cfg.num_key_value_heads, head_dim=att.head_dim,
            d_qk=own_d_qk(float(att.scaling)), norm_attn=_rms(layer.input_layernorm, hf_casts),
            norm_mlp=_rms(layer.post_attention_layernorm, hf_casts), norm_placement="pre", mlp=layer.mlp,
            softmax_dtype=torch.float32 if hf_casts else None, hf_forward=hf_forward))
    rotary = model.rotary_emb

    def positions(x: Tensor) -> Positions:
        return Positions(rotary=rotary(x, torch.arange(x.shape[1], device=x.device)[None]))

    return Dissected(embed=model.embed_tokens, layers=layers, is_decoder=True,
                     max_tokens=int(cfg.max_position_embeddings), final_norm=_rms(model.norm, hf_casts),
                     positions=positions)


def t5_block_parts(block: nn.Module, hf_casts: bool = True) -> LayerParts:
    """Parts of one encoder ``T5Block`` (pre-LN, scale-only norms, no logit scaling: own d_qk = 1)."""
    sa, ff = block.layer[0], block.layer[-1]
    att = sa.SelfAttention

    def hf_forward(x: Tensor, mask: Tensor | None, pos: Positions) -> Tensor:
        return _first(block(x, attention_mask=mask, position_bias=pos.bias))

    return LayerParts(
        *_lin(att.q), *_lin(att.k), *_lin(att.v), *_lin(att.o), n_heads=att.n_heads,
        n_kv_heads=att.n_heads, head_dim=att.key_value_proj_dim, d_qk=own_d_qk(float(att.scaling)),
        norm_attn=_t5_norm(sa.layer_norm, hf_casts), norm_mlp=_t5_norm(ff.layer_norm, hf_casts),
        norm_placement="pre", mlp=ff.DenseReluDense, hf_forward=hf_forward)


def dissect_t5(model: nn.Module, hf_casts: bool) -> Dissected:
    stack = getattr(model, "encoder", model)
    cfg = stack.config
    if cfg.is_gated_act:
        raise RankCollapseError("T5 with a gated MLP (T5 v1.1, flan-t5) is not supported; t5-base is")
    layers = [t5_block_parts(block, hf_casts) for block in stack.block]
    first = stack.block[0].layer[0].SelfAttention
    table, buckets, distance = (first.relative_attention_bias, first.relative_attention_num_buckets,
                                first.relative_attention_max_distance)

    def positions(x: Tensor) -> Positions:  # computed by layer 0 and shared, as in T5Stack
        return Positions(bias=relative_bias(table, x.shape[1], buckets, distance).to(x.dtype))

    return Dissected(embed=stack.embed_tokens, layers=layers, is_decoder=False,
                     max_tokens=int(getattr(cfg, "n_positions", None) or 512),
                     final_norm=_t5_norm(stack.final_layer_norm, hf_casts), positions=positions)


def _fresh_bert(config: Any) -> nn.Module:
    from transformers.models.bert.modeling_bert import BertLayer

    return BertLayer(config)


def _fresh_gpt2(config: Any) -> nn.Module:
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    return GPT2Block(config)


def _fresh_t5(config: Any) -> nn.Module:
    from transformers.models.t5.modeling_t5 import T5Block

    return T5Block(config, has_relative_attention_bias=False)


#: family -> (a new HF layer module from a config, the parts of such a layer): the layers beyond a
#: random model's stored ones (``random:<checkpoint>,layers=L``).
FRESH_LAYERS: dict[str, tuple[Callable[[Any], nn.Module], Callable[[nn.Module, bool], LayerParts]]] = {
    "bert": (_fresh_bert, bert_layer_parts), "gpt2": (_fresh_gpt2, gpt2_block_parts),
    "t5": (_fresh_t5, t5_block_parts),
}


DISSECTORS: dict[str, Callable[[nn.Module, bool], Dissected]] = {
    "bert": dissect_bert, "albert": dissect_albert, "mpnet": dissect_mpnet, "gpt2": dissect_gpt2,
    "llama": dissect_llama, "t5": dissect_t5,
}

#: Families whose Hugging Face forward computes partly in float32 whatever the dtype.
HF_CASTS_FAMILIES: tuple[str, ...] = ("llama", "t5")
