"""Does the attention a model actually computes respect the mask it should have? (per layer)

Given attention weights ``attn: [b, h, i, j]`` (e.g. Hugging Face ``output_attentions=True`` with
the eager implementation) and the mask ``M`` that layer should apply, the *observed support* is
``S[i, j] = any_{b, h} attn[b, h, i, j] > 0``. Two kinds of disagreement, counted in pairs:

- ``outside``: ``S`` and not ``M``: the layer attends where it must not (a leak: a window that is too
  wide, a causal mask that is missing);
- ``zero_inside``: ``M`` and not ``S``: a pair the mask allows gets exactly zero weight in every
  sample and head (a window that is too narrow, an off-by-one; softmax weights on allowed pairs are
  positive unless the logits differ by more than the dtype's exponent range, ~87 in float32).

``matches`` iff both are 0. The first few disagreeing pairs are listed (query, key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.base import Mask
from rankcollapse.masks.schedule import MaskSchedule, parse_schedule
from rankcollapse.masks.spec import parse_mask

EXAMPLES = 5


@dataclass(frozen=True)
class SupportCheck:
    """One layer's comparison (module docstring); pairs as ``(query i, key j)``."""

    layer: int | None
    spec: str
    n: int
    outside: int
    zero_inside: int
    outside_examples: list[tuple[int, int]]
    zero_inside_examples: list[tuple[int, int]]

    @property
    def matches(self) -> bool:
        return self.outside == 0 and self.zero_inside == 0

    def describe(self) -> str:
        where = f"layer {self.layer}" if self.layer is not None else "attention"
        if self.matches:
            return f"{where}: support equals {self.spec} (n = {self.n})"
        return (f"{where}: support differs from {self.spec}: {self.outside} pairs attended outside the mask "
                f"(e.g. {self.outside_examples}), {self.zero_inside} allowed pairs never attended "
                f"(e.g. {self.zero_inside_examples})")


def observed_support(attn: Any) -> np.ndarray:
    """``S [i, j]`` (bool numpy): some sample and head puts positive weight on ``(i, j)``."""
    if type(attn).__module__.startswith("torch"):
        attn = attn.detach().cpu().double().numpy()
    attn = np.asarray(attn)
    if attn.ndim != 4 or attn.shape[-1] != attn.shape[-2] or attn.shape[-1] < 1:
        raise RankCollapseError(f"attention has shape {tuple(attn.shape)}; allowed: [b, h, n, n]")
    return (attn > 0).any(axis=(0, 1))


def check_support(attn: Any, mask: Mask | str, layer: int | None = None) -> SupportCheck:
    """Compare one layer's attention ``[b, h, n, n]`` with the mask it should apply."""
    support = observed_support(attn)
    n = support.shape[0]
    m = parse_mask(mask)
    allowed = m.dense_numpy(n)
    outside, zero = support & ~allowed, allowed & ~support
    return SupportCheck(
        layer=layer,
        spec=m.spec,
        n=n,
        outside=int(outside.sum()),
        zero_inside=int(zero.sum()),
        outside_examples=[(int(i), int(j)) for i, j in np.argwhere(outside)[:EXAMPLES]],
        zero_inside_examples=[(int(i), int(j)) for i, j in np.argwhere(zero)[:EXAMPLES]],
    )


def check_schedule_support(
    attentions: list[Any] | tuple[Any, ...], schedule: MaskSchedule | str
) -> list[SupportCheck]:
    """One ``SupportCheck`` per layer: ``attentions[t]`` against layer ``t`` of the schedule.

    The number of attention tensors must equal the schedule's depth (a schedule given as a spec
    is repeated to that depth).
    """
    depth = len(attentions)
    if depth < 1:
        raise RankCollapseError("no attention tensors given; allowed: one [b, h, n, n] tensor per layer")
    sched = parse_schedule(schedule, None if isinstance(schedule, MaskSchedule) else depth)
    if sched.depth != depth:
        raise RankCollapseError(
            f"{depth} attention tensors but the schedule has {sched.depth} layers; allowed: one per layer"
        )
    pairs = zip(attentions, sched.masks, strict=True)
    return [check_support(a, m, layer=t) for t, (a, m) in enumerate(pairs)]
