"""How far a layer moves the tokens: a measure of two token matrices, the state before a layer and after it.

``token_speed(X(t-1), X(t)) = 1/n sum_i ||u_i(t) - u_i(t-1)||``, ``u_i = x_i / ||x_i||``: the mean over
tokens of the chord ``2 sin(theta_i / 2)`` of the angle ``theta_i`` the layer turned token i's direction by
(0: every direction kept; 2: every token reversed). Directions only: a norm's rescaling (LayerNorm's radius
sqrt(d) against unit inputs) or a residual stream's growth is no move. Karagodin et al. 2025 (arXiv
2510.22026) read "how fast tokens move" as particles on the sphere across norm placements; this is our
reading of that speed, their text being known from the abstract only. The simulator's opt-in column
(``SimulationConfig(metrics=("token_speed", ...))``): row t is the move of layer t, NaN at row 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked

#: The simulator's opt-in per-sample columns of a layer's move (never part of ``metrics=None``).
SPEED_NAMES: tuple[str, ...] = ("token_speed",)


@checked
def token_speed(before: Tensor, after: Tensor) -> Tensor:
    """``1/n sum_i ||after_i / ||after_i|| - before_i / ||before_i|| ||``.

    before, after: [..., n, d] -> [...].

    A token of length 0 (before or after) has no direction: the sample's speed is NaN (never inf).
    RankCollapseError when the shapes differ.
    """
    if before.shape != after.shape:
        raise RankCollapseError(f"token_speed needs two token sets of one shape, got {tuple(before.shape)} "
                                f"and {tuple(after.shape)}")
    move = torch.linalg.vector_norm(_directions(after) - _directions(before), dim=-1)
    return move.mean(dim=-1)


def _directions(x: Tensor) -> Tensor:
    """``x_i / ||x_i||`` per token, NaN for a token of length 0. [..., n, d]."""
    length = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return torch.where(length > 0, x / torch.where(length > 0, length, 1), torch.nan)


@checked
def speed_columns(before: Tensor | None, after: Tensor, names: tuple[str, ...]) -> dict[str, Tensor]:
    """The :data:`SPEED_NAMES` columns in ``names`` of the move ``before`` -> ``after`` ([b, n, d] each;
    ``before`` None at row 0: NaN) -> {name: [b]}."""
    out: dict[str, Tensor] = {}
    for name in names:
        if name != "token_speed":
            raise RankCollapseError(f"unknown speed column {name!r}; allowed: {', '.join(SPEED_NAMES)}")
        out[name] = (torch.full(after.shape[:-2], float("nan"), dtype=after.dtype, device=after.device)
                     if before is None else token_speed(before, after))
    return out
