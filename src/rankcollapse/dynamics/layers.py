"""One layer of the dynamics, assembled from pure parts: attention, normalisation, skip, MLP.

Index letters: b batch, h heads, n tokens, d features, e query/key features.

Parts: ``Attn(X) = sum_h A_h X W_V,h W_O,h`` (``W_O,h = I/h`` by default: for one head
``Attn(X) = A X W_V``, the paper's eq. (2)), ``A_h = softmax_M(X W_Q,h (X W_K,h)^T / sqrt(d_QK))``;
``Norm`` one of :mod:`rankcollapse.core.norms`; ``MLP(Y) = GELU(Y W_1) W_2``. With rotary position
embeddings (``SimulationConfig.rope_base``) queries and keys are rotated by position before the softmax,
``A_h = softmax_M(rot(X W_Q,h) rot(X W_K,h)^T / sqrt(d_QK))`` (``core.positions``; the kernel plan's
``rotary``).

A sub-layer ``f`` (attention, then the MLP if any) is applied as (``placement``)

- ``post``: ``Y = Norm(X + lam f(X))`` with a skip connection, ``Y = Norm(f(X))`` without;
- ``pre``:  ``Y = X + lam f(Norm(X))`` with a skip connection, ``Y = f(Norm(X))`` without;
- ``peri``: ``Y = X + lam Norm(f(Norm(X)))``, ``Y = Norm(f(Norm(X)))`` without (Peri-LN, Kim et al. 2025,
  arXiv 2502.02732: a norm before and after each sublayer; its extra norms on the embeddings and the
  final output are not part of a layer);
- ``mix``:  ``post`` in the first ``round(share L)`` of the L layers, ``pre`` after (Mix-LN, Li et al. 2024,
  arXiv 2412.13795; ``share`` :data:`MIX_POST_SHARE` unless given): a spec of the layer's depth,
  :meth:`LayerSpec.at`;
- ``ngpt``: ``Y = Norm(X + alpha (Norm(f(X)) - X))`` (nGPT, Loshchilov et al. 2024, arXiv 2410.01131, its
  eqs. for ``h_A``, ``h_M``; NVIDIA/ngpt ``model.py``): tokens kept on the norm's sphere, each sublayer a
  step ``alpha`` (:data:`NGPT_STEP` unless given) towards its normalised output. nGPT learns alpha per
  feature and also normalises queries, keys and weights; here alpha is one fixed number and the attention
  is the simulator's: ours.
- ``pre+lns``: ``pre`` with every norm output of layer ``l`` (1-based) scaled by ``1 / sqrt(l)``: LayerNorm
  Scaling (Sun et al. 2025, "The Curse of Depth", arXiv 2502.05795), ``Y = X + lam f(Norm(X) / sqrt(l))``;
  a spec of the layer's depth, :meth:`LayerSpec.at` (its resolved ``norm_scale``).

Norm ``dyt`` (``core.norms.dyt``, Zhu et al. 2025, arXiv 2503.10622): ``tanh(alpha x)`` element-wise in any
placement, ``alpha`` the spec's ``dyt_alpha`` (``core.norms.DYT_ALPHA`` unless given).

``attention=False`` (presets ``mlp``, ``mlp-pre``: residual MLP stacks, Everett, arXiv 2607.14018): the layer
is its MLP sublayer only, with the spec's norm placement and skip; tokens never interact.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.core.attention import attention_logits, masked_softmax
from rankcollapse.core.norms import NORMS, dyt, get_norm
from rankcollapse.core.positions import apply_rotary
from rankcollapse.dynamics.kernels import KernelPlan
from rankcollapse.dynamics.weights import LayerWeights
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_float, checked

#: Where a layer's norm sits (module docstring): the one list the config and the presets check against.
PLACEMENTS = ("post", "pre", "peri", "mix", "ngpt", "pre+lns")
#: Mix-LN's share of post-LN layers: 25 %, as in the Mix-LN paper's code (Li et al. 2024, arXiv 2412.13795;
#: ``POST_NUM``: 3 post-LN layers of LLaMA-71M's 12, 6 of LLaMA-1B's 24).
MIX_POST_SHARE = 0.25
#: nGPT's step alpha: its initial value in the nGPT code (NVIDIA/ngpt ``model.py``,
#: ``attn_alpha_init_value = mlp_alpha_init_value = 0.05``), fixed here (nGPT learns it).
NGPT_STEP = 0.05


@dataclass(frozen=True)
class LayerSpec:
    """How a layer is assembled: ``norm`` (see NORMS), ``placement`` (:data:`PLACEMENTS`, module docstring),
    ``skip`` (lambda of ``X + lambda f(X)``, or None for no skip connection; ``ngpt`` is its own residual
    step and needs ``skip`` 1), ``mlp`` (add the MLP sub-layer), ``mix_post_share`` (``mix`` only: the share
    of post-LN layers, in [0, 1]; None: :data:`MIX_POST_SHARE`), ``ngpt_step`` (``ngpt`` only: alpha, in
    (0, 1]; None: :data:`NGPT_STEP`), ``dyt_alpha`` (norm ``dyt`` only: its alpha > 0; None:
    ``core.norms.DYT_ALPHA``), ``norm_scale`` (a resolved ``pre+lns`` layer's factor on its norm outputs,
    ``1 / sqrt(l)``: set by :meth:`at`, placement ``pre`` only). A field that does not apply is refused."""

    norm: str = "none"
    placement: str = "post"
    skip: float | None = None
    mlp: bool = False
    mix_post_share: float | None = None
    ngpt_step: float | None = None
    dyt_alpha: float | None = None
    norm_scale: float | None = None
    attention: bool = True

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise RankCollapseError(f"unknown norm {self.norm!r}; allowed: {', '.join(NORMS)}")
        if self.placement not in PLACEMENTS:
            shown = repr(self.placement)[:40]
            raise RankCollapseError(f"unknown placement {shown}; allowed: {', '.join(PLACEMENTS)}")
        if self.placement in ("peri", "mix", "ngpt") and self.norm == "none":
            raise RankCollapseError(f"placement {self.placement!r} places a norm; this spec has norm 'none' "
                                    f"(allowed: {', '.join(n for n in NORMS if n != 'none')})")
        if self.placement == "ngpt" and self.skip != 1.0:
            raise RankCollapseError(f"placement 'ngpt' is its own residual step X + alpha (Norm(f(X)) - X): "
                                    f"skip must be 1, got {self.skip!r} (the step is ngpt_step)")
        for name, placement, low, low_open in (("mix_post_share", "mix", 0.0, False),
                                                ("ngpt_step", "ngpt", 0.0, True)):
            value = getattr(self, name)
            if value is None:
                continue
            if self.placement != placement:
                raise RankCollapseError(f"{name} applies to placement {placement!r}, not {self.placement!r}")
            object.__setattr__(self, name, check_float(name, value, low=low, high=1.0, low_open=low_open))
        self._check_followups()

    def _check_followups(self) -> None:
        """The fields of DyT, LayerNorm Scaling and MLP-only stacks (``dyt_alpha``, ``norm_scale``, placement
        ``pre+lns``, ``attention``)."""
        if not isinstance(self.attention, bool):
            raise RankCollapseError(f"attention must be True or False, got {self.attention!r}")
        if not self.attention and not self.mlp:
            raise RankCollapseError("a layer without attention is its MLP: attention=False needs mlp=True")
        if self.placement == "pre+lns" and self.norm == "none":
            raise RankCollapseError(f"placement 'pre+lns' scales a norm's output; this spec has norm 'none' "
                                    f"(allowed: {', '.join(n for n in NORMS if n != 'none')})")
        if self.dyt_alpha is not None:
            if self.norm != "dyt":
                raise RankCollapseError(f"dyt_alpha applies to norm 'dyt', not {self.norm!r}")
            object.__setattr__(self, "dyt_alpha", check_float("dyt_alpha", self.dyt_alpha, low=0.0,
                                                              low_open=True))
        if self.norm_scale is not None:
            if self.placement != "pre":
                raise RankCollapseError(f"norm_scale is a resolved 'pre+lns' layer's (placement 'pre'), not "
                                        f"placement {self.placement!r}")
            object.__setattr__(self, "norm_scale", check_float("norm_scale", self.norm_scale, low=0.0,
                                                               low_open=True))

    def post_layers(self, layers: int) -> int:
        """Mix-LN's post-LN layers of a stack of ``layers``: ``round(share L)`` (halves up)."""
        share = MIX_POST_SHARE if self.mix_post_share is None else self.mix_post_share
        return math.floor(share * layers + 0.5)

    def at(self, t: int, layers: int) -> LayerSpec:
        """The spec of layer ``t`` (0-based) of a stack of ``layers``: for ``mix`` post-LN where
        ``t < post_layers(layers)``, pre-LN after; for ``pre+lns`` pre-LN with
        ``norm_scale = 1 / sqrt(t + 1)`` (layer ``l = t + 1``); any other placement is the same at every
        depth."""
        if self.placement == "pre+lns":
            return LayerSpec(norm=self.norm, placement="pre", skip=self.skip, mlp=self.mlp,
                             dyt_alpha=self.dyt_alpha, norm_scale=1.0 / math.sqrt(t + 1),
                             attention=self.attention)
        if self.placement != "mix":
            return self
        placement = "post" if t < self.post_layers(layers) else "pre"
        return LayerSpec(norm=self.norm, placement=placement, skip=self.skip, mlp=self.mlp,
                         dyt_alpha=self.dyt_alpha, attention=self.attention)

    @property
    def is_pure_attention(self) -> bool:
        """``X(t+1) = Attn(X(t))``: the setting of Theorem 1."""
        return self.norm == "none" and self.skip is None and not self.mlp and self.attention


#: Named presets: (spec, exact formula for one layer, single head). ``D`` = diag(1/||row||).
PRESETS: dict[str, tuple[LayerSpec, str]] = {
    "attn": (LayerSpec(), "X <- A X W_V"),
    "attn+sphere": (
        LayerSpec(norm="sphere"), "X <- D A X W_V,  D = diag(1 / ||(A X W_V)_i||)  (tokens on the sphere)"),
    "attn+layernorm": (LayerSpec(norm="layernorm"), "X <- LayerNorm(A X W_V)"),
    "attn+rmsnorm": (LayerSpec(norm="rmsnorm"), "X <- RMSNorm(A X W_V)"),
    "attn+skip": (LayerSpec(skip=1.0), "X <- X + A X W_V"),
    "attn+skip+sphere": (
        LayerSpec(norm="sphere", skip=1.0), "X <- D (X + A X W_V),  D = diag(1 / ||(X + A X W_V)_i||)"),
    "attn+skip+layernorm": (
        LayerSpec(norm="layernorm", skip=1.0), "X <- LayerNorm(X + A X W_V)"),
    "transformer": (
        LayerSpec(norm="layernorm", skip=1.0, mlp=True),
        "Y <- LayerNorm(X + A X W_V); X <- LayerNorm(Y + GELU(Y W_1) W_2)  (post-LN block)",
    ),
    "transformer-pre": (
        LayerSpec(norm="layernorm", placement="pre", skip=1.0, mlp=True),
        "Y <- X + A' X' W_V with X' = LayerNorm(X); X <- Y + GELU(LayerNorm(Y) W_1) W_2  (pre-LN)",
    ),
    "transformer-peri": (
        LayerSpec(norm="layernorm", placement="peri", skip=1.0, mlp=True),
        "Y <- X + LayerNorm(A' X' W_V) with X' = LayerNorm(X); "
        "X <- Y + LayerNorm(GELU(LayerNorm(Y) W_1) W_2)  (Peri-LN)",
    ),
    "transformer-mix": (
        LayerSpec(norm="layernorm", placement="mix", skip=1.0, mlp=True),
        "the transformer (post-LN) block in the first round(L / 4) layers, transformer-pre after  (Mix-LN)",
    ),
    "transformer-ngpt": (
        LayerSpec(norm="sphere", placement="ngpt", skip=1.0, mlp=True),
        "Y <- D(X + a (D' A X W_V - X)); X <- D(Y + a (D' GELU(Y W_1) W_2 - Y)), D, D' = diag(1 / ||row||), "
        "a = 0.05  (nGPT, tokens on the sphere)",
    ),
    # the two ablations of the monitor's trained blocks (``monitor.trajectory.VARIANTS``: no-ln, no-skip)
    "transformer-no-ln": (
        LayerSpec(skip=1.0, mlp=True), "Y <- X + A X W_V; X <- Y + GELU(Y W_1) W_2  (the skips, no norm)"),
    "transformer-no-skip": (
        LayerSpec(norm="layernorm", mlp=True),
        "Y <- LayerNorm(A X W_V); X <- LayerNorm(GELU(Y W_1) W_2)  (post-LN without the skips)",
    ),
}

# ---- the follow-ups' normalisations (DyT, LayerNorm Scaling): one block, additions only ---------------
PRESETS.update({
    "attn+dyt": (LayerSpec(norm="dyt"), "X <- DyT(A X W_V) = tanh(alpha A X W_V)  (element-wise, alpha 0.5)"),
    "attn+skip+dyt": (LayerSpec(norm="dyt", skip=1.0), "X <- DyT(X + A X W_V)"),
    "transformer-dyt": (
        LayerSpec(norm="dyt", skip=1.0, mlp=True),
        "Y <- DyT(X + A X W_V); X <- DyT(Y + GELU(Y W_1) W_2)  (the post-LN block, DyT in LayerNorm's place)",
    ),
    "transformer-pre-dyt": (
        LayerSpec(norm="dyt", placement="pre", skip=1.0, mlp=True),
        "Y <- X + A' X' W_V with X' = DyT(X); X <- Y + GELU(DyT(Y) W_1) W_2  (pre-LN, DyT in LN's place)",
    ),
    "transformer-pre-lns": (
        LayerSpec(norm="layernorm", placement="pre+lns", skip=1.0, mlp=True),
        "layer l: Y <- X + A' X' W_V with X' = LayerNorm(X) / sqrt(l); X <- Y + GELU(LayerNorm(Y) / sqrt(l) "
        "W_1) W_2  (pre-LN with LayerNorm Scaling)",
    ),
})
# MLP-only stacks (Everett, arXiv 2607.14018): no attention, Post-Norm against Pre-Norm.
PRESETS.update({
    "mlp": (LayerSpec(norm="layernorm", skip=1.0, mlp=True, attention=False),
            "X <- LayerNorm(X + GELU(X W_1) W_2)  (Post-Norm residual MLP, no attention)"),
    "mlp-pre": (LayerSpec(norm="layernorm", placement="pre", skip=1.0, mlp=True, attention=False),
                "X <- X + GELU(LayerNorm(X) W_1) W_2  (Pre-Norm residual MLP, no attention)"),
})
# ---- end of the follow-ups' block ----------------------------------------------------------------------


def check_preset(name: str) -> str:
    """``name`` if it is a preset (:data:`PRESETS`); RankCollapseError (one line) for another name."""
    if not isinstance(name, str) or name not in PRESETS:
        shown = repr(name)[:60]
        raise RankCollapseError(f"unknown mode {shown}; allowed: {', '.join(PRESETS)}")
    return name


@checked
def get_preset(name: str) -> LayerSpec:
    """The :class:`LayerSpec` of a preset."""
    return PRESETS[check_preset(name)][0]


@checked
def multihead_attention(
    x: Tensor, w: LayerWeights, kernel: KernelPlan, d_qk: float, need_min: bool = False
) -> tuple[Tensor, Tensor | None]:
    """``Attn(X) = sum_h A_h X W_V,h W_O,h`` (``W_O = None``: mean over heads).

    x: [b, n, d] -> ([b, n, d], smallest attention weight on an edge [b] or None).
    """
    b, n, d = x.shape
    h, _, e = w.w_q.shape
    if e == w.w_v.shape[-1]:
        # one batched matmul [1, bn, d] x [3h, d, e] -> [3h, bn, e]: q, k, v come out contiguous
        stacked = torch.cat([w.w_q, w.w_k, w.w_v], dim=0)
        qkv = torch.matmul(x.reshape(1, b * n, d), stacked).view(3, h, b, n, e).transpose(1, 2)
        q, k, v = qkv[0], qkv[1], qkv[2]  # [b, h, n, e]
    else:
        fused = torch.cat([w.w_q, w.w_k, w.w_v], dim=2)  # [h, d, 2e + d]
        qkv = torch.einsum("bnd,hdf->bhnf", x, fused)
        q, k, v = qkv[..., :e], qkv[..., e : 2 * e], qkv[..., 2 * e :]
    out, min_w = kernel(q, k, v, d_qk, need_min)  # [b, h, n, d]
    if w.w_o is None:
        y = out[:, 0] if h == 1 else out.mean(dim=1)
    else:
        y = torch.einsum("bhnf,hfd->bnd", out, w.w_o)
    return y, min_w


@checked
def layer_logits(
    x: Tensor, w: LayerWeights, spec: LayerSpec, d_qk: float, rotary: tuple[Tensor, Tensor] | None = None
) -> Tensor:
    """The scores a layer gives before its mask: ``S_h = rot(X' W_Q,h) rot(X' W_K,h)^T / sqrt(d_qk)``
    (``rot`` the rotary embedding of ``rotary`` = ``(cos, sin)`` [n, e], ``core.positions``, or none;
    ``X' = Norm(X)`` for pre- and peri-norm, ``X' = X`` otherwise). x: [b, n, d] -> S: [b, h, n, n].
    RankCollapseError for a spec without attention."""
    _resolved(spec)
    _attends(spec)
    z = norm_of(spec)(x) if _normed_input(spec) else x
    q = z.unsqueeze(1) @ w.w_q  # [b, 1, n, d] @ [h, d, e] -> [b, h, n, e]
    k = z.unsqueeze(1) @ w.w_k
    if rotary is not None:
        q, k = apply_rotary(q, *rotary), apply_rotary(k, *rotary)
    return attention_logits(q, k, d_qk)


@checked
def layer_attention(
    x: Tensor, w: LayerWeights, spec: LayerSpec, mask: Tensor | None, d_qk: float, bias: Tensor | None = None,
    rotary: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """The attention matrices a layer applies to ``x``: ``A_h = softmax_M(S_h + B)`` with the scores
    ``S_h`` of :func:`layer_logits` and ``bias`` B [n, n] or None (the one masked softmax,
    ``core.attention.masked_softmax``, whatever kernel the layer itself runs).

    x: [b, n, d]; mask: bool [n, n] or None (complete) -> A: [b, h, n, n], rows summing to 1. Costs one
    more q, k projection and the dense [b, h, n, n] matrix: for measuring (the cumulative context), not
    for running the layer.
    """
    return masked_softmax(layer_logits(x, w, spec, d_qk, rotary), mask, bias)


@checked
def norm_step(
    x: Tensor, w: LayerWeights, spec: LayerSpec, kernel: KernelPlan, d_qk: float
) -> tuple[Tensor, Tensor]:
    """``(Z, Norm(Z))``: what the layer's first normalisation receives and returns.

    Post-norm: ``Z = X + lam Attn(X)`` (``Z = Attn(X)`` without a skip), so ``Norm(Z) = X(t+1)`` unless an
    MLP follows; pre- and peri-norm: ``Z = X``; nGPT: ``Z = Attn(X)``; Mix-LN: its layer's own
    (``spec.at(t, layers)``). x: [b, n, d] -> two [b, n, d]. Costs the layer's attention once more:
    for measuring (the one-step ranks around the norm, ``metrics.affine``), not for running the layer.
    RankCollapseError for a spec without a norm.
    """
    if spec.norm == "none":
        raise RankCollapseError("norm_step needs a layer with a normalisation; this spec has norm 'none'")
    _resolved(spec)
    _attends(spec)
    norm = norm_of(spec)
    if _normed_input(spec):
        return x, norm(x)
    y, _ = multihead_attention(x, w, kernel, d_qk)
    z = y if spec.skip is None or spec.placement == "ngpt" else x + spec.skip * y
    return z, norm(z)


def mlp(x: Tensor, w_1: Tensor, w_2: Tensor) -> Tensor:
    """``GELU(x W_1) W_2``. x: [b, n, d]; w_1: [d, m]; w_2: [m, d] -> [b, n, d]."""
    return torch.nn.functional.gelu(x @ w_1) @ w_2


def _normed_input(spec: LayerSpec) -> bool:
    """Whether the sublayer reads ``Norm(X)`` (pre, peri) rather than ``X`` (post, ngpt)."""
    return spec.placement in ("pre", "peri")


def _resolved(spec: LayerSpec) -> None:
    """RankCollapseError for a spec whose assembly depends on the depth (``mix``, ``pre+lns``: resolve it
    first)."""
    if spec.placement in ("mix", "pre+lns"):
        raise RankCollapseError(f"placement {spec.placement!r} changes with depth: apply spec.at(t, layers), "
                                "the layer's own")


def _attends(spec: LayerSpec) -> None:
    """RankCollapseError for a spec without attention (the attention's scores, weights or norm step)."""
    if not spec.attention:
        raise RankCollapseError("this layer has no attention (an MLP-only spec, attention=False): it has no "
                                "attention scores, weights or attention norm step")


def norm_of(spec: LayerSpec) -> Callable[[Tensor], Tensor]:
    """The spec's norm as a function of x [..., n, d]: ``core.norms.get_norm(spec.norm)``, with DyT's
    ``dyt_alpha`` where given and times a resolved LayerNorm-Scaling layer's ``norm_scale`` where set."""
    base = get_norm(spec.norm)
    if spec.norm == "dyt" and spec.dyt_alpha is not None:
        alpha = spec.dyt_alpha
        base = functools.partial(dyt, alpha=alpha)
    scale = spec.norm_scale
    if scale is None:
        return base
    return lambda x: scale * base(x)


def _sublayer(
    x: Tensor, f: Callable[[Tensor], Tensor], norm: Callable[[Tensor], Tensor], spec: LayerSpec
) -> Tensor:
    """One sublayer ``f`` with the spec's norm placement and skip (module docstring)."""
    if spec.placement == "ngpt":
        step = NGPT_STEP if spec.ngpt_step is None else spec.ngpt_step
        return norm(x + step * (norm(f(x)) - x))
    if spec.placement == "post":
        y = f(x)
        return norm(y if spec.skip is None else x + spec.skip * y)
    y = f(norm(x))
    if spec.placement == "peri":
        y = norm(y)
    return y if spec.skip is None else x + spec.skip * y


@checked
def apply_layer(
    x: Tensor, w: LayerWeights, spec: LayerSpec, kernel: KernelPlan, d_qk: float, need_min: bool = False
) -> tuple[Tensor, Tensor | None]:
    """One layer ``X(t) -> X(t+1)`` (module docstring). x: [b, n, d] -> ([b, n, d], min weight or None).
    A ``mix`` spec is resolved to its layer's first (``spec.at(t, layers)``): RankCollapseError otherwise."""
    _resolved(spec)
    norm = norm_of(spec)
    min_w: list[Tensor | None] = [None]

    def attn(z: Tensor) -> Tensor:
        y, min_w[0] = multihead_attention(z, w, kernel, d_qk, need_min)
        return y

    if spec.attention:
        x = _sublayer(x, attn, norm, spec)
    if spec.mlp:
        if w.w_1 is None or w.w_2 is None:
            raise RankCollapseError("this layer spec has an MLP but the weights have none")
        w_1, w_2 = w.w_1, w.w_2
        x = _sublayer(x, lambda z: mlp(z, w_1, w_2), norm, spec)
    return x, min_w[0]
