"""Normalisations: definitions and the zero-token error."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.norms import get_norm, layer_norm, rms_norm, sphere_normalize
from rankcollapse.edge.errors import RankCollapseError


def test_sphere_puts_tokens_on_unit_sphere_and_refuses_zero_tokens() -> None:
    x = torch.randn(3, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = sphere_normalize(x)
    assert torch.allclose(y.norm(dim=-1), torch.ones(3, 5, dtype=torch.float64))
    assert torch.allclose(y * x.norm(dim=-1, keepdim=True), x)
    x[1, 2] = 0
    with pytest.raises(RankCollapseError, match="zero token"):
        sphere_normalize(x)


def test_layer_norm_matches_torch_module_with_affine() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 8, dtype=torch.float64, generator=g)
    mod = torch.nn.LayerNorm(8, dtype=torch.float64)
    with torch.no_grad():
        mod.weight.copy_(torch.randn(8, generator=g))
        mod.bias.copy_(torch.randn(8, generator=g))
        assert torch.allclose(layer_norm(x, mod.weight, mod.bias), mod(x))
    y = layer_norm(x)
    assert torch.allclose(y.mean(-1), torch.zeros(2, 6, dtype=torch.float64), atol=1e-12)


def test_rms_norm_definition() -> None:
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    assert torch.allclose(rms_norm(x, eps=0.0), x / (12.5**0.5))
    assert torch.allclose(rms_norm(x, torch.tensor([2.0, 1.0], dtype=torch.float64), eps=0.0),
                          torch.tensor([[6.0, 4.0]], dtype=torch.float64) / 12.5**0.5)


def test_unknown_norm_is_a_user_error() -> None:
    with pytest.raises(RankCollapseError, match="allowed"):
        get_norm("batchnorm")
