"""The sampled mean |cos| of long contexts (issue 28): row means against a plain loop, the estimate
unbiased with a calibrated standard error, and the switch between every pair and a sample."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.draws import distinct_indices
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics import (
    COS_SE,
    SAMPLED_COS_FROM,
    abs_cos_row_means,
    collapse_metrics,
    mean_abs_cos,
    measured_names,
    per_sample_metrics,
    sampled_mean_abs_cos,
)


def _tokens(b: int, n: int, d: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, n, d, generator=g, dtype=torch.float64)
    x = x + torch.randn(d, generator=g, dtype=torch.float64)
    x[:, 3] = 0.0  # a zero token: cosine 0 with every token
    return x


def test_row_means_equal_a_plain_loop_and_average_to_every_pair() -> None:
    x = _tokens(2, 40, 7)
    rows = torch.tensor([0, 3, 5, 39])
    got = abs_cos_row_means(x, rows)
    for s in range(2):
        for k, i in enumerate(rows.tolist()):
            ni = x[s, i].norm()
            want = 0.0
            for j in range(40):
                nj = x[s, j].norm()
                if j != i and ni > 0 and nj > 0:
                    want += abs(float(x[s, i] @ x[s, j] / (ni * nj)))
            assert got[s, k].item() == pytest.approx(want / 39, abs=1e-13)
    every = abs_cos_row_means(x, torch.arange(40)).mean(-1)
    assert torch.allclose(every, mean_abs_cos(x), atol=1e-14, rtol=0)


@pytest.mark.parametrize("rows", [torch.tensor([1, 1]), torch.tensor([40]), torch.tensor([-1]),
                                  torch.tensor([], dtype=torch.long)])
def test_row_means_refuse_rows_that_are_not_distinct_tokens(rows: torch.Tensor) -> None:
    with pytest.raises(RankCollapseError, match="distinct token indices"):
        abs_cos_row_means(_tokens(1, 40, 4), rows)


def test_distinct_indices_are_distinct_sorted_and_every_token_is_drawn_alike() -> None:
    g = torch.Generator().manual_seed(1)
    counts = torch.zeros(10)
    for _ in range(2000):
        idx = distinct_indices(10, 3, g)
        assert idx.unique().numel() == 3 and bool((idx[1:] > idx[:-1]).all())
        counts[idx] += 1
    # each token drawn with probability 3/10: 600 of 2000, binomial sd about 20.5
    assert bool(((counts - 600).abs() < 5 * 20.5).all())
    assert distinct_indices(4, 9, g).tolist() == [0, 1, 2, 3]


def test_a_sample_of_every_token_is_the_exact_mean_with_no_error() -> None:
    x = _tokens(3, 30, 5)
    estimate, se = sampled_mean_abs_cos(x, 30, torch.Generator().manual_seed(0))
    assert torch.allclose(estimate, mean_abs_cos(x), atol=1e-14, rtol=0)
    assert bool((se == 0).all())


def test_the_estimate_is_unbiased_and_its_standard_error_is_calibrated() -> None:
    """Over 400 draws of 20 of 200 rows: the draws' mean within 4 standard errors of the exact mean,
    and the reported standard error within 25 % of the draws' spread (its expected ratio is 1)."""
    x = _tokens(2, 200, 6, seed=3)
    x[:, :20] *= -1.0  # structure along the positions, as a sink or a prompt gives
    exact = mean_abs_cos(x)
    draws = [sampled_mean_abs_cos(x, 20, torch.Generator().manual_seed(s)) for s in range(400)]
    est = torch.stack([e for e, _ in draws])
    se = torch.stack([s for _, s in draws])
    spread = est.std(dim=0)
    assert bool(((est.mean(dim=0) - exact).abs() < 4 * spread / 20).all())
    ratio = se.mean(dim=0) / spread
    assert bool(((ratio > 0.8) & (ratio < 1.25)).all()), ratio


def test_collapse_metrics_samples_only_from_its_threshold_and_adds_the_error_column() -> None:
    names = ("mu", "mean_abs_cos")
    assert measured_names(names) == names
    assert measured_names(names, 8) == ("mu", "mean_abs_cos", COS_SE)
    assert measured_names(("mu",), 8) == ("mu",)
    short = _tokens(2, SAMPLED_COS_FROM * 8 - 1, 5).to(torch.float32)
    assert tuple(collapse_metrics(short, names)) == names  # no cos_rows: as before
    got = collapse_metrics(short, names, cos_rows=8)
    assert torch.equal(got["mean_abs_cos"], mean_abs_cos(short)) and bool((got[COS_SE] == 0).all())
    long = _tokens(2, SAMPLED_COS_FROM * 8, 5).to(torch.float32)
    first = collapse_metrics(long, names, cos_rows=8, cos_seed=4)
    again = collapse_metrics(long, names, cos_rows=8, cos_seed=4)
    assert torch.equal(first["mean_abs_cos"], again["mean_abs_cos"])  # the same rows for one seed and n
    assert bool((first[COS_SE] > 0).all())
    assert bool(((first["mean_abs_cos"] - mean_abs_cos(long)).abs() < 6 * first[COS_SE]).all())
    per = per_sample_metrics(long, names, cos_rows=8, cos_seed=4)
    assert tuple(per) == ("mu", "mean_abs_cos", COS_SE)
    assert torch.allclose(per["mean_abs_cos"], first["mean_abs_cos"].double())


def test_sampled_mean_abs_cos_refuses_fewer_than_two_rows() -> None:
    with pytest.raises(RankCollapseError, match="rows must be"):
        sampled_mean_abs_cos(_tokens(1, 10, 3), 1, torch.Generator())
