"""The families we dissect, one declarative :class:`~rankcollapse.models.spec.FamilySpec` entry each.

==============  ==========  =====  =========================================================
family          place       norm   what is special
==============  ==========  =====  =========================================================
``bert``        post        layer  absolute positions in the embeddings
``roberta``     post        layer  BERT's layout; positions start at ``padding_idx + 1``
``distilbert``  post        layer  ``q_lin``/``k_lin``/``v_lin``/``out_lin``, no token types
``albert``      post        layer  one shared layer applied ``num_hidden_layers`` times
``mpnet``       post        layer  relative-position bias (bucketed), shared by all layers
``gpt2``        pre         layer  fused QKV (``Conv1D``), final ``ln_f``
``gpt_neox``    parallel    layer  fused QKV per head ``[h, 3, e]``, partial rotary (Pythia)
``llama``       pre         rms    rotary q/k, GQA
``mistral``     pre         rms    Llama's layout; sliding window (the mask schedule)
``qwen2``       pre         rms    q/k/v biases; sliding window from ``max_window_layers``
``qwen3``       pre         rms    Llama's layout + per-head q/k RMSNorms
``phi3``        pre         rms    fused ``qkv_proj`` [q; k; v], fused ``gate_up_proj``
``gemma``       pre         gemma  Llama's layout, ``(1 + w)`` RMSNorm, embeddings times sqrt(d)
``gemma2``      sandwich    gemma  ``(1 + w)`` RMSNorm before and after attention and MLP,
                                   embeddings times sqrt(d), logit soft-capping,
                                   ``query_pre_attn_scalar``, local/global layers
``gemma3_text`` sandwich    gemma  Gemma 2's layout + q/k norms, one rotary base per layer type
``t5``          pre         t5     encoder stack only; no ``1/sqrt(d)`` (own ``d_qk = 1``);
                                   relative-position bias computed in layer 0 and shared
``vit``         pre         layer  reads images: CLS + patch tokens (a ``Conv2d`` of stride p),
                                   absolute positions in the embeddings (bicubic to another
                                   image size); complete mask; the final ``layernorm`` is not
                                   in ``hidden_states``
==============  ==========  =====  =========================================================

Sliding windows and local/global layers are masks, not parts: see
:func:`rankcollapse.masks.hf_schedule.schedule_from_hf_config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.models.images import ImageGeometry, interpolate_positions
from rankcollapse.models.parts import LayerParts
from rankcollapse.models.relpos import relative_bias, relative_position_bucket
from rankcollapse.models.spec import Dissected, FamilySpec, Unsupported, dissect_family, layer_parts

__all__ = [
    "DISSECTORS",
    "FAMILIES",
    "FRESH_LAYERS",
    "HF_CASTS_FAMILIES",
    "Dissected",
    "FamilySpec",
    "Unsupported",
    "relative_bias",
    "relative_position_bucket",
]


def _albert_layers(model: nn.Module) -> list[nn.Module]:
    """ALBERT's shared layer(s), one entry per application."""
    cfg = model.config
    groups = model.encoder.albert_layer_groups
    out = []
    for i in range(cfg.num_hidden_layers):
        out.extend(groups[int(i / (cfg.num_hidden_layers / cfg.num_hidden_groups))].albert_layers)
    return out


def _albert_embed(model: nn.Module) -> Callable[[Tensor], Tensor]:
    return lambda ids: model.encoder.embedding_hidden_mapping_in(model.embeddings(input_ids=ids))


def _gpt2_embed(model: nn.Module) -> Callable[[Tensor], Tensor]:
    def embed(ids: Tensor) -> Tensor:
        return model.wte(ids) + model.wpe(torch.arange(ids.shape[1], device=ids.device))[None]

    return embed


def _vit_embed(model: nn.Module) -> Callable[[Tensor], Tensor]:
    """Pixel values ``[b, C, H, W]`` -> ``x = [cls; patches(pixels)] + P`` ``[b, 1 + (H/p)(W/p), d]``: the
    CLS token, then one token per patch (the projection, a ``Conv2d`` of stride p; row-major), plus the
    learned absolute positions ``P`` ``[1, n, d]``, those of the config's image size as they are, or
    resampled to the image's patch grid at another size
    (:func:`~rankcollapse.models.images.interpolate_positions`, Hugging Face's
    ``interpolate_pos_encoding=True``); the pixels cast to the weights' dtype as ViT does.
    The pixels' size is checked before (:func:`~rankcollapse.models.images.image_geometry`)."""
    emb = model.embeddings
    projection = emb.patch_embeddings.projection
    own = ImageGeometry.from_config(model.config)

    def embed(pixels: Tensor) -> Tensor:
        b, _, h, w = pixels.shape
        patches = projection(pixels.to(projection.weight.dtype)).flatten(2).transpose(1, 2)
        x = torch.cat((emb.cls_token.expand(b, -1, -1), patches), dim=1)
        positions = emb.position_embeddings
        if (h, w) != (own.height, own.width):
            positions = interpolate_positions(positions, own.at(h, w).grid)
        return x + positions

    return embed


def _t5_relative(stack: nn.Module) -> tuple[nn.Embedding, int, int]:
    first = stack.block[0].layer[0].SelfAttention
    return (
        first.relative_attention_bias,
        first.relative_attention_num_buckets,
        first.relative_attention_max_distance,
    )


def _mpnet_relative(model: nn.Module) -> tuple[nn.Embedding, int, int]:
    return model.encoder.relative_attention_bias, 32, 128  # MPNetEncoder.compute_position_bias


BERT = FamilySpec(
    "bert",
    layers="encoder.layer",
    q="attention.self.query",
    k="attention.self.key",
    v="attention.self.value",
    o="attention.output.dense",
    attn="attention.self",
    norm_attn="attention.output.LayerNorm",
    norm_mlp="output.LayerNorm",
    mlp=("intermediate", "output.dense"),
    placement="post",
    embed="embeddings",
)

LLAMA = FamilySpec(
    "llama",
    layers="layers",
    q="self_attn.q_proj",
    k="self_attn.k_proj",
    v="self_attn.v_proj",
    o="self_attn.o_proj",
    attn="self_attn",
    norm_attn="input_layernorm",
    norm_mlp="post_attention_layernorm",
    mlp="mlp",
    placement="pre",
    norm="rms",
    decoder=True,
    final_norm="norm",
    positions="rotary",
    hf_call="rotary",
    softmax_f32=True,
)

GEMMA2 = replace(
    LLAMA,
    model_type="gemma2",
    norm="gemma",
    placement="sandwich",
    post_attn_norm="post_attention_layernorm",
    norm_mlp="pre_feedforward_layernorm",
    post_mlp_norm="post_feedforward_layernorm",
)

FAMILIES: dict[str, FamilySpec] = {
    f.model_type: f
    for f in (
        BERT,
        replace(BERT, model_type="roberta", context_offset=-2),
        FamilySpec(
            "distilbert",
            layers="transformer.layer",
            q="attention.q_lin",
            k="attention.k_lin",
            v="attention.v_lin",
            o="attention.out_lin",
            attn="attention",
            norm_attn="sa_layer_norm",
            norm_mlp="output_layer_norm",
            mlp="ffn",
            placement="post",
            embed="embeddings",
            tl_blocks="",
        ),
        FamilySpec(
            "albert",
            layers=_albert_layers,
            q="attention.query",
            k="attention.key",
            v="attention.value",
            o="attention.dense",
            attn="attention",
            norm_attn="attention.LayerNorm",
            norm_mlp="full_layer_layer_norm",
            mlp="ff_chunk",
            placement="post",
            embed=_albert_embed,
            tl_blocks="",
        ),
        FamilySpec(
            "mpnet",
            layers="encoder.layer",
            q="attention.attn.q",
            k="attention.attn.k",
            v="attention.attn.v",
            o="attention.attn.o",
            norm_attn="attention.LayerNorm",
            norm_mlp="output.LayerNorm",
            mlp=("intermediate", "output.dense"),
            placement="post",
            embed="embeddings",
            positions="relative",
            relative=_mpnet_relative,
            hf_call="mpnet",
            context_offset=-2,
            tl_blocks="",
            tuple_output=True,
        ),
        FamilySpec(
            "gpt2",
            layers="h",
            qkv="attn.c_attn",
            qkv_layout="conv1d",
            o="attn.c_proj",
            norm_attn="ln_1",
            norm_mlp="ln_2",
            mlp="mlp",
            placement="pre",
            decoder=True,
            embed=_gpt2_embed,
            final_norm="ln_f",
            context=("n_positions",),
            depth_key="n_layer",
            requires=dict(
                add_cross_attention=False,
                reorder_and_upcast_attn=False,
                scale_attn_by_inverse_layer_idx=False,
                scale_attn_weights=True,
            ),
        ),
        FamilySpec(
            "gpt_neox",
            layers="layers",
            qkv="attention.query_key_value",
            qkv_layout="per_head",
            o="attention.dense",
            attn="attention",
            norm_attn="input_layernorm",
            norm_mlp="post_attention_layernorm",
            mlp="mlp",
            placement="parallel",
            parallel_key="use_parallel_residual",
            decoder=True,
            embed="embed_in",
            final_norm="final_layer_norm",
            positions="rotary",
            hf_call="rotary",
            softmax_f32=True,
        ),
        LLAMA,
        replace(LLAMA, model_type="mistral"),
        replace(LLAMA, model_type="qwen2"),
        replace(LLAMA, model_type="qwen3", q_norm="self_attn.q_norm", k_norm="self_attn.k_norm"),
        replace(LLAMA, model_type="gemma", norm="gemma"),
        replace(LLAMA, model_type="phi3", q="", k="", v="", qkv="self_attn.qkv_proj", qkv_layout="concat"),
        GEMMA2,
        replace(
            GEMMA2,
            model_type="gemma3_text",
            q_norm="self_attn.q_norm",
            k_norm="self_attn.k_norm",
            positions="rotary_by_type",
            requires=dict(use_bidirectional_attention=False),
        ),
        FamilySpec(
            "t5",
            stack="encoder",
            layers="block",
            q="layer.0.SelfAttention.q",
            k="layer.0.SelfAttention.k",
            v="layer.0.SelfAttention.v",
            o="layer.0.SelfAttention.o",
            attn="layer.0.SelfAttention",
            norm_attn="layer.0.layer_norm",
            norm_mlp="layer.1.layer_norm",
            mlp="layer.1.DenseReluDense",
            placement="pre",
            norm="t5",
            final_norm="final_layer_norm",
            positions="relative",
            relative=_t5_relative,
            hf_call="t5",
            context=("n_positions",),
            depth_key="num_layers",
            requires=dict(is_gated_act=False),
            note="T5 v1.1 / flan-t5 (gated MLP) run in full mode only",
            tl_blocks="encoder_blocks",
            tuple_output=True,
        ),
        FamilySpec(
            "vit",
            layers="layers",
            q="attention.q_proj",
            k="attention.k_proj",
            v="attention.v_proj",
            o="attention.o_proj",
            attn="attention",
            norm_attn="layernorm_before",
            norm_mlp="layernorm_after",
            mlp="mlp",
            placement="pre",
            embed=_vit_embed,
            softmax_f32=True,
            inputs="pixel_values",
        ),
    )
}


def _dissector(fam: FamilySpec) -> Callable[[nn.Module, bool], Dissected]:
    return lambda model, hf_casts: dissect_family(fam, model, hf_casts)


#: model_type -> ``dissect(model, hf_casts) -> Dissected`` (raises :class:`Unsupported`).
DISSECTORS: dict[str, Callable[[nn.Module, bool], Dissected]] = {
    k: _dissector(f) for k, f in FAMILIES.items()
}

#: Families whose Hugging Face forward computes partly in float32 whatever the dtype.
HF_CASTS_FAMILIES: tuple[str, ...] = tuple(k for k, f in FAMILIES.items() if f.hf_casts)


def _fresh_bert(config: Any) -> nn.Module:
    from transformers.models.bert.modeling_bert import BertLayer

    return BertLayer(config)


def _fresh_gpt2(config: Any) -> nn.Module:
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    return GPT2Block(config)


def _fresh_t5(config: Any) -> nn.Module:
    from transformers.models.t5.modeling_t5 import T5Block

    return T5Block(config, has_relative_attention_bias=False)


def fresh_parts(family: str, layer: nn.Module, config: Any, hf_casts: bool) -> LayerParts:
    """Parts of a fresh layer module of ``family`` (deep random models)."""
    return layer_parts(FAMILIES[family], layer, config, hf_casts)


#: family -> a new HF layer module from a config: the layers beyond a random model's stored ones
#: (``random:<checkpoint>,layers=L``); their parts come from :func:`fresh_parts`.
FRESH_LAYERS: dict[str, Callable[[Any], nn.Module]] = {
    "bert": _fresh_bert,
    "gpt2": _fresh_gpt2,
    "t5": _fresh_t5,
}
