"""The input-output Jacobian of a random decoder at initialisation: how much each input position moves the
last token (Chowdhury, "Lost in the Middle at Birth", arXiv 2603.10123).

Chowdhury's abstract says untrained Qwen2 and GPT-2 architectures show a U-shaped position influence "at
Step 0", "identical with or without RoPE", and a summary of the paper reports a Spearman correlation of
0.99 between the theory's density and "the empirical Jacobian of untrained 24-layer" Qwen2 and GPT-2.
The paper's own measurement protocol is not known to us: the quantity below is ours.

Quantity, per input sequence (index letters: b samples, n/j tokens, d features):

    J_j = d h_L[n-1] / d e_j   [d, d],    profile_j = ||J_j||_F / sqrt(d)

``h_L`` the residual stream after the last block (before the final norm: a residual path then carries the
last token's own input with weight exactly 1, so the identity map scores 1), ``e_j`` the input embedding at
position ``j`` (the token embedding the model looks up; GPT-2 adds its position embedding inside the
model, after the derivative's point). ``||J_j||_F^2 = sum_r ||e_r^T J_j||^2`` over the ``d`` output
directions; with ``k`` of the rows ``q_r`` of a Haar orthogonal matrix (``probes``),
``(d / k) sum_{r <= k} ||q_r^T J_j||^2`` is an unbiased estimate of it, exact at ``k = d``: one forward
pass, ``k`` backward passes for all positions at once.

Models (:data:`JACOBIAN_MODELS`): the published 24-layer configurations of GPT-2 medium
(``openai-community/gpt2-medium``: d = 1024, 16 heads, learned absolute positions) and Qwen2-0.5B
(``Qwen/Qwen2-0.5B``: d = 896, 14 query / 2 key-value heads, MLP 4864, RoPE with theta = 1e6, RMSNorm),
built offline with Hugging Face's own initialisation (normal, std 0.02) under ``torch.manual_seed(seed)``;
and tiny 4-layer twins for the tests. The vocabulary is cut to :data:`JACOBIAN_VOCAB` entries: the
Jacobian is taken with respect to the embeddings, whose rows are drawn i.i.d. whatever the table's size.
``rope=False`` removes RoPE from a model that has it (its rotary module returns ``cos = 1``, ``sin = 0``:
no rotation), on the same weights and inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rankcollapse.core.precision import dtype_name, parse_dtype
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote

#: Rows of the embedding table of every model built here (see the module docstring).
JACOBIAN_VOCAB = 4096

#: name -> (Hugging Face config fields, label, whether the model has RoPE).
JACOBIAN_MODELS: dict[str, tuple[dict[str, Any], str, bool]] = {
    "gpt2-medium": (
        dict(model_type="gpt2", n_embd=1024, n_layer=24, n_head=16, n_inner=None, n_positions=1024,
             activation_function="gelu_new", layer_norm_epsilon=1e-5, initializer_range=0.02,
             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0),
        "GPT-2 medium (24 layers, d = 1024, random init)", False),
    "qwen2-0.5b": (
        dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
             num_attention_heads=14, num_key_value_heads=2, hidden_act="silu", max_position_embeddings=32768,
             rms_norm_eps=1e-6, initializer_range=0.02, tie_word_embeddings=True, use_sliding_window=False,
             rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0}),
        "Qwen2-0.5B (24 layers, d = 896, random init)", True),
    "tiny-gpt2": (
        dict(model_type="gpt2", n_embd=64, n_layer=4, n_head=4, n_inner=128, n_positions=512,
             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0),
        "tiny GPT-2 (4 layers, d = 64, random init)", False),
    "tiny-qwen2": (
        dict(model_type="qwen2", hidden_size=64, intermediate_size=128, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
             use_sliding_window=False, rope_parameters={"rope_type": "default", "rope_theta": 10_000.0}),
        "tiny Qwen2 (4 layers, d = 64, random init)", True),
}

OnProbe = Callable[[int], None]


@dataclass
class JacobianConfig:
    """One run of :func:`measure_jacobian`: one random network (``seed``: its weights and its inputs),
    ``samples`` random token sequences of ``tokens`` positions, ``probes`` output directions (``None``:
    all ``d``, the exact norm), RoPE kept or removed (``rope``; only a model with RoPE may remove it)."""

    model: str = "gpt2-medium"
    tokens: int = 32
    samples: int = 1
    probes: int | None = 8
    rope: bool = True
    seed: int = 0
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.model not in JACOBIAN_MODELS:
            allowed = ", ".join(JACOBIAN_MODELS)
            raise RankCollapseError(f"model {quote(self.model)} is unknown; allowed: {allowed}")
        for name, low in (("tokens", 3), ("samples", 1), ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise RankCollapseError(f"{name}={quote(v, 20)} is invalid; allowed: an integer >= {low}")
        if self.probes is not None and (isinstance(self.probes, bool) or not isinstance(self.probes, int)
                                        or self.probes < 1):
            raise RankCollapseError(f"probes={quote(self.probes, 20)} is invalid; allowed: an integer >= 1 "
                                    "or null (every output direction)")
        if not isinstance(self.rope, bool):
            raise RankCollapseError(f"rope={quote(self.rope, 20)} is invalid; allowed: true or false")
        if not self.rope and not JACOBIAN_MODELS[self.model][2]:
            raise RankCollapseError(f"rope=false applies to a model with RoPE; {self.model} has none "
                                    "(allowed: rope=true)")
        self.dtype = dtype_name(self.dtype)


@dataclass
class JacobianMeasurement:
    """``profile``: float64 [b, n], ``||d h_L[n-1] / d e_j||_F / sqrt(d)`` per sample and input position;
    ``depth``, ``width`` (d), ``probes`` (k used; ``exact`` when k = d), the model's ``label`` and
    ``rope`` (applied or not), and ``summary`` (seconds, sizes)."""

    profile: np.ndarray
    depth: int
    width: int
    probes: int
    exact: bool
    label: str
    rope: bool
    summary: dict[str, Any] = field(default_factory=dict)


def build_model(name: str, seed: int, dtype: str = "float32") -> torch.nn.Module:
    """The random model ``name`` of :data:`JACOBIAN_MODELS` (Hugging Face's init under ``manual_seed(seed)``,
    the RNG state restored after), in eval mode, sdpa attention; refused in one line when it does not fit
    in memory (``models.sizes.check_config``)."""
    from transformers import AutoConfig, AutoModel

    from rankcollapse.models.sizes import check_config

    fields, _, _ = JACOBIAN_MODELS[name]
    cfg = dict(fields)
    model_type = cfg.pop("model_type")
    config = AutoConfig.for_model(model_type, vocab_size=JACOBIAN_VOCAB, **cfg)
    check_config(config, f"model {name!r}", dtype)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModel.from_config(config, attn_implementation="sdpa")
    return model.to(parse_dtype(dtype)).eval()


def _blocks(model: torch.nn.Module) -> torch.nn.ModuleList:
    for attr in ("h", "layers"):
        blocks = getattr(model, attr, None)
        if isinstance(blocks, torch.nn.ModuleList):
            return blocks
    raise RankCollapseError(f"{type(model).__name__} has no list of blocks (h or layers)")


def _no_rotation(_module: torch.nn.Module, _args: Any, out: Any) -> Any:
    cos, sin = out
    return torch.ones_like(cos), torch.zeros_like(sin)


def _check_finite(profile: np.ndarray) -> None:
    if not np.isfinite(profile).all():
        raise RankCollapseError("the Jacobian profile is not finite (overflow in the backward pass)")


def measure_jacobian(cfg: JacobianConfig, on_probe: OnProbe | None = None) -> JacobianMeasurement:
    """The last token's Jacobian profile of one random network on ``cfg.samples`` random sequences (module
    docstring). ``on_probe(r)`` after each backward pass."""
    start = time.perf_counter()
    model = build_model(cfg.model, cfg.seed, cfg.dtype)
    built = time.perf_counter() - start
    _, label, has_rope = JACOBIAN_MODELS[cfg.model]
    blocks = _blocks(model)
    d = int(model.get_input_embeddings().embedding_dim)
    k = d if cfg.probes is None else min(int(cfg.probes), d)
    g = torch.Generator().manual_seed(1_000_003 + cfg.seed)  # the inputs and probes: apart from the weights
    ids = torch.randint(JACOBIAN_VOCAB, (cfg.samples, cfg.tokens), generator=g)
    from rankcollapse.core.draws import haar_orthogonal

    probes = haar_orthogonal(d, g)[:k].to(parse_dtype(cfg.dtype))  # [k, d] orthonormal rows
    captured: dict[str, torch.Tensor] = {}

    def keep(_module: torch.nn.Module, _args: Any, out: Any) -> None:
        captured["h"] = out[0] if isinstance(out, tuple) else out

    hooks = [blocks[-1].register_forward_hook(keep)]
    if has_rope and not cfg.rope:
        hooks.append(model.rotary_emb.register_forward_hook(_no_rotation))
    try:
        emb = model.get_input_embeddings()(ids).detach().requires_grad_(True)  # [b, n, d]
        model(inputs_embeds=emb, use_cache=False)
        last = captured["h"][:, -1, :]  # [b, d]
        squares = torch.zeros(cfg.samples, cfg.tokens, dtype=torch.float64)
        for r in range(k):
            (grad,) = torch.autograd.grad((last * probes[r]).sum(), emb, retain_graph=r < k - 1)
            squares += grad.to(torch.float64).pow(2).sum(-1)  # [b, n]: ||q_r^T J_j||^2
            if on_probe is not None:
                on_probe(r)
    finally:
        for h in hooks:
            h.remove()
    profile = torch.sqrt(squares / k).numpy()  # sqrt((d/k) sum / d) = ||J_j||_F / sqrt(d)
    _check_finite(profile)
    seconds = time.perf_counter() - start
    return JacobianMeasurement(
        profile=profile, depth=len(blocks), width=d, probes=k, exact=k == d, label=label,
        rope=bool(has_rope and cfg.rope),
        summary={"seconds": seconds, "build_s": built, "depth": len(blocks), "width": d, "probes": k,
                 "parameters": int(sum(p.numel() for p in model.parameters()))},
    )


def exact_jacobian_norms(cfg: JacobianConfig) -> np.ndarray:
    """The same profile by ``torch.autograd.functional.jacobian`` (the full ``[d, n, d]`` Jacobian per sample;
    a reference for small models), float64 [b, n]."""
    model = build_model(cfg.model, cfg.seed, cfg.dtype)
    _, _, has_rope = JACOBIAN_MODELS[cfg.model]
    blocks = _blocks(model)
    g = torch.Generator().manual_seed(1_000_003 + cfg.seed)
    ids = torch.randint(JACOBIAN_VOCAB, (cfg.samples, cfg.tokens), generator=g)
    hooks = []
    if has_rope and not cfg.rope:
        hooks.append(model.rotary_emb.register_forward_hook(_no_rotation))
    captured: dict[str, torch.Tensor] = {}
    hooks.append(blocks[-1].register_forward_hook(
        lambda _m, _a, out: captured.__setitem__("h", out[0] if isinstance(out, tuple) else out)))
    out = []
    try:
        for s in range(cfg.samples):
            emb = model.get_input_embeddings()(ids[s : s + 1]).detach()

            def last(e: torch.Tensor) -> torch.Tensor:
                model(inputs_embeds=e, use_cache=False)
                return captured["h"][0, -1, :]

            jac = torch.autograd.functional.jacobian(last, emb)  # [d, 1, n, d]
            d = jac.shape[0]
            out.append((jac[:, 0].to(torch.float64).pow(2).sum(dim=(0, 2)) / d).sqrt().numpy())
    finally:
        for h in hooks:
            h.remove()
    return np.stack(out)


def model_words(name: str) -> dict[str, Any]:
    """The model columns of a run's rows (``model_label``, ``model_name``, ``pretrained`` False, ...)."""
    fields, label, has_rope = JACOBIAN_MODELS[name]
    depth = int(fields.get("n_layer") or fields.get("num_hidden_layers") or 0)
    return {"model_label": label, "model_name": name, "model_kind": "random", "pretrained": False,
            "stand_in_for": "", "model_layers": depth, "has_rope": has_rope}


def depth_of(name: str) -> int:
    """The number of blocks of the model ``name``."""
    return int(model_words(name)["model_layers"])


def cost_s(name: str, tokens: int, samples: int, probes: int | None) -> float:
    """Estimated seconds of one run: ``(1 + 2 k)`` passes of ``2 P n b`` flops at about 20 GFLOP/s (2 cores
    under load), P the parameters of the blocks (d = width, 12 d^2 per GPT-2 block, 4 d^2 + 3 d m for a
    Qwen2 block with m the MLP width), plus building the model (about 1 s per 100 M parameters)."""
    fields, _, _ = JACOBIAN_MODELS[name]
    d = int(fields.get("n_embd") or fields.get("hidden_size"))
    m = int(fields.get("intermediate_size") or 4 * d)
    per_block = 12 * d * d if fields["model_type"] == "gpt2" else 4 * d * d + 3 * d * m
    params = per_block * depth_of(name)
    k = d if probes is None else min(probes, d)
    flops = (1 + 2 * k) * 2.0 * params * tokens * samples
    return flops / 2e10 + params / 1e8 + 1.0
