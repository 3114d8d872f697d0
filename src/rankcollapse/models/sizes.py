"""A model's config read before the model is built: its sizes checked, its memory estimated.

transformers builds whatever a config says: a ``config.json`` with 10^6 layers builds for minutes
(and then fills the memory), 0 heads raise ``ZeroDivisionError: integer modulo by zero`` from deep
inside, a vocabulary of 0 an ``IndexError``. :func:`check_config` reads the sizes every family has
through the config's own attribute map (``hidden_size`` is GPT-2's ``n_embd`` and T5's ``d_model``),
refuses one that is not a whole number >= 1 naming the key and the value (and a width the heads do not
divide where the config gives no head width), then refuses through
:func:`rankcollapse.edge.validate.check_memory` a model whose parameters (:func:`parameter_count`, a
lower bound) do not fit in the memory available now. Nothing is built before both pass.
"""

from __future__ import annotations

import numbers
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_memory, human_bytes, quote
from rankcollapse.models.families import FAMILIES

#: Sizes every family's config has (names of transformers' attribute map), each a whole number >= 1.
SIZE_KEYS: tuple[str, ...] = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
#: What a vision encoder's config has instead of a vocabulary (ViT), each a whole number >= 1.
VISION_KEYS: tuple[str, ...] = ("image_size", "patch_size", "num_channels")
#: Sizes a family's config may have; when present (not None), each a whole number >= 1.
OPTIONAL_KEYS: tuple[str, ...] = ("num_key_value_heads", "intermediate_size", "n_inner", "d_ff",
                                  "max_position_embeddings", "head_dim", "d_kv", "num_hidden_groups",
                                  "embedding_size")
#: Keys that give the width of one head outright (then the heads need not divide ``hidden_size``).
HEAD_WIDTH_KEYS: tuple[str, ...] = ("head_dim", "d_kv")
#: Bytes per parameter, by the dtype the model is built in.
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def text_config(config: Any) -> Any:
    """The part of a (possibly composite) config that describes the text stack."""
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def _read(config: Any, key: str) -> Any:
    try:
        return getattr(config, key)
    except AttributeError:
        return None


def is_vision(config: Any) -> bool:
    """True for a vision encoder's config: a ``patch_size`` and no ``vocab_size`` (ViT)."""
    cfg = text_config(config)
    return _read(cfg, "patch_size") is not None and _read(cfg, "vocab_size") is None


def required_keys(config: Any) -> tuple[str, ...]:
    """:data:`SIZE_KEYS`, a vision encoder's :data:`VISION_KEYS` in place of ``vocab_size``."""
    return (*SIZE_KEYS[:-1], *VISION_KEYS) if is_vision(config) else SIZE_KEYS


def sizes(config: Any) -> dict[str, Any]:
    """The sizes of :func:`required_keys` and :data:`OPTIONAL_KEYS` a config has (absent or None left out)."""
    cfg = text_config(config)
    found = {key: _read(cfg, key) for key in (*required_keys(config), *OPTIONAL_KEYS)}
    return {k: v for k, v in found.items() if v is not None}


def describe(config: Any) -> str:
    """``num_hidden_layers=4, hidden_size=64, num_attention_heads=0, vocab_size=30522``: the sizes that
    make a model, for a line that says why it cannot be built."""
    have = sizes(config)
    return ", ".join(f"{k}={quote(have[k], 24)}" for k in required_keys(config) if k in have)


def check_sizes(config: Any, shown: str, min_layers: int = 1) -> dict[str, int]:
    """The sizes of ``config`` (:func:`sizes`), each a whole number ``>= 1`` (layers ``>= min_layers``),
    the heads dividing ``hidden_size`` where no head width is given; one line naming ``shown``, the key
    and the value else."""
    have = sizes(config)
    for key in required_keys(config):
        if key not in have:
            raise RankCollapseError(f"{shown}: its config has no {key}; allowed: a config that sets it")
    for key, value in have.items():
        low = min_layers if key == "num_hidden_layers" else 1
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise RankCollapseError(
                f"{shown}: config {key} must be a whole number >= {low}, got {quote(value, 30)}"
            )
    heads, width = int(have["num_attention_heads"]), int(have["hidden_size"])
    if not any(k in have for k in HEAD_WIDTH_KEYS) and width % heads:
        raise RankCollapseError(
            f"{shown}: config hidden_size {width} is not a multiple of num_attention_heads {heads}; "
            "allowed: heads that divide the width"
        )
    return {k: int(v) for k, v in have.items()}


def parameter_count(config: Any) -> int:
    """A lower bound of the parameters a config builds:
    ``(V + P) e + L_s (2 d h a + 2 d k a + 2 d f)`` with V the vocabulary, e the embedding width
    (``embedding_size`` or d), P the learned positions (``max_position_embeddings`` of a family we
    dissect whose positions are not rotary, else 0), d
    ``hidden_size``, h heads of width a (``head_dim`` / ``d_kv`` or d / h), k key/value heads
    (``num_key_value_heads`` or h), f the MLP width (``intermediate_size`` / ``n_inner`` / ``d_ff``;
    GPT-2's ``n_inner: null`` is 4 d; 0 if absent; a gated MLP has 3 such matrices, counted as 2), L_s
    the stored layers (ALBERT's ``num_hidden_groups``, else ``num_hidden_layers``). Norms and biases are
    left out (a lower bound). A vision encoder (:func:`is_vision`, ViT) has ``(C p^2 + 1 + (H / p)^2) d``
    in place of the vocabulary and positions (C channels, patches of p, images of H px)."""
    s = sizes(config)
    d, h, vocab = int(s["hidden_size"]), int(s["num_attention_heads"]), int(s.get("vocab_size", 0))
    a = int(s.get("head_dim") or s.get("d_kv") or d // max(h, 1))
    k = int(s.get("num_key_value_heads") or h)
    gpt2_mlp = 4 * d if hasattr(text_config(config), "n_inner") else 0  # GPT-2's n_inner: None means 4 d
    f = int(s.get("intermediate_size") or s.get("n_inner") or s.get("d_ff") or gpt2_mlp)
    e = int(s.get("embedding_size") or d)
    stored = int(s.get("num_hidden_groups") or s["num_hidden_layers"])
    per_layer = 2 * d * h * a + 2 * d * k * a + 2 * d * f
    spec = FAMILIES.get(str(getattr(text_config(config), "model_type", "")))
    learned = spec is not None and not spec.positions.startswith("rotary")  # rotary: nothing stored
    positions = int(s.get("max_position_embeddings") or 0) if learned else 0
    if is_vision(config):  # the patch projection C p^2 d and the 1 + (H / p)^2 positions, no vocabulary
        patch = s["num_channels"] * s["patch_size"] ** 2
        return (patch + 1 + (s["image_size"] // s["patch_size"]) ** 2) * d + stored * per_layer
    return (vocab + positions) * e + stored * per_layer


def check_config(config: Any, shown: str, dtype: str = "float32", min_layers: int = 1,
                 available: int | None = None) -> int:
    """:func:`check_sizes`, then :func:`~rankcollapse.edge.validate.check_memory` of
    :func:`parameter_count` parameters in ``dtype``; returns the parameter count. One line, before any
    module is built: ``building 'big' (1000000 layers, d = 1024, vocabulary 30522) needs about 50.4 TB of
    memory, more than the 60 GB available; allowed: ...``."""
    s = check_sizes(config, shown, min_layers)
    count = parameter_count(config)
    dtype = str(dtype).removeprefix("torch.")
    nbytes = count * ITEMSIZE.get(dtype, 4)
    reads = (f"images of {s['image_size']} px" if is_vision(config) else f"vocabulary {s['vocab_size']}")
    check_memory(
        f"building {shown} ({s['num_hidden_layers']} layers, d = {s['hidden_size']}, {reads}: at least "
        f"{count:.3g} parameters, {human_bytes(nbytes)} in {dtype})",
        nbytes,
        available,
        allowed="a config with fewer layers or a smaller width, or a machine with more memory free",
    )
    return count
