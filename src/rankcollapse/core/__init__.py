"""The vocabulary at the bottom of the house: pure functions that every other folder imports.

- :mod:`~rankcollapse.core.attention` the one masked softmax and attention-weights reference
- :mod:`~rankcollapse.core.norms`     the theory's scaling-only normalisation, a model's LayerNorm / RMSNorm
- :mod:`~rankcollapse.core.draws`     every random draw (Gaussian, Haar orthogonal, sphere, hemisphere,
  non-negative-cosine inputs), each with a required ``torch.Generator``
- :mod:`~rankcollapse.core.precision` dtype names parsed once, ``eps`` and the precision floor
- :mod:`~rankcollapse.core.execution` where a computation runs: the device parsed once, the sample batches

Nothing here imports another folder of the package (only :mod:`rankcollapse.edge.errors`).
"""

from rankcollapse.core.attention import attention_logits, attention_weights, masked_softmax
from rankcollapse.core.draws import (
    gaussian,
    haar_orthogonal,
    hemisphere_tokens,
    nonnegative_cosine_tokens,
    sphere_tokens,
)
from rankcollapse.core.execution import batch_slices, check_batch_size, parse_device
from rankcollapse.core.norms import NORMS, get_norm, layer_norm, rms_norm, sphere_normalize
from rankcollapse.core.precision import (
    DTYPE_NAMES,
    FLOOR_FACTOR,
    dtype_name,
    eps,
    floor_rel,
    parse_dtype,
    precision_floor,
)

__all__ = [
    "DTYPE_NAMES",
    "FLOOR_FACTOR",
    "NORMS",
    "attention_logits",
    "attention_weights",
    "batch_slices",
    "check_batch_size",
    "dtype_name",
    "eps",
    "floor_rel",
    "gaussian",
    "get_norm",
    "haar_orthogonal",
    "hemisphere_tokens",
    "layer_norm",
    "masked_softmax",
    "nonnegative_cosine_tokens",
    "parse_device",
    "parse_dtype",
    "precision_floor",
    "rms_norm",
    "sphere_normalize",
    "sphere_tokens",
]
