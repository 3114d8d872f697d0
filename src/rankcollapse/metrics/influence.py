"""The shape of an influence profile: how much its two ends weigh against its middle.

An influence profile ``p: [..., n]`` is one row of the cumulative context ``P(t)[i, :]``
(:mod:`rankcollapse.metrics.rollout`): how much each input position ``j`` contributes to token ``i``.
With ``k`` positions at each end (``1 <= k`` and ``2 k < n``), the three parts are the *start*
``j < k``, the *middle* ``k <= j < n - k`` and the *end* ``j >= n - k``; each is weighed by its mean
influence per position (so the parts of different sizes compare as densities):

=========================== ==============================================================
``start_over_middle_log``   ``log( mean_{j<k} p_j / mean_{k<=j<n-k} p_j )``
``end_over_middle_log``     ``log( mean_{j>=n-k} p_j / mean_{k<=j<n-k} p_j )``
=========================== ==============================================================

A U-shaped profile (the "lost in the middle" shape; Herasimchyk et al., arXiv 2602.16837, Wu et al.,
arXiv 2502.01951) has both above 0; a profile falling from the first token has the start above 0 and
the end below; a uniform profile has both 0. Each mean is clamped from below at the smallest normal
number of float64, so a part that is exactly 0 gives a finite (very negative or very positive) log.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError

#: The two end-over-middle columns of a profile, in this order.
INFLUENCE_SHAPE_NAMES: tuple[str, ...] = ("start_over_middle_log", "end_over_middle_log")


def check_ends(ends: object, n: int) -> int:
    """``ends`` as a count of positions at each end of an ``n``-position profile (``1 <= k``, ``2 k < n``)."""
    if isinstance(ends, bool) or not isinstance(ends, int) or ends < 1 or 2 * ends >= n:
        raise RankCollapseError(
            f"ends={ends!r} is invalid for n = {n} positions; allowed: an integer k with 1 <= k and 2 k < n"
        )
    return ends


def end_over_middle_logs(profile: Tensor, ends: int) -> dict[str, Tensor]:
    """``start_over_middle_log`` and ``end_over_middle_log`` (module docstring) of ``profile [..., n]``
    -> ``{name: [...]}`` in float64."""
    if not isinstance(profile, Tensor) or profile.ndim < 1 or not profile.is_floating_point():
        raise RankCollapseError("profile must be a floating-point torch tensor [..., n]")
    n = int(profile.shape[-1])
    k = check_ends(ends, n)
    p = profile.to(torch.float64)
    tiny = torch.finfo(torch.float64).tiny
    start = p[..., :k].mean(-1).clamp_min(tiny)
    middle = p[..., k : n - k].mean(-1).clamp_min(tiny)
    end = p[..., n - k :].mean(-1).clamp_min(tiny)
    return {
        "start_over_middle_log": torch.log(start) - torch.log(middle),
        "end_over_middle_log": torch.log(end) - torch.log(middle),
    }


#: The peak of a profile over the distance back from its token (:func:`profile_peak`), in this order.
PEAK_NAMES: tuple[str, ...] = ("peak_distance", "peak_over_self_log", "peak_over_far_log")


def profile_peak(profile: Tensor) -> dict[str, Tensor]:
    """Where the last token's profile ``p = P(t)[n - 1, :]`` ([..., n], ``n >= 3``) peaks over the distance
    ``x = n - 1 - j`` back from the token, the first token (``j = 0``, the sink that gathers the tail) left
    out, so ``x`` runs over ``0 .. n - 2``:

    ========================= ====================================================================
    ``peak_distance``         ``x_hat = argmax_{0 <= x <= n-2} p(x)`` (the nearest on a tie)
    ``peak_over_self_log``    ``log(p(x_hat) / p(0))``: how far it rises from the token itself, >= 0
    ``peak_over_far_log``     ``log(p(x_hat) / p(n - 2))``: how far it falls to position 1, >= 0
    ========================= ====================================================================

    A non-monotone profile (Wu et al. 2025's decay mask) has both logs above 0; a profile falling from the
    token has ``peak_over_self_log = 0``, one rising to the start ``peak_over_far_log = 0``. Each value is
    clamped from below at the smallest normal float64. -> ``{name: [...]}`` in float64.
    """
    if not isinstance(profile, Tensor) or profile.ndim < 1 or not profile.is_floating_point():
        raise RankCollapseError("profile must be a floating-point torch tensor [..., n]")
    n = int(profile.shape[-1])
    if n < 3:
        raise RankCollapseError(f"profile has n = {n} positions; allowed: n >= 3 (the first token left out)")
    tiny = torch.finfo(torch.float64).tiny
    by_distance = profile.to(torch.float64)[..., 1:].flip(-1).clamp_min(tiny)  # [..., n - 1], x = 0 .. n - 2
    where = by_distance.argmax(dim=-1)  # the first maximum: the nearest distance on a tie
    top = by_distance.gather(-1, where.unsqueeze(-1)).squeeze(-1)
    return {
        "peak_distance": where.to(torch.float64),
        "peak_over_self_log": torch.log(top) - torch.log(by_distance[..., 0]),
        "peak_over_far_log": torch.log(top) - torch.log(by_distance[..., -1]),
    }
