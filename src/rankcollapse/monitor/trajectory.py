"""Collapse over training: a small decoder or encoder LM trained from random init, probed by :class:`Monitor`.

Index letters: b batch, n tokens, d features, h heads, e per-head features, t layers, v vocabulary.

The model (ours): byte-level tokens (the 256 bytes of the UTF-8 text and a start token that opens
every excerpt, ``v = 257``; the encoder adds a ``[MASK]`` token, ``v = 258``), ``X(0) = E[ids] + P``
(token and learned position embeddings), then
``layers`` blocks of :func:`rankcollapse.dynamics.layers.apply_layer` (attention through
``core.attention`` under the run's mask, the parameter-free LayerNorm of ``core.norms``, a GELU MLP
of width ``4d``), then ``logits = N_f(X(L)) W_U`` (``N_f`` a final LayerNorm for pre-LN only). Each
head: ``A_h = softmax_M(X W_Q,h (X W_K,h)^T / sqrt(e))``, ``Attn(X) = sum_h A_h X W_V,h W_O,h`` with
``e = d / h``. The block :data:`VARIANTS`, each a preset of the simulator (``dynamics.layers.PRESETS``: one
block vocabulary; the labels are the ones this module's configs and stored runs use):

- ``post-ln``  = ``transformer``          ``Y = LN(X + Attn(X)); X <- LN(Y + MLP(Y))``  (BERT's placement)
- ``pre-ln``   = ``transformer-pre``      ``Y = X + Attn(LN(X)); X <- Y + MLP(LN(Y))``  (GPT-2's)
- ``no-ln``    = ``transformer-no-ln``    ``Y = X + Attn(X);     X <- Y + MLP(Y)``      (the skips, no norm)
- ``no-skip``  = ``transformer-no-skip``  ``Y = LN(Attn(X));     X <- LN(MLP(Y))``      (post-LN, no skips)

The :data:`ARCHITECTURES` and their masks (any mask of :func:`rankcollapse.masks.parse_mask`):

- ``decoder``: a causal mask (``causal``, the default; ``causal-window:w=W``: each token sees itself and
  the ``W`` before it); a mask that lets a token see a later one is refused (it would read its own
  target). Objective: next-byte cross-entropy, every position.
- ``encoder``: a bidirectional mask (``complete``, the default: BERT's; ``window:w=W``); a mask under
  which no token sees a later one is refused (that is a decoder). Objective: masked-language modelling
  (BERT's, without its 80/10/10 split): each position ``i >= 1`` is replaced by ``[MASK]`` with
  probability ``mask_rate`` (at least one per batch), and the loss is the cross-entropy of the original
  byte at the replaced positions only.

Training: ``batch`` excerpts of ``tokens`` positions (the start token, then ``tokens - 1`` bytes; the
decoder's targets are the same excerpt shifted by one byte) drawn from the first ``1 - held_out`` of a
bundled corpus (:mod:`rankcollapse.models.corpora`), AdamW with a linear warm-up over ``warmup`` steps
to ``lr`` then constant. Two ``torch.Generator`` objects seeded from ``seed`` draw the weights and the
batches (with the encoder's masked positions); the probe (``probe`` excerpts of the held-out tail,
seeded by ``probe_seed``, with its masked positions drawn from the same seed) is the same for every
seed, so the networks are the only thing that differ. The probe's hidden states are those of the
clean excerpts (no ``[MASK]``), for both architectures.

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
from rankcollapse.core.precision import dtype_name, parse_dtype
from rankcollapse.dynamics.kernels import plan_kernel
from rankcollapse.dynamics.layers import LayerSpec, apply_layer, get_preset
from rankcollapse.dynamics.weights import LayerWeights
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_memory, check_threads, quote
from rankcollapse.monitor.telemetry import DEFAULT_METRICS, Monitor

#: The block variants (module docstring): the label a config and a stored run use -> the simulator's preset
#: (``dynamics.layers.PRESETS``) whose :class:`LayerSpec` the blocks apply.
VARIANTS: dict[str, str] = {
    "post-ln": "transformer",
    "pre-ln": "transformer-pre",
    "no-ln": "transformer-no-ln",
    "no-skip": "transformer-no-skip",
}
#: The models (module docstring): name -> the mask a config without one gets.
ARCHITECTURES: dict[str, str] = {"decoder": "causal", "encoder": "complete"}
#: Byte-level vocabulary: the 256 byte values and the start token (the decoder's); the encoder adds
#: ``[MASK]``.
START_TOKEN = 256
VOCAB = 257
MASK_TOKEN = 257
ENCODER_VOCAB = 258
#: The encoder's default share of masked positions (BERT's 15 %).
MASK_RATE = 0.15
#: A target the loss skips (``torch.nn.functional.cross_entropy``'s ``ignore_index``).
IGNORED = -100
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
    """One training run (module docstring). ``architecture``: ``decoder`` or ``encoder``
    (:data:`ARCHITECTURES`); ``variant``: one of :data:`VARIANTS`, by its label or by the simulator preset's
    name (``transformer-pre`` is ``pre-ln``; stored as the label, so either gives the same run); ``mask``:
    a mask spec, causal for a decoder and bidirectional for an encoder (None: ``causal`` / ``complete``);
    ``mask_rate``: the encoder's share of masked positions (None: :data:`MASK_RATE`; refused for a decoder);
    ``layers``, ``d``, ``heads`` (``d`` a multiple of ``heads``); ``tokens`` per excerpt,
    ``batch`` excerpts per step, ``steps`` optimiser steps; ``lr`` the peak learning rate after a linear
    ``warmup`` (steps), ``weight_decay`` AdamW's; ``every``: a probe every k steps (and at step 0);
    ``probe`` held-out excerpts per probe, drawn with ``probe_seed``; ``corpus`` a bundled corpus,
    ``held_out`` the share of its tail kept for the probe; ``seed`` the network (weights and batches);
    ``dtype`` of the weights and the probe (``float32`` or ``float64``: half precision is refused, training
    from a random init in it would need loss scaling and float32 master weights); ``threads`` torch
    threads while it runs (None: as set)."""

    variant: str = "pre-ln"
    mask: str | None = None
    architecture: str = "decoder"
    mask_rate: float | None = None
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

        if self.architecture not in ARCHITECTURES:
            allowed = ", ".join(ARCHITECTURES)
            raise RankCollapseError(f"architecture={quote(self.architecture)} is invalid; allowed: {allowed}")
        encoder = self.architecture == "encoder"
        if self.mask is None:
            self.mask = ARCHITECTURES[self.architecture]
        if not encoder and self.mask_rate is not None:
            raise RankCollapseError(
                f"mask_rate={quote(self.mask_rate)} applies only to architecture='encoder' (masked-language "
                "modelling); a decoder predicts every next byte"
            )
        if encoder:
            rate = MASK_RATE if self.mask_rate is None else self.mask_rate
            self.mask_rate = _number("mask_rate", rate, 0.0, 1.0, open_low=True)
        by_preset = {preset: label for label, preset in VARIANTS.items()}
        self.variant = by_preset.get(self.variant, self.variant)  # the preset's name -> its label
        if self.variant not in VARIANTS:
            allowed = ", ".join(f"{label} ({preset})" for label, preset in VARIANTS.items())
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
        dtype_name(self.dtype)  # full precision only: AdamW from a random init in half precision is refused
        if self.threads is not None:
            self.threads = check_threads("threads", self.threads)
        mask = parse_mask(self.mask).dense(self.tokens)
        sees_later = bool(mask.triu(1).any())
        if sees_later and not encoder:
            raise RankCollapseError(
                f"mask={quote(self.mask)} lets a token see a later one; allowed: a causal mask "
                "(causal, causal-window:w=W) for a decoder (architecture='encoder' for a bidirectional one)"
            )
        if encoder and not sees_later:
            raise RankCollapseError(
                f"mask={quote(self.mask)} lets no token see a later one; allowed: a bidirectional mask "
                "(complete, window:w=W) for an encoder"
            )
        self.mask_dense = mask
        check_memory(f"training a {self.layers}-layer model of width d = {self.d}, batch {self.batch} x "
                     f"{self.tokens} tokens ({self.dtype})", self.memory_bytes(),
                     allowed="a smaller batch, tokens, d or layers")

    def memory_bytes(self) -> float:
        """Estimated peak bytes of the training, an upper bound (measured against the peak resident memory
        by ``tests/monitor/test_training_memory.py``). With ``P = 2 V d + n d + 12 L d^2`` parameters, ``s``
        bytes a number, ``h`` heads, ``p`` probe excerpts:

        ``2 s max(6 P + L (10 b n d + 3 b h n^2) + 2 b n V,  P + L (4 p n d + 3 p h n^2))``

        the training step (weights, gradients, AdamW's moments and its temporaries; per layer the
        activations kept for the backward pass, the 4d-wide MLP's included, and the attention scores and
        weights; the logits and their gradient) or the probe's forward with its attention diagnostics,
        whichever is larger; 2 for the allocator. Coefficients fitted on six configurations (d 64..1024,
        n 64..512, float32 and float64): the estimate was 1.4 to 2.5 times the growth of the process's own
        peak memory (RssAnon; glibc's default heap), 1.2 to 2.2 times with the CLI's raised mmap threshold."""
        s, v, n, d, L, h = self.torch_dtype.itemsize, self.vocab, self.tokens, self.d, self.layers, self.heads
        params = 2.0 * v * d + n * d + 12.0 * L * d * d
        b, p = float(self.batch), float(self.probe)
        train = 6 * params + L * (10 * b * n * d + 3 * b * h * n * n) + 2 * b * n * v
        probe = params + L * (4 * p * n * d + 3 * p * h * n * n)
        return 2.0 * s * max(train, probe)

    @property
    def torch_dtype(self) -> torch.dtype:
        return parse_dtype(self.dtype)

    @property
    def vocab(self) -> int:
        """The model's vocabulary: :data:`VOCAB`, the encoder's :data:`ENCODER_VOCAB`."""
        return ENCODER_VOCAB if self.architecture == "encoder" else VOCAB


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
    """The decoder or encoder LM of the module docstring. ids: int64 [b, n] -> logits [b, n, v]."""

    def __init__(self, config: TrajectoryConfig, generator: torch.Generator) -> None:
        super().__init__()
        c, dtype = config, config.torch_dtype
        spec = get_preset(VARIANTS[c.variant])
        self.embed = nn.Parameter(gaussian((c.vocab, c.d), generator).to(dtype))
        self.position = nn.Parameter(gaussian((c.tokens, c.d), generator).to(dtype))
        self.blocks = nn.ModuleList(
            Block(spec, c.d, c.heads, c.mask_dense, generator, dtype) for _ in range(c.layers)
        )
        self.final_norm = spec.placement == "pre" and spec.norm != "none"
        self.unembed = nn.Parameter(gaussian((c.d, c.vocab), generator, 1.0 / math.sqrt(c.d)).to(dtype))

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


def masked_positions(samples: int, tokens: int, rate: float, generator: torch.Generator) -> Tensor:
    """The encoder's masked positions: bool [samples, tokens], each position ``i >= 1`` True with
    probability ``rate`` (one uniform draw per position from ``generator``); in a batch where none is,
    the position ``i >= 1`` of sample 0 with the least draw is, so a batch always has a target."""
    draw = torch.rand(samples, tokens, generator=generator)
    chosen = draw < rate
    chosen[:, 0] = False  # the start token stays: it is the encoder's [CLS]
    if not bool(chosen.any()):
        chosen[0, 1 + int(draw[0, 1:].argmin())] = True
    return chosen


def training_pair(ids: Tensor, config: TrajectoryConfig, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(inputs, targets) of excerpts ``ids [b, tokens + 1]`` (:func:`excerpts`): the decoder's
    ``ids[:, :-1]`` and ``ids[:, 1:]``; the encoder's ``ids[:, :-1]`` with ``[MASK]`` at
    :func:`masked_positions` (drawn from ``generator``) and the original bytes there as targets
    (:data:`IGNORED` elsewhere). Both int64 [b, tokens]."""
    clean = ids[:, :-1]
    if config.architecture == "decoder":
        return clean, ids[:, 1:]
    assert config.mask_rate is not None  # set on construction for an encoder
    chosen = masked_positions(clean.shape[0], clean.shape[1], config.mask_rate, generator)
    inputs = clean.masked_fill(chosen, MASK_TOKEN)
    return inputs, clean.masked_fill(~chosen, IGNORED)


def learning_rate(step: int, config: TrajectoryConfig) -> float:
    """``lr min(1, step / warmup)`` at optimiser step ``step`` (1-based; no warm-up: ``lr``)."""
    return config.lr if config.warmup == 0 else config.lr * min(1.0, step / config.warmup)


@dataclass
class Trajectory:
    """A run's telemetry: ``frame`` (tidy, :data:`rankcollapse.monitor.outputs.COLUMNS`: ``step, layer,
    hidden_state, hook, metric, value``), ``loss`` (per probe step: ``train_loss``, the mean training
    loss of the steps since the previous probe (NaN at step 0), and ``probe_loss`` on the held-out
    probe), the ``config``, the ``probe`` ids [probe, tokens] the monitor measures (clean excerpts) and
    the trained ``model``."""

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
        probe_gen = torch.Generator().manual_seed(c.probe_seed)
        probe_full = excerpts(held, c.probe, c.tokens, probe_gen)
        probe = probe_full[:, :-1]
        probe_pair = training_pair(probe_full, c, probe_gen)
        opt = torch.optim.AdamW(model.parameters(), lr=learning_rate(1, c), weight_decay=c.weight_decay)
        monitor = Monitor(every=c.every, probe=probe, metrics=TRAJECTORY_METRICS, diagnostics=True,
                          metric_threads=c.threads)
        losses: list[dict[str, float]] = []
        running: list[float] = []

        def probed(step: int) -> None:
            with torch.no_grad():
                held_loss = float(_loss(model, probe_pair))
            train = sum(running) / len(running) if running else math.nan
            losses.append({"step": step, "train_loss": train, "probe_loss": held_loss})
            running.clear()
            if on_probe is not None:
                on_probe(step)

        monitor.safe_measure(model, step=0)  # a probe that fails is one line; the training goes on
        probed(0)
        for step in range(1, c.steps + 1):
            batch = training_pair(excerpts(train_ids, c.batch, c.tokens, b_gen), c, b_gen)
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


def _loss(model: ByteLM, pair: tuple[Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy (nats) of the model on ``(inputs, targets)`` [b, n] each (:func:`training_pair`),
    over the targets that are not :data:`IGNORED`."""
    inputs, targets = pair
    logits = model(inputs)
    flat = logits.reshape(-1, logits.shape[-1]).float()
    return nn.functional.cross_entropy(flat, targets.reshape(-1), ignore_index=IGNORED)


__all__ = [
    "ARCHITECTURES",
    "VARIANTS",
    "Block",
    "ByteLM",
    "Trajectory",
    "TrajectoryConfig",
    "masked_positions",
    "train_trajectory",
    "training_pair",
]
