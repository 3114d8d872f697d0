"""Deep self-attention dynamics: attention kernels, normalisations, layers, the simulator, theory.

- ``kernels``    ``A v`` three ways: dense masked reference, torch SDPA, blocked band
- ``weights``    value-matrix families, query/key/output/MLP weights, initial tokens (seeded)
- ``layers``     one layer from the parts; named presets with their formulas
- ``config``     ``SimulationConfig``: every setting, validated when built (types, ranges, memory)
- ``simulate``   ``SimulationConfig`` -> ``simulate`` -> ``SimulationResult`` (metrics per layer);
  ``score_decay``: the first layer's score decay over the distance (RoPE)
- ``theory``     the Theorem 1 bound check

The attention reference and the norms live in :mod:`rankcollapse.core` (re-exported here).
"""

from rankcollapse.core.attention import attention_logits, attention_weights, masked_softmax
from rankcollapse.core.norms import NORMS, layer_norm, rms_norm, sphere_normalize
from rankcollapse.dynamics.kernels import (
    KERNELS,
    KernelPlan,
    attend_band,
    attend_dense,
    attend_sdpa,
    plan_kernel,
)
from rankcollapse.dynamics.layers import (
    PRESETS,
    LayerSpec,
    apply_layer,
    get_preset,
    layer_attention,
    layer_logits,
    multihead_attention,
    norm_step,
)
from rankcollapse.dynamics.simulate import (
    SimulationConfig,
    SimulationResult,
    resolve_mask,
    score_decay,
    simulate,
)
from rankcollapse.dynamics.theory import TheoryCheck, check_theorem1
from rankcollapse.dynamics.weights import (
    INPUT_KINDS,
    VALUE_FAMILIES,
    LayerWeights,
    draw_inputs,
    draw_layer_weights,
    value_matrix,
)

__all__ = [
    "INPUT_KINDS",
    "KERNELS",
    "NORMS",
    "PRESETS",
    "VALUE_FAMILIES",
    "KernelPlan",
    "LayerSpec",
    "LayerWeights",
    "SimulationConfig",
    "SimulationResult",
    "TheoryCheck",
    "apply_layer",
    "attend_band",
    "attend_dense",
    "attend_sdpa",
    "attention_logits",
    "attention_weights",
    "check_theorem1",
    "draw_inputs",
    "draw_layer_weights",
    "get_preset",
    "layer_attention",
    "layer_logits",
    "layer_norm",
    "masked_softmax",
    "multihead_attention",
    "norm_step",
    "plan_kernel",
    "resolve_mask",
    "rms_norm",
    "score_decay",
    "simulate",
    "sphere_normalize",
    "value_matrix",
]
