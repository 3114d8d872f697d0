"""The decay (ALiBi-type) mask's closed forms (Wu et al. 2025): the bias, and the critical point x*."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import decay_bias, decay_critical_distance, decay_uniform_context


def test_the_decay_bias_is_minus_m_times_the_distance() -> None:
    b = decay_bias(5, 0.5)
    assert b[4, 1] == -1.5 and b[1, 4] == -1.5 and bool((b.diagonal() == 0).all())


@pytest.mark.parametrize("t", [2, 4, 8, 16])
@pytest.mark.parametrize("m", [0.25, 0.5, 1.0])
def test_far_from_the_start_the_profile_has_mean_x_star_and_its_mode_just_below(t: int, m: float) -> None:
    """Negative binomial in the distance: mean t q / (1 - q) = t / (e^m - 1) = x*,
    mode floor((tq - 1)/(1 - q)) + 1."""
    n = 400  # the first token's truncation negligible
    p = decay_uniform_context(n, m, t)[-1].flip(0)  # by distance x = 0 .. n - 1
    x = torch.arange(n, dtype=torch.float64)
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)
    assert float((p * x).sum()) == pytest.approx(decay_critical_distance(t, m), rel=1e-9)
    q = math.exp(-m)
    if t * q > 1:
        assert int(p.argmax()) == math.floor((t * q - 1) / (1 - q)) + 1
        assert int(p.argmax()) > 0  # non-monotone: it rises from the token itself


def test_bad_slopes_and_depths_are_one_line() -> None:
    with pytest.raises(RankCollapseError, match="slope"):
        decay_bias(4, -1.0)
    with pytest.raises(RankCollapseError, match="slope"):
        decay_critical_distance(3, 0.0)
    with pytest.raises(RankCollapseError, match="t="):
        decay_uniform_context(4, 0.5, -1)
