"""The reductions behind mu and mu_rel run in float64 on float32 data: a float32 run's mu_rel is what
float64 arithmetic gives on the same float32 states, to float32's resolution (issue 42: 1.4e-4 relative
apart at 4,096 tokens with massive activations, when the mean and the sums of squares were float32)."""

from __future__ import annotations

import torch

from rankcollapse.metrics import collapse_metrics, mu, mu_rel


def _massive(n: int = 4096, d: int = 64) -> torch.Tensor:
    """Float32 tokens with a massive activation (one token, one feature: x 3000) and a large shared
    component (a feature at +300 on every token), as pretrained decoders' hidden states have."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, n, d, generator=g)
    x[:, 0, 7] += 3000.0
    x[:, :, 9] += 300.0
    return x


def _float64(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x.double()
    m = torch.linalg.vector_norm(y - y.mean(-2, keepdim=True), dim=(-2, -1))
    return m, m / torch.linalg.vector_norm(y, dim=(-2, -1))


def test_mu_and_mu_rel_of_float32_states_are_float64_arithmetic_on_them() -> None:
    x = _massive()
    m64, rel64 = _float64(x)
    got = collapse_metrics(x, ("mu", "mu_rel", "at_floor"))
    for name, want in (("mu", m64), ("mu_rel", rel64)):
        assert got[name].dtype == torch.float32
        assert float(((got[name].double() - want) / want).abs().max()) <= 3e-7, name
    assert float(((mu(x).double() - m64) / m64).abs().max()) <= 3e-7
    assert float(((mu_rel(x).double() - rel64) / rel64).abs().max()) <= 3e-7


def test_a_nearly_collapsed_float32_matrix_keeps_its_small_mu() -> None:
    """Tokens equal but for a spread 1e-4 of their common size: mu is that spread, not the rounding of
    the float32 mean (its error is taken out exactly)."""
    g = torch.Generator().manual_seed(1)
    base = 100.0 + torch.randn(1, 1, 32, generator=g)
    x = (base + 1e-2 * torch.randn(1, 512, 32, generator=g)).float()
    m64, _ = _float64(x)
    assert float(((mu(x).double() - m64) / m64).abs().max()) <= 1e-5
