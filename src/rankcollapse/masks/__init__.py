"""Attention masks as rules and as directed graphs (the paper's §3, Definitions 1-5).

``parse_mask(spec)`` turns a spec string (``"causal"``, ``"window:w=4"``, ``"causal&window:w=4"``)
into ONE ``Mask`` object per spec (a Python predicate ``f(i, j)`` or a bool tensor becomes a
``PredicateMask`` / ``TensorMask``, ``custom.py``), which caches per length ``n`` its dense
``torch.bool [n, n]`` (``M[i, j]`` iff query ``i`` may attend to key ``j``), CSR ``SparseMask``, ``band(n)``,
``is_complete(n)``, ``intervals(n)`` and ``analysis(n)`` (the graph facts; edge ``j -> i`` iff
``M[i, j]``). ``analyze_dense(m)`` / ``from_dense(m)`` analyse a matrix without a spec string.
``parse_schedule`` / ``analyze_schedule`` handle a mask per layer (composed graph, layers to a
center); ``schedule_from_hf_config`` reads a model's own schedule; ``check_support`` compares a
model's attention with its mask; ``resolve_mask(mask, n)`` turns a spec, a ``Mask``, a bool
tensor or None into a ``ResolvedMask`` (dense, band, complete; the one resolver of the simulator and
the LayerNorm map); ``export`` turns a mask into Hugging Face, SDPA and FlexAttention forms
(``to_hf_additive``: the one bool -> Hugging Face additive conversion). ``first_token_prediction``
says what the graph predicts about the cumulative context's concentration on the first token (Wu et
al. 2025: reach, hops, the rate bound). ``hasse_analysis`` says where the composed flow of a mask or
schedule ends up with depth (Li & Guo 2026: the depth it stops changing, its condensation DAG and
transitive reduction; ``check_hasse`` against networkx); ``block-two-stream`` and ``butterfly`` are their
two masks, as we read them. Neither torch nor scipy is imported until a form needs them.
"""

from rankcollapse.masks.base import AndMask, Mask, OrMask, band_of_sparse
from rankcollapse.masks.butterfly import Butterfly, butterfly_dense, butterfly_flow
from rankcollapse.masks.composed import ScheduleAnalysis, analyze_schedule
from rankcollapse.masks.consistency import SupportCheck, check_schedule_support, check_support
from rankcollapse.masks.custom import PredicateMask, TensorMask, in_memory_note
from rankcollapse.masks.export import (
    from_hf_sliding_window,
    from_longformer_attention_window,
    hf_sliding_window_mask,
    to_flex_mask_mod,
    to_hf_4d,
    to_hf_additive,
    to_hf_sliding_window,
    to_sdpa,
)
from rankcollapse.masks.families import Family
from rankcollapse.masks.fixed import Document, FileMask, MatrixMask, Tree, from_dense
from rankcollapse.masks.graph import MaskAnalysis, analyze_dense, analyze_mask
from rankcollapse.masks.hasse import HasseAnalysis, HasseCheck, check_hasse, hasse_analysis, hasse_reference
from rankcollapse.masks.hf_schedule import schedule_from_hf_config
from rankcollapse.masks.position import (
    FirstTokenPrediction,
    decay_bias,
    decay_critical_distance,
    decay_uniform_context,
    first_token_prediction,
    window_hops,
)
from rankcollapse.masks.registry import ALL_FAMILY_NAMES, FAMILIES
from rankcollapse.masks.resolved import ResolvedMask, resolve_mask
from rankcollapse.masks.schedule import MaskSchedule, parse_schedule, schedule_from_masks
from rankcollapse.masks.sparse import SparseMask
from rankcollapse.masks.spec import parse_mask
from rankcollapse.masks.two_stream import BlockTwoStream, two_stream_dense, two_stream_flow

__all__ = [
    "ALL_FAMILY_NAMES",
    "FAMILIES",
    "AndMask",
    "BlockTwoStream",
    "Butterfly",
    "Document",
    "Family",
    "FileMask",
    "FirstTokenPrediction",
    "HasseAnalysis",
    "HasseCheck",
    "Mask",
    "MaskAnalysis",
    "MaskSchedule",
    "MatrixMask",
    "OrMask",
    "PredicateMask",
    "ResolvedMask",
    "ScheduleAnalysis",
    "SparseMask",
    "SupportCheck",
    "TensorMask",
    "Tree",
    "analyze_dense",
    "analyze_mask",
    "analyze_schedule",
    "band_of_sparse",
    "butterfly_dense",
    "butterfly_flow",
    "check_hasse",
    "check_schedule_support",
    "check_support",
    "decay_bias",
    "decay_critical_distance",
    "decay_uniform_context",
    "first_token_prediction",
    "from_dense",
    "from_hf_sliding_window",
    "from_longformer_attention_window",
    "hasse_analysis",
    "hasse_reference",
    "hf_sliding_window_mask",
    "in_memory_note",
    "parse_mask",
    "parse_schedule",
    "resolve_mask",
    "schedule_from_hf_config",
    "schedule_from_masks",
    "to_flex_mask_mod",
    "to_hf_4d",
    "to_hf_additive",
    "to_hf_sliding_window",
    "to_sdpa",
    "two_stream_dense",
    "two_stream_flow",
    "window_hops",
]
