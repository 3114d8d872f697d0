"""Every fast attention path agrees with the dense masked reference."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.dynamics.kernels import attend_dense, band_of_dense, plan_band, plan_kernel
from rankcollapse.edge.errors import RankCollapseError


def band_mask(n: int, lo: int, hi: int) -> torch.Tensor:
    idx = torch.arange(n)
    diff = idx.view(1, n) - idx.view(n, 1)
    return (diff >= lo) & (diff <= hi)


def qkv(n: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, n, 4, generator=g, dtype=dtype)
    k = torch.randn(2, 3, n, 4, generator=g, dtype=dtype)
    v = torch.randn(2, 3, n, 5, generator=g, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize(
    ("n", "lo", "hi", "block"),
    [(37, -3, 3, None), (64, -1, 0, None), (50, -8, 8, 16), (33, 0, 2, None), (40, -2, 5, 7), (5, -1, 1, 16)],
)
def test_band_kernel_matches_dense_reference(n: int, lo: int, hi: int, block: int | None) -> None:
    m = band_mask(n, lo, hi)
    q, k, v = qkv(n)
    ref, ref_min = attend_dense(q, k, v, m, 0.7, need_min=True)
    plan = plan_kernel(m, kernel="band", block=block)
    assert plan.name == "band"
    out, out_min = plan(q, k, v, 0.7, True)
    assert torch.allclose(out, ref, rtol=0, atol=1e-13)
    assert out_min is not None and ref_min is not None
    assert torch.allclose(out_min, ref_min, rtol=1e-12, atol=0)
    fast, none = plan(q, k, v, 0.7, False)
    assert none is None and torch.equal(fast, out)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_matches_dense_reference(causal: bool) -> None:
    n = 29
    m = band_mask(n, -(n - 1), 0 if causal else n - 1)
    q, k, v = qkv(n, 1)
    ref, _ = attend_dense(q, k, v, m, 2.0)
    plan = plan_kernel(m)
    assert plan.name == ("sdpa-causal" if causal else "sdpa")
    out, _ = plan(q, k, v, 2.0)
    assert torch.allclose(out, ref, rtol=0, atol=1e-13)
    out32, _ = plan(*(t.float() for t in (q, k, v)), 2.0)
    assert torch.allclose(out32.double(), ref, atol=1e-5)


def test_auto_choice_per_mask_kind() -> None:
    n = 64
    assert plan_kernel(torch.ones(n, n, dtype=torch.bool)).name == "sdpa"
    assert plan_kernel(band_mask(n, -4, 4)).name == "band"
    assert plan_kernel(band_mask(n, -1, 0)).name == "band"
    assert plan_kernel(band_mask(n, -40, 40)).name == "dense"  # too wide to pay off
    block = torch.block_diag(*[torch.ones(8, 8)] * 8).bool()
    assert plan_kernel(block).name == "dense"
    assert band_of_dense(block) is None
    assert band_of_dense(band_mask(n, -3, 1)) == (-3, 1)


def test_bad_kernel_requests_fail_loudly() -> None:
    block = torch.block_diag(*[torch.ones(4, 4)] * 4).bool()
    with pytest.raises(RankCollapseError, match="band"):
        plan_kernel(block, kernel="band")
    with pytest.raises(RankCollapseError, match="sdpa"):
        plan_kernel(block, kernel="sdpa")
    with pytest.raises(RankCollapseError, match="unknown kernel"):
        plan_kernel(block, kernel="flash")
    with pytest.raises(RankCollapseError, match="self-loops"):
        plan_kernel(~torch.eye(4, dtype=torch.bool))
    with pytest.raises(RankCollapseError, match="self-loop"):
        plan_band(8, 1, 2)
