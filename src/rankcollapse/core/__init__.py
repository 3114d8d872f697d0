"""The vocabulary at the bottom of the house: pure functions that every other folder imports.

- :mod:`~rankcollapse.core.attention` the one masked softmax and attention-weights reference
- :mod:`~rankcollapse.core.positions` the one rotary position embedding (RoPE): frequencies, angles, rotation
- :mod:`~rankcollapse.core.norms`     the theory's scaling-only normalisation, a model's LayerNorm / RMSNorm
- :mod:`~rankcollapse.core.draws`     every random draw (Gaussian, Haar orthogonal, sphere, hemisphere,
  non-negative-cosine inputs, distinct indices), each with a required ``torch.Generator``
- :mod:`~rankcollapse.core.precision` dtype names parsed once, ``eps`` and the precision floor
- :mod:`~rankcollapse.core.execution` where a computation runs: the device parsed once, the sample batches
- :mod:`~rankcollapse.core.names`     one name per quantity: the table the CLI, the columns, the labels and
  the glossary read

Nothing here imports another folder of the package (only :mod:`rankcollapse.edge.errors`).
"""

import importlib
from typing import Any

#: Each name of the vocabulary -> its module, imported on first use: ``core.names`` (the CLI's help
#: texts) must not pull torch into ``rankcollapse --help``.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("attention_logits", "attention_weights", "masked_softmax"), "attention"),
    **dict.fromkeys(("distinct_indices", "gaussian", "haar_orthogonal", "hemisphere_tokens",
                     "nonnegative_cosine_tokens",
                     "sphere_tokens"), "draws"),
    **dict.fromkeys(("batch_slices", "check_batch_size", "parse_device"), "execution"),
    **dict.fromkeys(("NORMS", "get_norm", "layer_norm", "rms_norm", "sphere_normalize"), "norms"),
    **dict.fromkeys(("apply_rotary", "rotary", "rotary_angles", "rotary_frequencies", "rotate_half"),
                    "positions"),
    **dict.fromkeys(("ALL_DTYPE_NAMES", "DTYPE_NAMES", "FLOOR_FACTOR", "HALF_DTYPE_NAMES",
                     "check_half_device", "dtype_name", "eps", "floor_rel", "is_half", "parse_dtype",
                     "precision_floor"), "precision"),
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(f"rankcollapse.core.{_HOMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rankcollapse.core' has no attribute {name!r}")


__all__ = [
    "ALL_DTYPE_NAMES",
    "DTYPE_NAMES",
    "FLOOR_FACTOR",
    "HALF_DTYPE_NAMES",
    "NORMS",
    "apply_rotary",
    "attention_logits",
    "attention_weights",
    "batch_slices",
    "check_batch_size",
    "check_half_device",
    "distinct_indices",
    "dtype_name",
    "eps",
    "floor_rel",
    "gaussian",
    "get_norm",
    "haar_orthogonal",
    "hemisphere_tokens",
    "is_half",
    "layer_norm",
    "masked_softmax",
    "nonnegative_cosine_tokens",
    "parse_device",
    "parse_dtype",
    "precision_floor",
    "rms_norm",
    "rotary",
    "rotary_angles",
    "rotary_frequencies",
    "rotate_half",
    "sphere_normalize",
    "sphere_tokens",
]
