"""``SimulationConfig``: every setting of a simulator run, validated when it is built.

Validation (``__post_init__``, through :mod:`rankcollapse.edge.validate`) checks types, ranges, names,
user tensors (shape, real dtype, finite entries) and the estimated peak memory against what
the machine has, before anything is allocated; options that do not apply are refused
(``value_scale`` with ``value="identity"`` or a user ``value_matrix``, ...). The fields are the names
of ``core.names`` (``tokens``, ``samples``, ``mode``, ``d_qk``); stored params under older keys are
read by ``core.names.from_stored``, never by the config.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.execution import parse_device
from rankcollapse.core.norms import NORMS
from rankcollapse.core.precision import canonical_dtype_name, parse_dtype
from rankcollapse.dynamics.kernels import KERNELS, default_band_block
from rankcollapse.dynamics.layers import PLACEMENTS, LayerSpec, check_preset, get_preset
from rankcollapse.dynamics.weights import INPUT_KINDS, OUTPUT_FAMILIES, VALUE_FAMILIES
from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.edge.validate import (
    check_choice,
    check_float,
    check_int,
    check_memory,
    check_tensor,
    check_threads,
    quote,
    type_name,
)
from rankcollapse.metrics import (
    INFLUENCE_KEPT,
    METRIC_NAMES,
    RANK_NAMES,
    ROLLOUT_NAMES,
    SPEED_NAMES,
    metric_names,
)

#: Value families whose ``value_scale`` is meaningful.
SCALED_VALUES = ("gaussian", "orthogonal", "scaled-identity")

@dataclass
class SimulationConfig:
    """Everything that defines a run (JSON-able unless tensors are given).

    mask: mask spec (``rankcollapse.masks.parse_mask``), e.g. ``"causal"``, ``"window:w=8"``, a
    parsed ``Mask``, a predicate ``f(i, j)`` or a bool tensor [N, N] with N >= n (its top-left block;
    ``rankcollapse.masks.custom``); parsed once here (``parsed_mask``) and passed down as that object;
    the field then holds its spec (a predicate's or tensor's label, ``to_dict`` adds ``mask_note``).
    tokens, d, layers, samples: tokens N, features, depth, independent input samples (same network).
    mode: the block assembly, see ``PRESETS``; ``norm``/``placement``/``skip``/``mlp`` override it
    (``skip``: lambda of ``X + lambda f(X)``; 0 or None in an override means no skip); ``mix_post_share``
    (placement ``mix`` only: Mix-LN's share of post-LN layers, default ``layers.MIX_POST_SHARE``) and
    ``ngpt_step`` (placement ``ngpt`` only: nGPT's alpha, default ``layers.NGPT_STEP``), ``dyt_alpha``
    (norm ``dyt`` only: DyT's alpha, default ``core.norms.DYT_ALPHA``).
    heads, qk_dim (per-head query/key width, default d // heads), d_qk (the number under the square
    root in ``logits / sqrt(d_qk)``), value (W_V family) with value_scale (sigma, default 1; only
    for gaussian, orthogonal, scaled-identity), qk_scale, output (W_O).
    shared_weights: one layer's weights reused at every depth (else fresh per layer).
    inputs: ``gaussian``, ``sphere``, ``hemisphere`` (or ``input_tokens``: [n, d] or [b, n, d]).
    value_matrix: user W_V, [d, d] or [h, d, d] (shared by all layers) or [layers, h, d, d].
    mask_matrix: a user boolean [n, n] mask instead of ``mask``.
    dtype ``float64``/``float32`` (``f64``/``f32`` accepted); device ``cpu``/``cuda[:k]``; kernel
    ``auto``/``dense``/``sdpa``/``band`` (band_block: its query block size).
    metrics: column names to compute per layer (None = all of ``METRIC_NAMES``; mu and mu_rel
    always). stop_below: stop once every sample's mu_rel is below it. track_min_weight: record
    the smallest attention weight on an edge (None = only for pure attention, where the Theorem 1
    check uses it; it forces the explicit attention matrix, hence the dense cost).
    metric_threads: torch intra-op threads while measuring (default 1: the per-layer measures are
    small reductions that only wait for a partner thread on a loaded machine; None keeps torch's).
    Cumulative context (``metrics.rollout``, opt-in): ``metrics`` may name ``first_token_share_mean``
    and ``first_token_gap_max`` (never part of ``metrics=None``); ``influence`` keeps the batch-mean
    influence profile per layer, ``"last"`` (the last token's row ``P(t)[n-1, :]``) or ``"all"``
    (``P(t)``); ``rollout_residual`` is ``lam`` of the mixing ``lam I + (1 - lam) A(t)`` (0: ``A(t)``).
    alibi_slope: the slope ``m >= 0`` of a decay (ALiBi-type) bias ``B[i, j] = -m |i - j|`` added to every
    layer's logits (``masks.position.decay_bias`` through ``core.attention``'s one masked softmax; None:
    no bias); it runs the dense kernel (``kernel`` ``auto`` or ``dense``).
    rope_base: rotary position embeddings (``core.positions``, Hugging Face's rotate_half pairs): every
    layer's queries and keys turned at position ``p`` pair ``k`` by ``p theta_k``, ``theta_k = rope_scale
    base^(-2k/e)`` (``e`` the query/key width, ``qk_dim`` or ``d // heads``: even), before the one masked
    softmax, on any kernel; None: no rotation. rope_scale: ``theta_1`` (Wu et al.'s name of the largest
    frequency), 1 for plain RoPE; only with ``rope_base``. tied_qk: ``W_K = W_Q`` (queries equal keys).
    Either forms the head-averaged attention matrices of every layer (dense [b, h, n, n]).
    Ranks at the precision floor (``metrics.affine``, opt-in): ``metrics`` may name ``affine_rank`` and
    ``linear_rank`` of X(t), and ``norm_in_*`` / ``norm_out_*`` of what layer t's first normalisation
    received and returned (``dynamics.layers.norm_step``: the attention once more per layer; a preset
    with a normalisation only).
    Token speed (``metrics.speed``, opt-in): ``metrics`` may name ``token_speed``, the mean over tokens of
    ``||x_i(t) - x_i(t-1)|| / ||x_i(t-1)||`` (NaN at row 0).
    """

    mask: Any = "complete"
    tokens: int = 32
    d: int = 16
    layers: int = 128
    mode: str = "attn"
    norm: str | None = None
    placement: str | None = None
    skip: float | None = None
    mlp: bool | None = None
    mix_post_share: float | None = None
    ngpt_step: float | None = None
    dyt_alpha: float | None = None
    heads: int = 1
    qk_dim: int | None = None
    d_qk: float = 1.0
    value: str = "gaussian"
    value_scale: float | None = None
    qk_scale: float = 1.0
    output: str = "mean"
    shared_weights: bool = False
    inputs: str = "gaussian"
    samples: int = 8
    seed: int = 0
    dtype: str = "float64"
    device: str = "cpu"
    kernel: str = "auto"
    band_block: int | None = None
    metrics: tuple[str, ...] | str | None = None  # "mu,mu_rel" or names; metrics.metric_names parses it
    stop_below: float | None = None
    track_min_weight: bool | None = None
    metric_threads: int | None = 1
    influence: str | None = None
    rollout_residual: float = 0.0
    alibi_slope: float | None = None
    rope_base: float | None = None
    rope_scale: float = 1.0
    tied_qk: bool = False
    value_matrix: Tensor | None = field(default=None, repr=False)
    input_tokens: Tensor | None = field(default=None, repr=False)
    mask_matrix: Tensor | None = field(default=None, repr=False)
    parsed_mask: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    # ---- validation ------------------------------------------------------------------------------
    def validate(self) -> None:
        """Check (and normalise) every setting; RankCollapseError (one line) on a bad one."""
        self._check_scalars()
        self._check_names()
        self._check_tensors()
        self._check_mask_and_memory()

    def _check_scalars(self) -> None:
        for name in ("tokens", "d", "samples", "heads"):
            setattr(self, name, check_int(name, getattr(self, name), low=2 if name == "tokens" else 1))
        self.layers = check_int("layers", self.layers, low=0)
        self.seed = check_int("seed", self.seed, low=0)
        if self.qk_dim is not None:
            self.qk_dim = check_int("qk_dim", self.qk_dim, low=1)
        elif self.d % self.heads:
            raise RankCollapseError(f"heads must divide d = {self.d} (or give qk_dim), got {self.heads}")
        self.d_qk = check_float("d_qk", self.d_qk, low=0, low_open=True)
        self.qk_scale = check_float("qk_scale", self.qk_scale)
        if self.value_scale is not None:
            self.value_scale = check_float("value_scale", self.value_scale)
        if self.skip is not None:
            self.skip = check_float("skip", self.skip)
        if self.stop_below is not None:
            self.stop_below = check_float("stop_below", self.stop_below, low=0, low_open=True)
        if self.metric_threads is not None:
            self.metric_threads = check_threads("metric_threads", self.metric_threads)
        self.rollout_residual = check_float("rollout_residual", self.rollout_residual, low=0.0, high=1.0)
        if self.alibi_slope is not None:
            self.alibi_slope = check_float("alibi_slope", self.alibi_slope, low=0.0)
            if self.kernel not in ("auto", "dense"):
                raise RankCollapseError(
                    f"alibi_slope runs the dense kernel, not kernel {self.kernel!r} (allowed: auto, dense)")
        self._check_rope()
        if self.band_block is not None:
            self.band_block = check_int("band_block", self.band_block, low=1)
            if self.kernel not in ("auto", "band"):
                raise RankCollapseError(f"band_block applies to the band kernel, not kernel {self.kernel!r}")
        for name in ("shared_weights", "mlp", "track_min_weight", "tied_qk"):
            v = getattr(self, name)
            if not (isinstance(v, bool) or (v is None and name not in ("shared_weights", "tied_qk"))):
                raise RankCollapseTypeError(f"{name} must be True or False, got {quote(v)}")

    def _check_rope(self) -> None:
        """``rope_base`` > 1 and ``rope_scale`` > 0 finite; an even query/key width; no scale without RoPE."""
        self.rope_scale = check_float("rope_scale", self.rope_scale, low=0, low_open=True)
        if self.rope_base is None:
            if self.rope_scale != 1.0:
                raise RankCollapseError(f"rope_scale {self.rope_scale:g} applies with rope_base only "
                                        "(allowed without it: 1)")
            return
        self.rope_base = check_float("rope_base", self.rope_base, low=1, low_open=True)
        width = self.qk_width
        if width % 2:
            raise RankCollapseError(f"rope_base rotates query/key feature pairs: the query/key width e = "
                                    f"{width} is odd (allowed: an even qk_dim, or d // heads)")

    def _check_names(self) -> None:
        self.mode = check_preset(self.mode)
        for name, allowed in (("value", VALUE_FAMILIES), ("output", OUTPUT_FAMILIES), ("inputs", INPUT_KINDS),
                              ("kernel", KERNELS)):
            check_choice(name, getattr(self, name), allowed)
        if not isinstance(self.dtype, str | torch.dtype):
            raise RankCollapseTypeError(f"dtype must be a name (float64), got {type_name(self.dtype)}")
        self.dtype = canonical_dtype_name(str(self.dtype))
        if self.norm is not None:
            check_choice("norm", self.norm, NORMS)
        if self.placement is not None:
            check_choice("placement", self.placement, PLACEMENTS)
        self._check_device()
        self.layer_spec()  # the assembly's own checks (a field that does not apply to the placement, ...)
        self.metrics = metric_names(self.metrics, extra=(*ROLLOUT_NAMES, *RANK_NAMES, *SPEED_NAMES))
        stepped = [m for m in self.metrics or () if m.startswith("norm_") and m in RANK_NAMES]
        if stepped and self.layer_spec().norm == "none":
            raise RankCollapseError(
                f"metrics {stepped[0]!r} measures a layer's normalisation; mode {self.mode!r} has none "
                "(allowed: a mode or norm with a normalisation)"
            )
        if self.influence is not None:
            check_choice("influence", self.influence, INFLUENCE_KEPT)
        if self.value_scale is not None and self.value not in SCALED_VALUES:
            raise RankCollapseError(f"value_scale does not apply to value {self.value!r} (allowed with "
                                    f"{', '.join(SCALED_VALUES)})")

    def _check_device(self) -> None:
        """The device through the one parser (``core.execution.parse_device``), float64 there included."""
        if not isinstance(self.device, str):
            raise RankCollapseTypeError(f"device must be 'cpu' or 'cuda[:k]', got {quote(self.device)}")
        self.device = str(parse_device(self.device, self.dtype))

    def _check_tensors(self) -> None:
        d, h = self.d, self.heads
        if self.value_matrix is not None:
            check_tensor("value_matrix", self.value_matrix,
                         shapes=[(d, d), (h, d, d), (self.layers, h, d, d)])
            if self.value_scale is not None:
                raise RankCollapseError("value_scale does not apply to a user value_matrix (scale it)")
            if self.value != "gaussian":
                raise RankCollapseError(f"give value {self.value!r} or a value_matrix, not both")
            if self.shared_weights and self.value_matrix.ndim == 4:
                raise RankCollapseError("shared_weights reuses one layer; a per-layer value_matrix "
                                        "[layers, h, d, d] does not apply")
        if self.input_tokens is not None:
            n, b = self.tokens, self.samples
            check_tensor("input_tokens", self.input_tokens, shapes=[(n, d), (b, n, d)])
            if self.inputs != "gaussian":
                raise RankCollapseError(f"give inputs {self.inputs!r} or input_tokens, not both")
        if self.mask_matrix is not None:
            n = self.tokens
            m = check_tensor("mask_matrix", self.mask_matrix, shapes=[(n, n)], floating=False, finite=False)
            if m.dtype != torch.bool:
                raise RankCollapseError(f"mask_matrix must be a torch.bool tensor, got {m.dtype}")
            if not bool(m.diagonal().all()):
                raise RankCollapseError("mask_matrix lacks self-loops: every token must attend to itself")
            if not (isinstance(self.mask, str) and self.mask == "complete"):
                raise RankCollapseError("give mask or mask_matrix, not both")

    def _check_mask_and_memory(self) -> None:
        """Parse the mask once, then refuse a run that would not fit in memory (before any allocation)."""
        band = None
        if self.mask_matrix is None:
            from rankcollapse.masks import Mask, parse_mask

            kept = self.parsed_mask is not None and self.parsed_mask.spec == self.mask
            if isinstance(self.mask, Mask):
                self.parsed_mask = self.mask
            elif isinstance(self.mask, str) and kept:
                pass  # validated again (``simulate`` re-checks): keep the mask parsed at construction
            elif isinstance(self.mask, str | Tensor) or callable(self.mask):
                self.parsed_mask = parse_mask(self.mask)  # a predicate or a tensor: masks/custom.py
            else:
                raise RankCollapseTypeError(f"mask must be a spec, a Mask, a predicate f(i, j) or a bool "
                                            f"tensor, got {type_name(self.mask)}")
            self.mask = self.parsed_mask.spec
        itemsize = parse_dtype(self.dtype).itemsize
        what = (f"simulate with tokens = {self.tokens}, d = {self.d}, samples = {self.samples}, "
                f"layers = {self.layers}")
        check_memory(what, estimate_memory(self, itemsize, band=None, fixed_only=True))
        if self.parsed_mask is not None:
            band = self.parsed_mask.band(self.tokens)
            full, causal = (-(self.tokens - 1), self.tokens - 1), (-(self.tokens - 1), 0)
            shown = quote(self.mask)
            if self.kernel == "band" and band is None:
                raise RankCollapseError(f"kernel 'band' needs a band mask (lo <= j - i <= hi), not {shown}")
            if self.kernel == "sdpa" and band not in (full, causal):
                raise RankCollapseError(f"kernel 'sdpa' needs the complete or the causal mask, not {shown}")
        check_memory(what, estimate_memory(self, itemsize, band=band))

    # ---- derived -----------------------------------------------------------------------------------
    @property
    def rollout_names(self) -> tuple[str, ...]:
        """The cumulative-context columns asked for (``metrics.rollout.ROLLOUT_NAMES``), in order."""
        return tuple(m for m in (self.metrics or ()) if m in ROLLOUT_NAMES)

    @property
    def speed_names(self) -> tuple[str, ...]:
        """The token-speed columns asked for (``metrics.SPEED_NAMES``), in order."""
        return tuple(m for m in (self.metrics or ()) if m in SPEED_NAMES)

    @property
    def rank_names(self) -> tuple[str, ...]:
        """The rank columns asked for (``metrics.affine.RANK_NAMES``), in order."""
        return tuple(m for m in (self.metrics or ()) if m in RANK_NAMES)

    @property
    def rollout(self) -> bool:
        """Whether the run forms the cumulative context ``P(t)`` (a rollout column or a kept profile)."""
        return bool(self.rollout_names) or self.influence is not None

    @property
    def qk_width(self) -> int:
        """The per-head query/key width ``e``: ``qk_dim``, or ``d // heads``."""
        return int(self.qk_dim or self.d // self.heads)

    @property
    def scale(self) -> float:
        """The value family's sigma (``value_scale``, 1 when not given)."""
        return 1.0 if self.value_scale is None else float(self.value_scale)

    def layer_spec(self) -> LayerSpec:
        """The preset with the explicit overrides applied."""
        base = get_preset(self.mode)
        skip = base.skip if self.skip is None else (None if self.skip == 0 else float(self.skip))
        return LayerSpec(
            norm=base.norm if self.norm is None else self.norm,
            placement=base.placement if self.placement is None else self.placement,
            skip=skip,
            mlp=base.mlp if self.mlp is None else self.mlp,
            mix_post_share=self.mix_post_share,
            ngpt_step=self.ngpt_step,
            dyt_alpha=self.dyt_alpha,
            attention=base.attention,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able settings (user tensors reported by shape only)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "parsed_mask":
                continue
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else (
                {"given_shape": list(v.shape)} if isinstance(v, Tensor) else v)
        out["layer_spec"] = self.layer_spec().__dict__
        from rankcollapse.masks import in_memory_note

        note = in_memory_note(self.parsed_mask)
        if note:
            out["mask_note"] = note
        return out


def estimate_memory(
    cfg: SimulationConfig, itemsize: int, band: tuple[int, int] | None, fixed_only: bool = False
) -> float:
    """Estimated peak bytes of a run (an upper-side estimate, within a small factor).

    Dense boolean mask ``2 n^2`` (built then copied); tokens and per-layer temporaries
    ``s b n (4 h e + 4 h d + 4 d)`` plus the float64 draw; attention ``2 s b h n W`` with ``W = n``
    (dense/SDPA) or the band window ``2 B + hi - lo``; cosines ``s b min(n, 1024) n``; kept rows
    ``(T + 1)(24 b + 120 (3 m + 3))``; the cumulative context (when asked) ``s b n^2 (3 + h)`` and
    its kept profiles ``8 (T + 1) n`` (``n^2`` for ``influence="all"``); the trajectory
    ``(T + 1) s b n d`` when kept.
    ``fixed_only``: only the parts that do not depend on the kernel (checked first, so a huge n is
    refused before the mask is even asked for its band).
    """
    n, d, b, h, t = cfg.tokens, cfg.d, cfg.samples, cfg.heads, cfg.layers
    e = cfg.qk_dim or d // h
    s = itemsize
    mask_bytes = 0 if cfg.mask_matrix is not None else 2.0 * n * n
    tokens = s * b * n * (4.0 * h * e + 4.0 * h * d + 4.0 * d) + 8.0 * b * n * d
    names = len(METRIC_NAMES) if cfg.metrics is None else len(cfg.metrics) + 2
    rows = (t + 1.0) * (24.0 * b + 120.0 * (3 * names + 3))
    if cfg.rollout:  # P(t) and its product, the attention of every head, the kept profiles
        rows += s * b * n * n * (3.0 + h) + 8.0 * (t + 1.0) * (n * n if cfg.influence == "all" else n)
    fixed = mask_bytes + tokens + rows
    if fixed_only:
        return fixed
    width = float(n)
    if band is not None and cfg.kernel in ("auto", "band") and cfg.alibi_slope is None:  # a bias runs dense
        lo, hi = band
        block = cfg.band_block or default_band_block(lo, hi)
        width = min(float(n), 2.0 * block + hi - lo)
    attention = 2.0 * s * b * h * n * width
    cosines = s * b * min(n, 1024) * float(n)
    return fixed + attention + cosines
