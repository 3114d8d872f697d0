"""A Hugging Face model's own per-layer mask schedule, read from its ``config.json`` (no weights, no torch).

Rules (those of ``transformers``; the sliding-window rule is ``q - kv < sliding_window``, i.e. ours
``causal-window:w=sliding_window-1``, see ``export.py``):

- encoders (``ENCODER_TYPES``, or ``is_decoder`` false for them): ``complete`` in every layer;
- decoders (``DECODER_TYPES``): ``causal``, except layers that use a sliding window:
  - ``layer_types`` given: ``"sliding_attention"`` layers slide, ``"full_attention"`` ones do not;
  - else Gemma 2: even layers slide (``layer % 2 == 0``); Gemma 3: all but every
    ``sliding_window_pattern``-th layer (``(layer + 1) % pattern != 0``);
  - Qwen2: layers ``>= max_window_layers`` slide iff ``use_sliding_window``;
  - Mistral, Phi-3 and the others: every layer slides iff ``sliding_window`` is set.

A sliding layer's mask is ``causal-window:w=sliding_window-1`` (it already implies causal).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import read_json
from rankcollapse.edge.validate import quote
from rankcollapse.masks.export import hf_sliding_window_mask
from rankcollapse.masks.schedule import MaskSchedule, schedule_from_masks

ENCODER_TYPES = ("bert", "roberta", "distilbert", "albert", "mpnet", "t5", "electra", "deberta", "deberta-v2",
                 "xlm-roberta", "camembert")
DECODER_TYPES = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3",
                 "gemma3_text", "phi3", "phi", "gptj", "opt", "falcon", "olmo", "smollm3")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """The dict of a ``config.json`` (a file, or a folder holding one); one-line errors."""
    p = Path(path)
    try:
        folder = p.is_dir()
    except OSError:
        folder = False
    if folder:
        p = p / "config.json"
    where = f"model config {quote(str(p), 100)}"
    data = read_json(p, "model config")
    if not isinstance(data, dict):
        raise RankCollapseError(f"{where} is not a JSON object")
    return data


def _int_field(config: dict[str, Any], key: str, minimum: int) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"model config field {key}={quote(value)} is invalid; allowed: an integer >= {minimum}"
        raise RankCollapseError(msg)
    return value


def _sliding_layers(config: dict[str, Any], model_type: str, depth: int) -> list[bool]:
    types = config.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != depth:
            count = len(types) if isinstance(types, list) else "?"
            raise RankCollapseError(f"model config layer_types has {count} entries but the model has "
                                    f"{depth} layers; allowed: one entry per layer")
        unknown = sorted({str(t) for t in types if t not in ("sliding_attention", "full_attention")})
        if unknown:
            raise RankCollapseError(f"model config layer_types has {str(unknown[:3])[:80]}; "
                                    "allowed: sliding_attention, full_attention")
        return [t == "sliding_attention" for t in types]
    if config.get("sliding_window") is None:
        return [False] * depth
    if model_type == "gemma2":
        return [t % 2 == 0 for t in range(depth)]
    if model_type in ("gemma3", "gemma3_text"):
        pattern = _int_field(config, "sliding_window_pattern", 1) if "sliding_window_pattern" in config else 6
        return [(t + 1) % pattern != 0 for t in range(depth)]
    if model_type in ("qwen2", "qwen3"):
        if not config.get("use_sliding_window", False):
            return [False] * depth
        first = config.get("max_window_layers", depth)
        return [t >= first for t in range(depth)]
    return [True] * depth


def schedule_from_hf_config(config: dict[str, Any] | str | Path) -> MaskSchedule:
    """The per-layer masks a model's config defines (module docstring), one per hidden layer."""
    if not isinstance(config, dict):
        config = read_hf_config(config)
    if isinstance(config.get("text_config"), dict):  # multimodal wrappers (Gemma 3): the text model's layers
        config = {"model_type": f"{config.get('model_type', '')}_text", **config["text_config"]}
    model_type = str(config.get("model_type", ""))
    key = next((k for k in _LAYER_KEYS if k in config), _LAYER_KEYS[0])
    depth = _int_field(config, key, 1)
    if model_type in ENCODER_TYPES:
        return schedule_from_masks(["complete"] * depth).reduced()
    if model_type not in DECODER_TYPES:
        raise RankCollapseError(
            f"model_type {quote(model_type, 40)} has no known mask schedule; allowed: "
            f"{', '.join(ENCODER_TYPES + DECODER_TYPES)}"
        )
    sliding = _sliding_layers(config, model_type, depth)
    if any(sliding):
        window = hf_sliding_window_mask(_int_field(config, "sliding_window", 1))
        return schedule_from_masks([window if s else "causal" for s in sliding]).reduced()
    return schedule_from_masks(["causal"] * depth).reduced()
