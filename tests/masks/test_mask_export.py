"""Exporters (HF 4D, SDPA, FlexAttention mask_mod) and window converters equal the dense form."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.attention.flex_attention import create_mask
from torch.nn.functional import scaled_dot_product_attention

from rankcollapse.core.attention import attention_weights
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.export import (
    from_hf_sliding_window,
    from_longformer_attention_window,
    hf_sliding_window_mask,
    to_flex_mask_mod,
    to_hf_4d,
    to_hf_sliding_window,
    to_sdpa,
)

SPECS = [
    "complete",
    "causal",
    "window:w=2",
    "causal-window:w=3",
    "dilated:w=2,dilation=2",
    "strided:stride=3",
    "block:size=4",
    "prefix:k=3",
    "longformer:w=1,global=2",
    "bigbird:w=1,global=1,random=2,seed=0",
    "sinks:w=2,sinks=1",
    "random:p=0.3,seed=2",
    "causal&window:w=2|block:size=3",
]


@pytest.mark.parametrize("spec", SPECS)
def test_hf_4d_mask_is_zero_where_allowed_and_min_elsewhere(spec: str) -> None:
    n = 11
    dense = parse_mask(spec).dense(n)
    for dtype in (torch.float32, torch.bfloat16):
        hf = to_hf_4d(spec, n, batch=2, dtype=dtype)
        assert hf.shape == (2, 1, n, n) and hf.dtype == dtype
        assert torch.equal(hf[1, 0] == 0, dense)
        assert torch.all(hf[0, 0][~dense] == torch.finfo(dtype).min)


@pytest.mark.parametrize("spec", SPECS)
def test_sdpa_mask_gives_same_attention_as_reference(spec: str) -> None:
    n, d = 11, 4
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, d, generator=gen, dtype=torch.float64) for _ in range(3))
    dense = parse_mask(spec).dense(n)
    sdpa = to_sdpa(spec, n)
    assert sdpa.dtype == torch.bool and torch.equal(sdpa, dense)
    out = scaled_dot_product_attention(q, k, v, attn_mask=sdpa, scale=1.0)
    ref = attention_weights(q, k, dense, d_qk=1.0) @ v
    torch.testing.assert_close(out, ref)
    hf_out = torch.softmax(q @ k.transpose(-1, -2) + to_hf_4d(spec, n, dtype=torch.float64), dim=-1) @ v
    torch.testing.assert_close(hf_out, ref)


@pytest.mark.parametrize("spec", SPECS)
def test_flex_mask_mod_create_mask_equals_dense(spec: str) -> None:
    n = 11
    block = create_mask(to_flex_mask_mod(spec, n), 1, 1, n, n, device="cpu")
    assert torch.equal(block[0, 0], parse_mask(spec).dense(n))


@pytest.mark.parametrize(
    "spec", ["causal", "window:w=2", "strided:stride=3", "causal&window:w=2|block:size=3"]
)
def test_flex_mask_mod_of_closed_form_rule_needs_no_n(spec: str) -> None:
    n = 13
    q = torch.arange(n)[:, None]
    kv = torch.arange(n)[None, :]
    assert torch.equal(to_flex_mask_mod(spec)(0, 0, q, kv), parse_mask(spec).dense(n))


def test_exporters_of_file_mask(tmp_path) -> None:
    n = 9
    table = parse_mask("random:p=0.2,seed=1|causal-window:w=1").dense_numpy(n)
    path = tmp_path / "m.npy"
    np.save(path, table)
    spec = f"file:{path}"
    dense = torch.from_numpy(table)
    assert torch.equal(to_sdpa(spec, n), dense)
    assert torch.equal(to_hf_4d(spec, n)[0, 0] == 0, dense)
    assert torch.equal(create_mask(to_flex_mask_mod(spec, n), 1, 1, n, n, device="cpu")[0, 0], dense)


def test_flex_mask_mod_of_table_mask_requires_n() -> None:
    with pytest.raises(RankCollapseError, match="needs n"):
        to_flex_mask_mod("random:p=0.5,seed=0")


@pytest.mark.parametrize("w", [0, 1, 3, 7])
def test_hf_sliding_window_converter_matches_transformers(w: int) -> None:
    from transformers.masking_utils import (
        sliding_window_bidirectional_mask_function,
        sliding_window_causal_mask_function,
    )

    n = 12
    q, kv = torch.arange(n)[:, None], torch.arange(n)[None, :]
    causal_hf = sliding_window_causal_mask_function(to_hf_sliding_window(w, causal=True))(0, 0, q, kv)
    assert torch.equal(causal_hf, parse_mask(f"causal-window:w={w}").dense(n))
    bi_hf = sliding_window_bidirectional_mask_function(to_hf_sliding_window(w, causal=False))(0, 0, q, kv)
    assert torch.equal(bi_hf, parse_mask(f"window:w={w}").dense(n))
    assert from_hf_sliding_window(to_hf_sliding_window(w)) == w
    assert from_hf_sliding_window(to_hf_sliding_window(w, causal=False), causal=False) == w
    assert hf_sliding_window_mask(w + 1).spec == f"causal-window:w={w}"
    assert from_longformer_attention_window(2 * w) == w


@pytest.mark.parametrize(
    "call",
    [
        lambda: to_hf_sliding_window(-1),
        lambda: from_hf_sliding_window(0, causal=True),
        lambda: from_longformer_attention_window(3),
        lambda: to_hf_4d("causal", 4, batch=0),
        lambda: to_hf_4d("causal", 4, dtype=torch.int64),
    ],
)
def test_converter_and_exporter_bad_input_raises(call) -> None:
    with pytest.raises(RankCollapseError):
        call()


def _where_reference(dense: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The conversion ``to_hf_4d`` wrote by hand before ``to_hf_additive``: ``where(M, 0, finfo.min)``."""
    zero = torch.zeros((), dtype=dtype)
    return torch.where(dense, zero, torch.full((), torch.finfo(dtype).min, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("spec", SPECS)
def test_hf_additive_is_zero_where_allowed_and_the_dtype_floor_elsewhere(spec: str, dtype) -> None:
    from rankcollapse.masks import to_hf_additive

    n = 11
    dense = parse_mask(spec).dense(n)
    out = to_hf_additive(dense, dtype)
    assert out.shape == (n, n) and out.dtype == dtype
    assert torch.equal(out, _where_reference(dense, dtype))
    batched = torch.stack([dense, ~dense | torch.eye(n, dtype=torch.bool)])[:, None]  # [b, 1, n, n]
    assert torch.equal(to_hf_additive(batched, dtype), _where_reference(batched, dtype))
    hf = to_hf_4d(spec, n, batch=3, dtype=dtype)
    assert torch.equal(hf, _where_reference(dense, dtype).expand(3, 1, n, n))


@pytest.mark.parametrize("spec", SPECS)
def test_hf_additive_softmax_is_the_reference_masked_softmax(spec: str) -> None:
    """softmax(S + A) with A = to_hf_additive(M): masked weights exactly 0, the rest the weights of
    the reference ``where(M, S, -inf)`` softmax."""
    from rankcollapse.masks import to_hf_additive

    n, d = 11, 4
    gen = torch.Generator().manual_seed(1)
    q, k = (torch.randn(2, 3, n, d, generator=gen, dtype=torch.float64) for _ in range(2))
    dense = parse_mask(spec).dense(n)
    for dtype in (torch.float64, torch.float32):
        logits = (q @ k.transpose(-1, -2)).to(dtype)
        weights = torch.softmax(logits + to_hf_additive(dense, dtype), dim=-1)
        assert bool((weights[..., ~dense] == 0).all())
        torch.testing.assert_close(weights, attention_weights(q.to(dtype), k.to(dtype), dense, d_qk=1.0))


def test_hf_additive_refuses_what_is_not_a_bool_mask_in_one_line() -> None:
    from rankcollapse.masks import to_hf_additive

    with pytest.raises(RankCollapseError, match=r"torch\.bool tensor, got torch\.float32"):
        to_hf_additive(torch.ones(3, 3), torch.float32)
    with pytest.raises(RankCollapseError, match=r"torch\.bool tensor, got ndarray"):
        to_hf_additive(np.ones((3, 3), dtype=bool), torch.float32)
    with pytest.raises(RankCollapseError, match="allowed: a float dtype"):
        to_hf_additive(torch.ones(3, 3, dtype=torch.bool), torch.int64)
