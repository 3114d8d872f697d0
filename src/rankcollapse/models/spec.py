"""A family as data: where each part of a Hugging Face layer lives, and one generic dissector.

A :class:`FamilySpec` names, as attribute paths (``"attention.self.query"``, ``"layer.0.layer_norm"``;
numbers index module lists), where the attention projections, the norms, the MLP, the embeddings
and the final norm of a model live, what kind of norm it uses (``layer``, ``rms``, ``gemma``:
``(1 + w)`` RMSNorm, ``t5``), where the norms sit (``post``, ``pre``, ``parallel``, ``sandwich``),
how q, k, v are stored (separate, fused ``concat`` [q; k; v], fused ``per_head`` [h, 3, e] as in
GPT-NeoX, ``conv1d`` as GPT-2's ``Conv1D``), the position scheme (``absolute`` in the embeddings,
``rotary``, ``rotary_by_type`` per layer type, ``relative`` bias) and how to call the model's own
layer module. :func:`dissect_family` turns any such entry into a :class:`Dissected`; a new family
is one entry in :data:`rankcollapse.models.families.FAMILIES`, not new control flow.

Head counts come from the config (``num_attention_heads``, ``num_key_value_heads``), the head
width from the q projection, the logit scale from the attention module's ``scaling`` (else
``1/sqrt(head_dim)``), soft-capping from ``attn_logit_softcapping``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor, nn

from rankcollapse.core.norms import layer_norm, rms_norm
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.images import ImageGeometry
from rankcollapse.models.parts import PLACEMENTS, LayerParts, Positions, own_d_qk

Fn = Callable[[Tensor], Tensor]
NormKind = Literal["layer", "rms", "gemma", "t5"]
NORM_KINDS: tuple[str, ...] = ("layer", "rms", "gemma", "t5")
QKV_LAYOUTS: tuple[str, ...] = ("separate", "concat", "per_head", "conv1d")
POSITION_KINDS: tuple[str, ...] = ("absolute", "rotary", "rotary_by_type", "relative", "none")
HF_CALLS: tuple[str, ...] = ("mask", "rotary", "t5", "mpnet")
#: What a family's base model reads (Hugging Face's ``main_input_name``): token ids, or the pixel values of
#: an image cut into patch tokens (ViT).
INPUTS: tuple[str, ...] = ("input_ids", "pixel_values")


class Unsupported(Exception):  # noqa: N818  (caught inside dissect only)
    """A model this family entry cannot dissect (a config value it does not implement)."""


@dataclass(frozen=True)
class FamilySpec:
    """Where the parts of one Hugging Face ``model_type`` live (module docstring). Paths are
    relative to the base model (``layers``, ``embed``, ``final_norm``, ``rotary``) or to one
    layer module (the rest). ``mlp``: one path, or several applied in turn (BERT: the
    intermediate then the output projection, without its residual and norm).

    ``tl_blocks``: the prefix TransformerLens (4.x, ``TransformerBridge``) gives this family's
    layers (``blocks``; T5's encoder: ``encoder_blocks``), ``""`` where TransformerLens has no
    adapter for it. ``tuple_output``: the layer module returns a tuple (its first element is the
    layer output; the nnsight path then reads ``.output[0]``). ``inputs``: what the base model reads,
    one of :data:`INPUTS` (``pixel_values``: ``embed`` maps images ``[b, C, H, W]`` to patch tokens)."""

    model_type: str
    layers: str | Callable[[nn.Module], list[nn.Module]]
    norm_attn: str
    norm_mlp: str
    mlp: str | tuple[str, ...]
    placement: str
    norm: NormKind = "layer"
    decoder: bool = False
    q: str = ""
    k: str = ""
    v: str = ""
    o: str = ""
    qkv: str = ""
    qkv_layout: str = "separate"
    attn: str = ""
    post_attn_norm: str = ""
    post_mlp_norm: str = ""
    q_norm: str = ""
    k_norm: str = ""
    embed: str | Callable[[nn.Module], Fn] = "embed_tokens"
    final_norm: str = ""
    positions: str = "absolute"
    rotary: str = "rotary_emb"
    relative: Callable[[nn.Module], tuple[nn.Embedding, int, int]] | None = None
    hf_call: str = "mask"
    softmax_f32: bool = False
    stack: str = ""
    context: tuple[str, ...] = ("max_position_embeddings",)
    depth_key: str = "num_hidden_layers"  # the config field holding the number of layers
    context_offset: int = 0
    parallel_key: str = ""
    requires: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    tl_blocks: str = "blocks"
    tuple_output: bool = False
    inputs: str = "input_ids"

    def __post_init__(self) -> None:
        for value, allowed, what in (
            (self.placement, PLACEMENTS, "placement"),
            (self.norm, NORM_KINDS, "norm"),
            (self.qkv_layout, QKV_LAYOUTS, "qkv_layout"),
            (self.positions, POSITION_KINDS, "positions"),
            (self.hf_call, HF_CALLS, "hf_call"),
            (self.inputs, INPUTS, "inputs"),
        ):
            if value not in allowed:
                raise RankCollapseError(f"family {self.model_type}: {what}={value!r}; allowed: {allowed}")
        if (self.qkv_layout == "separate") != bool(self.q and self.k and self.v and not self.qkv):
            raise RankCollapseError(f"family {self.model_type}: give q, k, v paths or one fused qkv path")
        if self.placement == "sandwich" and not (self.post_attn_norm and self.post_mlp_norm):
            raise RankCollapseError(
                f"family {self.model_type}: sandwich needs post_attn_norm and post_mlp_norm"
            )

    @property
    def hf_casts(self) -> bool:
        """Whether Hugging Face's forward computes partly in float32 whatever the dtype."""
        return self.softmax_f32 or self.norm != "layer"


def get_path(obj: Any, path: str) -> Any:
    """``obj.a.b.0.c`` for ``"a.b.0.c"`` (numbers index module lists)."""
    for name in path.split("."):
        obj = obj[int(name)] if name.isdigit() else getattr(obj, name)
    return obj


def norm_fn(module: nn.Module, kind: str, hf_casts: bool) -> Fn:
    """The norm ``module`` as a pure function (``hf_casts``: Hugging Face's float32 casts)."""
    if kind == "layer":
        return functools.partial(layer_norm, weight=module.weight, bias=module.bias, eps=module.eps)
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6))
    w = module.weight
    if kind == "rms":
        return functools.partial(
            rms_norm, weight=w, eps=eps, compute_dtype=torch.float32 if hf_casts else None
        )
    if kind == "gemma":  # (1 + w) * x / rms(x); HF: all in float32, cast back at the end
        if not hf_casts:
            return functools.partial(rms_norm, weight=1.0 + w, eps=eps)

        def gemma(x: Tensor) -> Tensor:
            y = x.float()
            y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps)
            return (y * (1.0 + w.float())).to(x.dtype)

        return gemma
    if not hf_casts:  # t5: scale-only LayerNorm; HF: the mean of squares in float32
        return functools.partial(rms_norm, weight=w, eps=eps)

    def t5(x: Tensor) -> Tensor:  # HF's T5LayerNorm: back to a half-precision weight's dtype before the scale
        y = x * torch.rsqrt(x.to(torch.float32).pow(2).mean(-1, keepdim=True) + eps)
        return w * (y.to(w.dtype) if w.dtype in (torch.float16, torch.bfloat16) else y)

    return t5


def _mlp(layer: nn.Module, paths: str | tuple[str, ...]) -> Fn:
    steps = [get_path(layer, p) for p in ((paths,) if isinstance(paths, str) else paths)]
    if len(steps) == 1:
        return steps[0]

    def mlp(x: Tensor) -> Tensor:
        for step in steps:
            x = step(x)
        return x

    return mlp


def _qkv(fam: FamilySpec, layer: nn.Module, h: int, g: int) -> tuple[Tensor, ...]:
    """``(w_q, b_q, w_k, b_k, w_v, b_v)`` in the ``nn.Linear`` convention."""
    if fam.qkv_layout == "separate":
        out: list[Any] = []
        for p in (fam.q, fam.k, fam.v):
            m = get_path(layer, p)
            out += [m.weight, m.bias]
        return tuple(out)
    m = get_path(layer, fam.qkv)
    w, b = (m.weight.t(), m.bias) if fam.qkv_layout == "conv1d" else (m.weight, m.bias)
    d = w.shape[1]
    if fam.qkv_layout == "per_head":  # rows [h, 3, e] (GPT-NeoX)
        e = w.shape[0] // (3 * h)
        wq, wk, wv = (w.view(h, 3, e, d)[:, i].reshape(h * e, d) for i in range(3))
        bs = (None,) * 3 if b is None else tuple(b.view(h, 3, e)[:, i].reshape(h * e) for i in range(3))
        return wq, bs[0], wk, bs[1], wv, bs[2]
    e = w.shape[0] // (h + 2 * g)
    sizes = [h * e, g * e, g * e]
    ws = torch.split(w, sizes, dim=0)
    bs = (None,) * 3 if b is None else torch.split(b, sizes, dim=0)
    return ws[0], bs[0], ws[1], bs[1], ws[2], bs[2]


def _hf_forward(fam: FamilySpec, layer: nn.Module, rotary_type: str | None) -> Callable[..., Tensor]:
    def first(out: Any) -> Tensor:
        return out[0] if isinstance(out, tuple) else out

    if fam.hf_call == "rotary":
        return lambda x, mask, pos: first(
            layer(x, attention_mask=mask, position_embeddings=pos.rotary_for(rotary_type))
        )
    if fam.hf_call == "t5":
        return lambda x, mask, pos: first(layer(x, attention_mask=mask, position_bias=pos.bias))
    if fam.hf_call == "mpnet":
        return lambda x, mask, pos: first(layer(x, mask, pos.bias))
    return lambda x, mask, pos: first(layer(x, attention_mask=mask))


def layer_parts(fam: FamilySpec, layer: nn.Module, config: Any, hf_casts: bool, index: int = 0) -> LayerParts:
    """The :class:`LayerParts` of one layer module of family ``fam`` (layer ``index`` of the model)."""
    h = int(config.num_attention_heads)
    g = int(getattr(config, "num_key_value_heads", None) or h)
    wq, bq, wk, bk, wv, bv = _qkv(fam, layer, h, g)
    o = get_path(layer, fam.o)
    wo = o.weight.t() if fam.qkv_layout == "conv1d" else o.weight
    e = wq.shape[0] // h
    att = get_path(layer, fam.attn) if fam.attn else None
    scaling = getattr(att, "scaling", None) if att is not None else None
    types = getattr(config, "layer_types", None)
    rotary_type = types[index] if fam.positions == "rotary_by_type" and types else None
    placement = fam.placement
    if fam.parallel_key and not getattr(config, fam.parallel_key):
        placement = "pre"

    def norm(path: str) -> Fn | None:
        return norm_fn(get_path(layer, path), fam.norm, hf_casts) if path else None

    cap = getattr(config, "attn_logit_softcapping", None)
    return LayerParts(
        w_q=wq,
        b_q=bq,
        w_k=wk,
        b_k=bk,
        w_v=wv,
        b_v=bv,
        w_o=wo,
        b_o=o.bias,
        n_heads=h,
        n_kv_heads=g,
        head_dim=e,
        d_qk=own_d_qk(float(scaling)) if scaling else float(e),
        norm_attn=norm(fam.norm_attn),
        norm_mlp=norm(fam.norm_mlp),
        norm_placement=placement,
        mlp=_mlp(layer, fam.mlp),
        softmax_dtype=torch.float32 if fam.softmax_f32 and hf_casts else None,
        post_attn_norm=norm(fam.post_attn_norm) if placement == "sandwich" else None,
        post_mlp_norm=norm(fam.post_mlp_norm) if placement == "sandwich" else None,
        q_norm=norm(fam.q_norm),
        k_norm=norm(fam.k_norm),
        logit_softcap=float(cap) if cap else None,
        rotary_type=rotary_type,
        hf_forward=_hf_forward(fam, layer, rotary_type),
        hf_causal=bool(getattr(att, "is_causal", False)) if att is not None else False,
    )


@dataclass(eq=False)
class Dissected:
    """What :func:`dissect_family` extracts. ``positions(x) -> Positions`` for an input x [b, n, d].
    ``image``: a vision family's image (its token count is ``image.tokens``), None for text."""

    embed: Fn
    layers: list[LayerParts]
    is_decoder: bool
    max_tokens: int
    final_norm: Fn | None = None
    positions: Callable[[Tensor], Positions] | None = None
    image: ImageGeometry | None = None


def _positions(fam: FamilySpec, root: nn.Module, config: Any) -> Callable[[Tensor], Positions] | None:
    from rankcollapse.models.relpos import relative_bias

    if fam.positions == "rotary":
        rotary = get_path(root, fam.rotary)
        return lambda x: Positions(rotary=rotary(x, torch.arange(x.shape[1], device=x.device)[None]))
    if fam.positions == "rotary_by_type":
        rotary = get_path(root, fam.rotary)
        kinds = sorted(set(config.layer_types))

        def by_type(x: Tensor) -> Positions:
            pos = torch.arange(x.shape[1], device=x.device)[None]
            return Positions(rotary_by_type={k: rotary(x, pos, k) for k in kinds})

        return by_type
    if fam.positions == "relative" and fam.relative is not None:
        table, buckets, distance = fam.relative(root)
        return lambda x: Positions(bias=relative_bias(table, x.shape[1], buckets, distance).to(x.dtype))
    return None


def layer_modules(fam: FamilySpec, model: nn.Module) -> tuple[nn.Module, list[nn.Module]]:
    """``(root, modules)``: the module holding the layers (the base model, or its ``fam.stack``) and
    the layer modules in the order they are applied (ALBERT: its shared layer once per application)."""
    root = getattr(model, fam.stack, model) if fam.stack else model
    if callable(fam.layers):
        return root, list(fam.layers(root))
    depth = getattr(root.config, "num_hidden_layers", None) or None
    return root, list(get_path(root, fam.layers))[:depth]


def dissect_family(fam: FamilySpec, model: nn.Module, hf_casts: bool) -> Dissected:
    """Dissect ``model`` (a base model of ``fam.model_type``) by its entry; :class:`Unsupported` when
    its config asks for something the entry does not implement (``fam.requires``)."""
    root, modules = layer_modules(fam, model)
    config = root.config
    for key, value in fam.requires.items():
        got = getattr(config, key, value)
        if got != value:
            raise Unsupported(f"config {key}={got!r} (dissected: {value!r})")
    layers = [layer_parts(fam, m, config, hf_casts, i) for i, m in enumerate(modules)]
    embed = fam.embed(root) if callable(fam.embed) else get_path(root, fam.embed)
    context = next((getattr(config, k) for k in fam.context if getattr(config, k, None)), 512)
    final = norm_fn(get_path(root, fam.final_norm), fam.norm, hf_casts) if fam.final_norm else None
    image = ImageGeometry.from_config(config) if fam.inputs == "pixel_values" else None
    return Dissected(
        embed=embed,
        layers=layers,
        is_decoder=fam.decoder,
        max_tokens=image.tokens if image is not None else int(context) + fam.context_offset,
        final_norm=final,
        positions=_positions(fam, root, config),
        image=image,
    )
