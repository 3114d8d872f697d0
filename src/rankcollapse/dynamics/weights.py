"""Random weights and inputs, drawn from explicit ``torch.Generator`` objects.

Everything is drawn on the CPU in float64 and only then cast and moved, so a seed gives the
same numbers whatever the dtype, device or attention kernel of the run.

Value-matrix families (``W_V``: [d, d], row-vector convention ``x -> x W_V``):

- ``gaussian``        entries i.i.d. ``N(0, sigma^2 / d)`` (so ``E||x W_V||^2 = sigma^2 ||x||^2``)
- ``orthogonal``      ``sigma * Q``, Q Haar-distributed (QR of a Gaussian, signs fixed)
- ``identity``        ``I`` (sigma ignored)
- ``scaled-identity`` ``sigma * I``
- user matrices       through ``SimulationConfig.value_matrix``

``W_Q, W_K``: [d, e] entries ``N(0, s^2 / d)``, ``s`` = ``qk_scale`` (``tied_qk``: ``W_K = W_Q``, so
``q_i = k_i`` and a token scores its own content highest). ``W_O`` per head:
``mean`` (``I / h``: the heads are averaged; for one head the paper's ``A X W_V`` exactly) or
``gaussian`` (entries ``N(0, 1 / (h d))``). MLP: ``W_1`` [d, 4d] ``N(0, 2/d)``, ``W_2`` [4d, d]
``N(0, 1/(4d))``, zero biases, GELU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.core.draws import gaussian, haar_orthogonal, hemisphere_tokens, sphere_tokens
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked

VALUE_FAMILIES = ("gaussian", "orthogonal", "identity", "scaled-identity")
OUTPUT_FAMILIES = ("mean", "gaussian")
INPUT_KINDS = ("gaussian", "sphere", "hemisphere", "repeated")

_F64 = torch.float64


@checked
def value_matrix(family: str, d: int, scale: float, generator: torch.Generator) -> Tensor:
    """One value matrix ``W_V`` [d, d] (float64, CPU) of the given family (module docstring)."""
    if family == "gaussian":
        return gaussian((d, d), generator) * (scale / d**0.5)
    if family == "orthogonal":
        return scale * haar_orthogonal(d, generator)
    if family == "identity":
        return torch.eye(d, dtype=_F64)
    if family == "scaled-identity":
        return scale * torch.eye(d, dtype=_F64)
    raise RankCollapseError(f"unknown value family {family!r}; allowed: {', '.join(VALUE_FAMILIES)}")


@dataclass(frozen=True)
class LayerWeights:
    """Weights of one layer (float64 on the CPU until :meth:`to`).

    w_q, w_k: [h, d, e]; w_v: [h, d, d]; w_o: [h, d, d] or None (heads averaged);
    w_1: [d, 4d], w_2: [4d, d] (MLP) or None.
    """

    w_q: Tensor
    w_k: Tensor
    w_v: Tensor
    w_o: Tensor | None = None
    w_1: Tensor | None = None
    w_2: Tensor | None = None

    @property
    def heads(self) -> int:
        return int(self.w_q.shape[0])

    def to(self, dtype: torch.dtype, device: str | torch.device) -> LayerWeights:
        def cast(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(dtype=dtype, device=device)

        return LayerWeights(*(cast(t) for t in (self.w_q, self.w_k, self.w_v, self.w_o, self.w_1, self.w_2)))


@checked
def draw_layer_weights(
    *,
    d: int,
    heads: int,
    qk_dim: int,
    value: str,
    value_scale: float,
    qk_scale: float,
    output: str,
    mlp: bool,
    generator: torch.Generator,
    value_given: Tensor | None = None,
    tied_qk: bool = False,
) -> LayerWeights:
    """Draw one layer's weights, in a fixed order: W_Q, W_K, W_V (per head), W_O, W_1, W_2.

    ``value_given`` ([d, d] or [h, d, d]) replaces the value family when not None. ``tied_qk``: ``W_K =
    W_Q`` (``W_K`` is still drawn, so every later draw is the untied run's).
    """
    w_q = gaussian((heads, d, qk_dim), generator) * (qk_scale / d**0.5)
    w_k = gaussian((heads, d, qk_dim), generator) * (qk_scale / d**0.5)
    if tied_qk:
        w_k = w_q
    if value_given is not None:
        w_v = value_given.to(_F64).expand(heads, d, d).clone()
    else:
        w_v = torch.stack([value_matrix(value, d, value_scale, generator) for _ in range(heads)])
    if output == "mean":
        w_o = None
    elif output == "gaussian":
        w_o = gaussian((heads, d, d), generator) / (heads * d) ** 0.5
    else:
        raise RankCollapseError(f"unknown output family {output!r}; allowed: {', '.join(OUTPUT_FAMILIES)}")
    w_1 = w_2 = None
    if mlp:
        w_1 = gaussian((d, 4 * d), generator) * (2.0 / d) ** 0.5
        w_2 = gaussian((4 * d, d), generator) / (4 * d) ** 0.5
    return LayerWeights(w_q, w_k, w_v, w_o, w_1, w_2)


@checked
def draw_inputs(kind: str, batch: int, n: int, d: int, generator: torch.Generator) -> Tensor:
    """Initial tokens X(0): [batch, n, d] float64 on the CPU.

    ``gaussian``: entries N(0, 1). ``sphere``: Gaussian tokens divided by their norm (uniform on
    the unit sphere). ``hemisphere``: uniform on the open half-sphere ``{x : x_0 > 0}`` (sphere
    tokens with their first coordinate made positive), so ``v = e_0`` has ``<x_i, v> > 0``.
    ``repeated``: one Gaussian token per sample at every position (the same content everywhere: only
    positions, e.g. rotary embeddings, tell the tokens apart; ``A X W_V`` keeps them equal).
    """
    if kind == "gaussian":
        return gaussian((batch, n, d), generator)
    if kind == "sphere":
        return sphere_tokens(batch, n, d, generator)
    if kind == "hemisphere":
        return hemisphere_tokens(batch, n, d, generator)
    if kind == "repeated":
        return gaussian((batch, 1, d), generator).expand(batch, n, d).clone()
    raise RankCollapseError(f"unknown input kind {kind!r}; allowed: {', '.join(INPUT_KINDS)}")
