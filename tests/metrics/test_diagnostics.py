"""Diagnostics next to collapse on closed forms: entropy, sinks, first-token norm, massive activations."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.attention import masked_softmax
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics import (
    SINK_THRESHOLD,
    attention_entropy,
    first_token_attention,
    first_token_norm,
    massive_ratio,
    normalized_attention_entropy,
    sink_rate,
    top_activations,
)
from rankcollapse.metrics import diagnostics as dg


def _uniform(mask: torch.Tensor) -> torch.Tensor:
    """Uniform attention over the allowed keys of each row: [1, 1, n, n] float64."""
    m = mask.to(torch.float64)
    return (m / m.sum(-1, keepdim=True))[None, None]


def test_uniform_complete_attention_has_entropy_log_n_and_normalised_one() -> None:
    n = 7
    attn = _uniform(torch.ones(n, n, dtype=torch.bool))
    assert attention_entropy(attn).item() == pytest.approx(math.log(n), abs=1e-14)
    assert normalized_attention_entropy(attn).item() == pytest.approx(1.0, abs=1e-14)


def test_uniform_causal_attention_has_entropy_log_factorial_over_n() -> None:
    n = 9
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    attn = _uniform(mask)
    assert attention_entropy(attn).item() == pytest.approx(math.lgamma(n + 1) / n, abs=1e-13)
    # query 0 has one key: left out of the normalised mean; every other row is uniform -> 1
    assert normalized_attention_entropy(attn, mask).item() == pytest.approx(1.0, abs=1e-14)
    # without the mask the normaliser is log n for every row
    expected = sum(math.log(i + 1) / math.log(n) for i in range(n)) / n
    assert normalized_attention_entropy(attn).item() == pytest.approx(expected, abs=1e-13)


def test_one_hot_attention_has_zero_entropy_and_two_point_rows_the_binary_entropy() -> None:
    attn = torch.eye(5, dtype=torch.float64)[None, None]
    assert attention_entropy(attn).item() == 0.0
    assert normalized_attention_entropy(attn).item() == 0.0
    p = 0.2
    rows = torch.zeros(1, 2, 3, 4, dtype=torch.float64)
    rows[..., 0], rows[..., 1] = p, 1 - p
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert torch.allclose(attention_entropy(rows), torch.full((1, 2), h, dtype=torch.float64), atol=1e-15)
    assert torch.allclose(normalized_attention_entropy(rows), torch.full((1, 2), h / math.log(4),
                                                                         dtype=torch.float64), atol=1e-15)


def test_normalised_entropy_is_nan_when_no_query_has_a_choice() -> None:
    attn = torch.ones(1, 1, 3, 1, dtype=torch.float64)
    assert math.isnan(normalized_attention_entropy(attn).item())


def test_sink_rate_counts_heads_above_the_threshold_strictly() -> None:
    n = 4
    attn = torch.zeros(2, 4, n, n, dtype=torch.float64)
    shares = torch.tensor([[0.5, 0.2, 0.3, 0.9], [0.0, 0.0, 0.0, 0.31]], dtype=torch.float64)
    attn[..., 0] = shares[..., None]
    attn[..., 1] = 1 - shares[..., None]
    assert torch.allclose(first_token_attention(attn), shares)
    assert sink_rate(attn).tolist() == [0.5, 0.25]  # 0.3 itself is not above the default 0.3
    assert SINK_THRESHOLD == 0.3
    assert sink_rate(attn, threshold=0.1).tolist() == [1.0, 0.25]
    assert sink_rate(attn, threshold=0.95).tolist() == [0.0, 0.0]


def test_first_token_norm_is_the_euclidean_norm_of_token_zero() -> None:
    x = torch.zeros(2, 3, 2, dtype=torch.float64)
    x[0, 0] = torch.tensor([3.0, 4.0])
    x[1, 0] = torch.tensor([-5.0, 12.0])
    x[:, 1:] = 100.0
    assert first_token_norm(x).tolist() == [5.0, 13.0]


def test_massive_activation_is_top_k_and_ratio_to_the_median() -> None:
    x = torch.ones(1, 10, 10, dtype=torch.float64)
    x[0, 0, 3] = -2000.0
    x[0, 5, 7] = 300.0
    assert top_activations(x, k=3).tolist() == [[2000.0, 300.0, 1.0]]
    assert massive_ratio(x).item() == 2000.0
    assert math.isnan(massive_ratio(torch.zeros(1, 2, 2)).item())
    y = torch.zeros(1, 3, 1)
    y[0, 0, 0] = 1.0
    assert massive_ratio(y).item() == math.inf


@pytest.mark.parametrize("call", [
    lambda: attention_entropy(torch.ones(2, 3)),
    lambda: attention_entropy([[1.0]]),
    lambda: sink_rate(torch.ones(1, 1, 2, 2), threshold=1.5),
    lambda: top_activations(torch.ones(1, 2, 2), k=5),
    lambda: first_token_norm(torch.ones(2, 2, dtype=torch.int64)),
    lambda: normalized_attention_entropy(torch.ones(1, 1, 2, 2), torch.ones(3, 3, dtype=torch.bool)),
])
def test_bad_inputs_are_one_line_errors(call) -> None:
    with pytest.raises(RankCollapseError) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("mask_kind", ["none", "causal", "per-sample"])
def test_attention_rows_of_row_blocks_give_the_whole_maps_diagnostics(mask_kind) -> None:
    """The per-query reductions of blocks of query rows (4 + 4 + 3 of 11, as a chunked layer forms
    them), concatenated, give the functions of the whole map (to the rounding of a mean over a strided
    column against a contiguous one)."""
    g = torch.Generator().manual_seed(0)
    n = 11
    mask = {"none": None, "causal": torch.ones(n, n, dtype=torch.bool).tril(),
            "per-sample": torch.rand(2, 1, n, n, generator=g) > 0.5}[mask_kind]
    if mask is not None:
        mask = mask | torch.eye(n, dtype=torch.bool)
    attn = masked_softmax(torch.randn(2, 3, n, n, dtype=torch.float64, generator=g) * 3, mask)
    blocks = [dg.attention_rows(attn[:, :, i:i + 4], None if mask is None else mask[..., i:i + 4, :])
              for i in range(0, n, 4)]
    rows = dg.AttentionRows.cat(blocks)
    assert rows.entropy.shape == (2, 3, n) and rows.keys.shape == (2, 1, n)
    close = {"rtol": 1e-14, "atol": 1e-16}
    torch.testing.assert_close(rows.attention_entropy(), dg.attention_entropy(attn), **close)
    want = dg.normalized_attention_entropy(attn, mask)
    torch.testing.assert_close(rows.normalized_attention_entropy(), want, **close)
    torch.testing.assert_close(rows.first_token_attention(), dg.first_token_attention(attn), **close)
    assert torch.equal(rows.sink_rate(0.2), dg.sink_rate(attn, 0.2))
    cut = rows.take([1], 6)  # a right-padded sample of 6 real tokens: its first 6 queries
    assert torch.equal(cut.first, attn[1:, :, :6, 0])
