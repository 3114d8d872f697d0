"""The additive bias of core.attention's one masked softmax, against a plain reference loop."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.attention import attention_weights, masked_softmax
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import decay_bias


def reference(s: torch.Tensor, m: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``A[i, j] = exp(S_ij + B_ij) / sum_{k: M_ik} exp(S_ik + B_ik)``, one entry at a time."""
    n = s.shape[-1]
    out = torch.zeros_like(s)
    for i in range(n):
        z = sum(math.exp(float(s[i, k] + b[i, k])) for k in range(n) if m[i, k])
        for j in range(n):
            out[i, j] = math.exp(float(s[i, j] + b[i, j])) / z if m[i, j] else 0.0
    return out


@pytest.mark.parametrize("mask", ["causal", "complete", "window"])
def test_a_bias_enters_the_softmax_as_the_plain_formula_says(mask: str) -> None:
    g = torch.Generator().manual_seed(3)
    n = 7
    s = torch.randn(n, n, generator=g, dtype=torch.float64)
    b = torch.randn(n, n, generator=g, dtype=torch.float64)
    idx = torch.arange(n)
    m = {"causal": idx[:, None] >= idx[None, :], "complete": torch.ones(n, n, dtype=torch.bool),
         "window": (idx[:, None] - idx[None, :]).abs() <= 2}[mask]
    got = masked_softmax(s, None if mask == "complete" else m, b)
    assert torch.allclose(got, reference(s, m, b), atol=1e-14, rtol=0)


def test_the_decay_bias_is_a_per_distance_factor_exp_minus_m_on_uniform_logits() -> None:
    n, m = 9, 0.7
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    a = masked_softmax(torch.zeros(n, n, dtype=torch.float64), causal, decay_bias(n, m))
    i = n - 1
    ratios = a[i, 1:i + 1] / a[i, :i]  # one step closer to the token: a factor e^m
    assert torch.allclose(ratios, torch.full_like(ratios, math.exp(m)), rtol=1e-12)


def test_attention_weights_passes_the_bias_and_broadcasts_it_over_batch_and_heads() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    b = decay_bias(5, 0.3)
    a = attention_weights(q, k, None, 4.0, b)
    plain = torch.softmax(q @ k.transpose(-1, -2) / 2.0 + b, dim=-1)
    assert torch.allclose(a, plain, atol=1e-14, rtol=0)


def test_a_bias_of_the_wrong_shape_or_infinite_on_an_allowed_key_is_one_line() -> None:
    s = torch.zeros(4, 4, dtype=torch.float64)
    with pytest.raises(RankCollapseError, match="does not broadcast"):
        masked_softmax(s, None, torch.zeros(3, 3, dtype=torch.float64))
    bad = torch.zeros(4, 4, dtype=torch.float64)
    bad[2, 1] = -math.inf
    with pytest.raises(RankCollapseError, match="finite on every allowed key"):
        masked_softmax(s, None, bad)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    above = torch.zeros(4, 4, dtype=torch.float64)
    above[0, 3] = -math.inf  # on a masked key: allowed
    assert torch.isfinite(masked_softmax(s, causal, above)).all()
