"""Attention masks as rules and as directed graphs (SPEC §1, §4).

``parse_mask(spec)`` turns a spec string (``"causal"``, ``"window:w=4"``, ``"causal&window:w=4"``)
into a ``Mask`` giving, for any length ``n``, a dense ``torch.bool [n, n]`` (``M[i, j]`` iff query
``i`` may attend to key ``j``), a CSR ``SparseMask``, and ``band(n)`` offsets. ``analyze_mask``
computes the graph facts of Definitions 1-5 (edge ``j -> i`` iff ``M[i, j]``); ``export`` turns a
mask into Hugging Face, SDPA and FlexAttention forms.
"""

from rankcollapse.masks.base import AndMask, Mask, OrMask, band_of_sparse
from rankcollapse.masks.export import (
    from_hf_sliding_window,
    from_longformer_attention_window,
    hf_sliding_window_mask,
    to_flex_mask_mod,
    to_hf_4d,
    to_hf_sliding_window,
    to_sdpa,
)
from rankcollapse.masks.families import Family
from rankcollapse.masks.fixed import Document, FileMask, MatrixMask, Tree
from rankcollapse.masks.graph import MaskAnalysis, analyze_dense, analyze_mask
from rankcollapse.masks.registry import ALL_FAMILY_NAMES, FAMILIES
from rankcollapse.masks.sparse import SparseMask
from rankcollapse.masks.spec import parse_mask

__all__ = [
    "ALL_FAMILY_NAMES",
    "FAMILIES",
    "AndMask",
    "Document",
    "Family",
    "FileMask",
    "Mask",
    "MaskAnalysis",
    "MatrixMask",
    "OrMask",
    "SparseMask",
    "Tree",
    "analyze_dense",
    "analyze_mask",
    "band_of_sparse",
    "from_hf_sliding_window",
    "from_longformer_attention_window",
    "hf_sliding_window_mask",
    "parse_mask",
    "to_flex_mask_mod",
    "to_hf_4d",
    "to_hf_sliding_window",
    "to_sdpa",
]
