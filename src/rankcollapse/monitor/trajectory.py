"""Collapse over training: a small decoder LM trained from random init, probed by :class:`Monitor`.

Index letters: b batch, n tokens, d features, h heads, e per-head features, t layers, v vocabulary.

The model (ours): byte-level tokens (``v = 257``: the 256 bytes of the UTF-8 text and a start token
that opens every excerpt), ``X(0) = E[ids] + P`` (token and learned position embeddings), then
``layers`` blocks of :func:`rankcollapse.dynamics.layers.apply_layer` (attention through
``core.attention`` under the run's mask, the parameter-free LayerNorm of ``core.norms``, a GELU MLP
of width ``4d``), then ``logits = N_f(X(L)) W_U`` (``N_f`` a final LayerNorm for pre-LN only). Each
head: ``A_h = softmax_M(X W_Q,h (X W_K,h)^T / sqrt(e))``, ``Attn(X) = sum_h A_h X W_V,h W_O,h`` with
``e = d / h``. The block :data:`VARIANTS`:

- ``post-ln``  ``Y = LN(X + Attn(X)); X <- LN(Y + MLP(Y))``  (BERT's placement)
- ``pre-ln``   ``Y = X + Attn(LN(X)); X <- Y + MLP(LN(Y))``  (GPT-2's)
- ``no-ln``    ``Y = X + Attn(X);     X <- Y + MLP(Y)``      (skips, no normalisation)
- ``no-skip``  ``Y = LN(Attn(X));     X <- LN(MLP(Y))``      (post-LN without the skips)

Masks: any causal mask of :func:`rankcollapse.masks.parse_mask` (``causal``, ``causal-window:w=W``:
each token sees itself and the ``W`` before it); a mask that lets a token see a later one is refused
(a language model would read its own target).

Training: next-byte cross-entropy on ``batch`` excerpts of ``tokens`` bytes drawn from the first
``1 - held_out`` of a bundled corpus (:mod:`rankcollapse.models.corpora`), AdamW with a linear
warm-up over ``warmup`` steps to ``lr`` then constant. Two ``torch.Generator`` objects seeded from
``seed`` draw the weights and the batches; the probe (``probe`` excerpts of the held-out tail,
seeded by ``probe_seed``) is the same for every seed, so the networks are the only thing that differ.

Telemetry: a :class:`Monitor` (diagnostics on) probes at step 0 (the initialisation) and every
``every`` steps: per layer ``mu``, ``mu_rel``, ``at_floor``, ``num_rank``, ``effective_rank``,
``mean_abs_cos`` and the attention diagnostics (``first_token_attention``, ``sink_rate`` at 0.3, ...),
from the attention weights the blocks themselves apply (:meth:`Block.attention_weights`).
:func:`train_trajectory` returns a :class:`Trajectory`: the tidy frame ``step, layer, metric,
value`` and the losses.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.core.attention import attention_weights
from rankcollapse.core.draws import gaussian
from rankcollapse.core.norms import layer_norm
from rankcollapse.core.precision import parse_dtype
from rankcollapse.dynamics.kernels import plan_kernel
from rankcollapse.dynamics.layers import LayerSpec, apply_layer
from rankcollapse.dynamics.weights import LayerWeights
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.monitor.telemetry import DEFAULT_METRICS, Monitor

#: The block variants (module docstring): name -> how each sub-layer is applied.
VARIANTS: dict[str, LayerSpec] = {
    "post-ln": LayerSpec(norm="layernorm", placement="post", skip=1.0, mlp=True),
    "pre-ln": LayerSpec(norm="layernorm", placement="pre", skip=1.0, mlp=True),
    "no-ln": LayerSpec(norm="none", placement="post", skip=1.0, mlp=True),
    "no-skip": LayerSpec(norm="layernorm", placement="post", skip=None, mlp=True),
}
#: Byte-level vocabulary: the 256 byte values and the start token.
START_TOKEN = 256
VOCAB = 257
#: What every probe measures besides the diagnostics.
TRAJECTORY_METRICS: tuple[str, ...] = DEFAULT_METRICS


def _whole(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise RankCollapseError(f"{name}={quote(value)} is invalid; allowed: a whole number >= {low}")
    return value


def _number(name: str, value: Any, low: float, high: float, *, open_low: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value > high or value < low or (open_low and value == low):
        side = "(" if open_low else "["
        allowed = f"a number in {side}{low:g}, {high:g}]"
        raise RankCollapseError(f"{name}={quote(value)} is invalid; allowed: {allowed}")
    return float(value)


@dataclass
class TrajectoryConfig:
    """One training run (module docstring). ``variant``: one of :data:`VARIANTS`; ``mask``: a causal
    mask spec; ``layers``, ``d``, ``heads`` (``d`` a multiple of ``heads``); ``tokens`` per excerpt,
    ``batch`` excerpts per step, ``steps`` optimiser steps; ``lr`` the peak learning rate after a linear
    ``warmup`` (steps), ``weight_decay`` AdamW's; ``every``: a probe every k steps (and at step 0);
    ``probe`` held-out excerpts per probe, drawn with ``probe_seed``; ``corpus`` a bundled corpus,
    ``held_out`` the share of its tail kept for the probe; ``seed`` the network (weights and batches);
    ``dtype`` of the weights and the probe; ``threads`` torch threads while it runs (None: as set)."""

    variant: str = "pre-ln"
    mask: str = "causal"
    layers: int = 4
    d: int = 64
    heads: int = 4
    tokens: int = 64
    batch: int = 16
    steps: int = 300
    lr: float = 3e-3
    warmup: int = 30
    weight_decay: float = 0.01
    every: int = 10
    probe: int = 16
    probe_seed: int = 0
    corpus: str = "shakespeare"
    held_out: float = 0.1
    seed: int = 0
    dtype: str = "float32"
    threads: int | None = 1
    mask_dense: Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from rankcollapse.masks import parse_mask
        from rankcollapse.models.corpora import CORPORA

        if self.variant not in VARIANTS:
            allowed = ", ".join(VARIANTS)
            raise RankCollapseError(f"variant={quote(self.variant)} is invalid; allowed: {allowed}")
        for name, low in (("layers", 1), ("d", 2), ("heads", 1), ("tokens", 2), ("batch", 1), ("steps", 1),
                          ("warmup", 0), ("every", 1), ("probe", 1), ("probe_seed", 0), ("seed", 0)):
            _whole(name, getattr(self, name), low)
        if self.d % self.heads:
            raise RankCollapseError(
                f"d={self.d} is not a multiple of heads={self.heads}; allowed: d = heads x e"
            )
        if self.warmup > self.steps:
            raise RankCollapseError(
                f"warmup={self.warmup} is longer than steps={self.steps}; allowed: <= steps"
            )
        self.lr = _number("lr", self.lr, 0.0, 1.0, open_low=True)
        self.weight_decay = _number("weight_decay", self.weight_decay, 0.0, 1.0)
        self.held_out = _number("held_out", self.held_out, 0.0, 0.5, open_low=True)
        if self.corpus not in CORPORA:
            raise RankCollapseError(f"corpus={quote(self.corpus)} is invalid; allowed: {', '.join(CORPORA)}")
        parse_dtype(self.dtype)
        if self.threads is not None:
            _whole("threads", self.threads, 1)
        mask = parse_mask(self.mask).dense(self.tokens)
        if bool(mask.triu(1).any()):
            raise RankCollapseError(
                f"mask={quote(self.mask)} lets a token see a later one; allowed: a causal mask "
                "(causal, causal-window:w=W) for a language model"
            )
        self.mask_dense = mask

    @property
    def torch_dtype(self) -> torch.dtype:
        return parse_dtype(self.dtype)


class Block(nn.Module):
    """One trainable block: :func:`rankcollapse.dynamics.layers.apply_layer` on its parameters.

    ``w_q, w_k, w_v``: [h, d, e]; ``w_o``: [h, e, d]; ``w_1``: [d, 4d]; ``w_2``: [4d, d]; drawn
    ``N(0, 1/d)`` (``w_o``: ``N(0, 1/d)`` over its ``h e = d`` inputs; ``w_2``: ``N(0, 1/(4d))``) from
    ``generator``. x: [b, n, d] -> [b, n, d]."""

    def __init__(self, spec: LayerSpec, d: int, heads: int, mask: Tensor, generator: torch.Generator,
                 dtype: torch.dtype) -> None:
        super().__init__()
        e = d // heads
        self.spec, self.n_heads, self.d_qk = spec, heads, float(e)

        def draw(*shape: int, fan_in: int) -> nn.Parameter:
            return nn.Parameter(gaussian(shape, generator, 1.0 / math.sqrt(fan_in)).to(dtype))

        self.w_q, self.w_k, self.w_v = (draw(heads, d, e, fan_in=d) for _ in range(3))
        self.w_o = draw(heads, e, d, fan_in=d)
        self.w_1 = draw(d, 4 * d, fan_in=d)
        self.w_2 = draw(4 * d, d, fan_in=4 * d)
        self.register_buffer("mask", mask, persistent=False)
        self.kernel = plan_kernel(mask, kernel="dense")

    def weights(self) -> LayerWeights:
        return LayerWeights(self.w_q, self.w_k, self.w_v, self.w_o, self.w_1, self.w_2)

    def forward(self, x: Tensor) -> Tensor:
        return apply_layer(x, self.weights(), self.spec, self.kernel, self.d_qk)[0]

    def attention_weights(self, x: Tensor) -> Tensor:
        """The ``A_h`` the block applies to ``x [b, n, d]`` -> ``[b, h, n, n]`` (pre-LN: of ``LN(x)``)."""
        z = layer_norm(x) if self.spec.placement == "pre" and self.spec.norm != "none" else x
        q = z.unsqueeze(1) @ self.w_q  # [b, 1, n, d] @ [h, d, e] -> [b, h, n, e]
        k = z.unsqueeze(1) @ self.w_k
        return attention_weights(q, k, self.mask, self.d_qk)

    def attention_mask(self, n: int) -> Tensor:
        """The block's mask for ``n`` tokens: bool [n, n]."""
        return self.mask[:n, :n]


class ByteLM(nn.Module):
    """The decoder LM of the module docstring. ids: int64 [b, n] -> logits [b, n, v]."""

    def __init__(self, config: TrajectoryConfig, generator: torch.Generator) -> None:
        super().__init__()
        c, dtype = config, config.torch_dtype
        spec = VARIANTS[c.variant]
        self.embed = nn.Parameter(gaussian((VOCAB, c.d), generator).to(dtype))
        self.position = nn.Parameter(gaussian((c.tokens, c.d), generator).to(dtype))
        self.blocks = nn.ModuleList(
            Block(spec, c.d, c.heads, c.mask_dense, generator, dtype) for _ in range(c.layers)
        )
        self.final_norm = spec.placement == "pre" and spec.norm != "none"
        self.unembed = nn.Parameter(gaussian((c.d, VOCAB), generator, 1.0 / math.sqrt(c.d)).to(dtype))

    def forward(self, ids: Tensor) -> Tensor:
        x = self.embed[ids] + self.position[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return (layer_norm(x) if self.final_norm else x) @ self.unembed


@functools.lru_cache(maxsize=4)
def corpus_bytes(corpus: str) -> Tensor:
    """The UTF-8 bytes of a bundled corpus as int64 ids [total] (cached per process)."""
    from rankcollapse.models.corpora import load_corpus

    raw = load_corpus(corpus).encode("utf-8")
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.long)


def split_corpus(config: TrajectoryConfig) -> tuple[Tensor, Tensor]:
    """(training ids, held-out ids): the corpus's bytes cut at ``1 - held_out``."""
    ids = corpus_bytes(config.corpus)
    cut = int(ids.numel() * (1.0 - config.held_out))
    return ids[:cut], ids[cut:]


def excerpts(ids: Tensor, samples: int, tokens: int, generator: torch.Generator) -> Tensor:
    """``samples`` excerpts ``[START, x_s, ..., x_{s+tokens-2}]`` at uniform starts ``s`` -> int64
    [samples, tokens + 1] (the last column is the target of the one before)."""
    starts = torch.randint(int(ids.numel()) - tokens, (samples,), generator=generator)
    rows = ids[starts[:, None] + torch.arange(tokens)[None, :]]
    return torch.cat([torch.full((samples, 1), START_TOKEN, dtype=torch.long), rows], dim=1)


def learning_rate(step: int, config: TrajectoryConfig) -> float:
    """``lr min(1, step / warmup)`` at optimiser step ``step`` (1-based; no warm-up: ``lr``)."""
    return config.lr if config.warmup == 0 else config.lr * min(1.0, step / config.warmup)


@dataclass
class Trajectory:
    """A run's telemetry: ``frame`` (tidy, :data:`rankcollapse.monitor.outputs.COLUMNS`: ``step, layer,
    hidden_state, hook, metric, value``), ``loss`` (per probe step: ``train_loss``, the mean training
    loss of the steps since the previous probe (NaN at step 0), and ``probe_loss`` on the held-out
    probe), the ``config``, the ``probe`` ids [probe, tokens] and the trained ``model``."""

    frame: Any
    loss: Any
    config: TrajectoryConfig
    probe: Tensor
    model: ByteLM
    failures: list[str]


def _seeds(seed: int) -> tuple[torch.Generator, torch.Generator]:
    """(weights, batches) generators of network ``seed``."""
    return torch.Generator().manual_seed(2 * seed), torch.Generator().manual_seed(2 * seed + 1)


def train_trajectory(
    config: TrajectoryConfig, on_probe: Callable[[int], None] | None = None
) -> Trajectory:
    """Train the model of ``config`` from its random init and probe it every ``every`` steps (module
    docstring). ``on_probe(step)`` is called after each probe (progress). RankCollapseError (one line)
    for a corpus too short for the excerpts."""
    import pandas as pd

    if not isinstance(config, TrajectoryConfig):
        raise RankCollapseError(f"config must be a TrajectoryConfig, got {type(config).__name__}")
    c = config
    train_ids, held = split_corpus(c)
    if held.numel() <= c.tokens or train_ids.numel() <= c.tokens:
        raise RankCollapseError(f"corpus {c.corpus!r} is too short for excerpts of {c.tokens} tokens")
    previous = torch.get_num_threads()
    if c.threads is not None:
        torch.set_num_threads(c.threads)
    try:
        w_gen, b_gen = _seeds(c.seed)
        model = ByteLM(c, w_gen)
        probe_full = excerpts(held, c.probe, c.tokens, torch.Generator().manual_seed(c.probe_seed))
        probe = probe_full[:, :-1]
        opt = torch.optim.AdamW(model.parameters(), lr=learning_rate(1, c), weight_decay=c.weight_decay)
        monitor = Monitor(every=c.every, probe=probe, metrics=TRAJECTORY_METRICS, diagnostics=True,
                          metric_threads=c.threads)
        losses: list[dict[str, float]] = []
        running: list[float] = []

        def probed(step: int) -> None:
            with torch.no_grad():
                held_loss = float(_loss(model, probe_full))
            train = sum(running) / len(running) if running else math.nan
            losses.append({"step": step, "train_loss": train, "probe_loss": held_loss})
            running.clear()
            if on_probe is not None:
                on_probe(step)

        monitor.measure(model, step=0)
        probed(0)
        for step in range(1, c.steps + 1):
            batch = excerpts(train_ids, c.batch, c.tokens, b_gen)
            for group in opt.param_groups:
                group["lr"] = learning_rate(step, c)
            loss = _loss(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            running.append(float(loss.detach()))
            monitor.step(model, step=step)
            if step % c.every == 0:
                probed(step)
        monitor.close()
    finally:
        torch.set_num_threads(previous)
    return Trajectory(monitor.to_frame(), pd.DataFrame(losses), c, probe, model, list(monitor.failures))


def _loss(model: ByteLM, ids: Tensor) -> Tensor:
    """Mean next-token cross-entropy (nats) of ``ids [b, n + 1]`` (inputs ``ids[:, :-1]``, targets
    ``ids[:, 1:]``)."""
    logits = model(ids[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(), ids[:, 1:].reshape(-1))


__all__ = ["VARIANTS", "Block", "ByteLM", "Trajectory", "TrajectoryConfig", "train_trajectory"]
