"""The models' Hugging Face additive masks come from the one conversion, ``masks.export.to_hf_additive``.

``stream.additive_mask`` replaced two hand-written conversions (``[n, n]`` -> ``[1, 1, n, n]`` and a
per-sample ``[b, 1, n, n]``); both are checked against those plain references, bit for bit.
"""

from __future__ import annotations

import pytest
import torch

from rankcollapse.masks import parse_mask, to_hf_additive
from rankcollapse.models.stream import additive_mask, padded_mask


def _masked_fill_reference(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The conversion the stream wrote by hand before: zeros, ``finfo.min`` off the mask."""
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("spec", ["causal", "window:w=2", "causal-window:w=1", "block:size=3"])
def test_a_layer_mask_is_the_reference_conversion_with_two_leading_axes(spec: str, dtype) -> None:
    dense = parse_mask(spec).dense(9)
    out = additive_mask(dense, dtype)
    assert out.shape == (1, 1, 9, 9)
    assert torch.equal(out, _masked_fill_reference(dense, dtype)[None, None])
    assert torch.equal(out[0, 0], to_hf_additive(dense, dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_padded_batch_mask_is_the_reference_conversion_per_sample(dtype) -> None:
    per_sample = padded_mask(parse_mask("causal"), [9, 5, 2], 9)  # bool [3, 1, 9, 9]
    out = additive_mask(per_sample, dtype)
    assert out.shape == (3, 1, 9, 9)
    assert torch.equal(out, _masked_fill_reference(per_sample, dtype))


def test_the_complete_mask_is_none_as_hugging_face_passes_it() -> None:
    assert additive_mask(torch.ones(6, 6, dtype=torch.bool), torch.float32) is None
