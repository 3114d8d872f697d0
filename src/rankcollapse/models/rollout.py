"""Attention rollout of a real model's own attention: position influence and first-token concentration.

The cumulative context of a model's attention (Wu, Wang, Jegelka, Jadbabaie, arXiv 2502.01951), with
the residual-aware mixing of Herasimchyk et al. (arXiv 2602.16837), measured on text excerpts:

- per head ``h``: ``P_h(t) = M_h(t) ... M_h(1)``, ``M_h(t) = lam I + (1 - lam) A_h(t)``, the same head
  index at every layer;
- averaged over heads: ``P(t) = M(t) ... M(1)``, ``M(t) = lam I + (1 - lam) (1/h) sum_h A_h(t)``
  (``metrics.rollout.head_mean``; the product of the averages, not the average of the products).

``A_h(t)`` is layer ``t``'s attention weights ``[b, h, n, n]`` as the model computes them in its own
forward (mode ``full``, its own masks and ``d_qk``), taken from the stream's attention record
(``models.stream.iter_hidden_states(record=...)``, the hook ``analyze --diagnostics`` reads); the
products are formed in float64. Index letters: b samples (excerpts), h heads, n/i/j tokens, t layers.

Measured per sample (:class:`RolloutMeasurement`), for each ``lam`` of :class:`RolloutConfig`:

- ``first_token_share_mean`` (mean over tokens ``i`` of ``P(t)[i, 0]``) and ``first_token_gap_max``
  (``max_i sum_{j>=1} P(t)[i, j]``) of the head-averaged rollout, by depth (``metrics.rollout``);
- the last token's influence profile ``P(t)[n-1, :]`` by depth, and its ``start_over_middle_log`` /
  ``end_over_middle_log`` (``metrics.influence``: the U shape's two arms);
- per head: ``first_token_share_mean`` of ``P_h(t)`` by depth, and the last token's profile of
  ``P_h(L)`` at the last layer;

and, beside them, the sink measures the project already has, from the same attention
(``metrics.diagnostics``): ``first_token_attention`` (``mean_i A_h(t)[i, 0]``, per head and its mean over
heads) and ``sink_rate`` (share of heads above ``sink_threshold``), for layers ``t = 1..L``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.core.precision import dtype_name
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.metrics import diagnostics as dg
from rankcollapse.metrics.influence import INFLUENCE_SHAPE_NAMES, check_ends, end_over_middle_logs
from rankcollapse.metrics.rollout import ROLLOUT_NAMES, head_mean, rollout_columns, rollout_step

OnLayer = Callable[[int], None]
#: Per-sample columns of each ``lam`` by depth ([b, L+1] each).
ROLLOUT_COLUMNS: tuple[str, ...] = (*ROLLOUT_NAMES, *INFLUENCE_SHAPE_NAMES)
#: Per-sample sink columns by depth, layers 1..L ([b, L] each): means over heads.
SINK_COLUMNS: tuple[str, ...] = ("first_token_attention", "sink_rate")


@dataclass
class RolloutConfig:
    """One run of :func:`measure_rollout`: one model, its own attention, ``samples`` excerpts of ``tokens``.

    ``lams``: the residual shares ``lam`` in [0, 1] of the mixing (distinct; 0: the plain rollout of Wu
    et al.). ``ends``: the positions at each end of the profile for ``metrics.influence`` (``2 ends <
    tokens``). ``sink_threshold``: ``sink_rate``'s threshold on a head's mean attention to the first token.
    ``seed``: the excerpts drawn (and the weights of a random init)."""

    model: str = "minilm"
    corpus: str = "wikipedia"
    samples: int = 8
    tokens: int = 128
    dtype: str = "float32"
    seed: int = 0
    lams: tuple[float, ...] = (0.0, 0.5)
    ends: int = 16
    sink_threshold: float = dg.SINK_THRESHOLD

    def __post_init__(self) -> None:
        if isinstance(self.lams, int | float):
            self.lams = (self.lams,)
        lams = tuple(self.lams)
        bad = [v for v in lams if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1]
        if bad or not lams:
            raise RankCollapseError(f"lams {quote(list(lams), 40)} is invalid; allowed: numbers in [0, 1]")
        if len(set(lams)) != len(lams):
            raise RankCollapseError(f"lams {quote(list(lams), 40)} repeats a value; allowed: distinct values")
        self.lams = tuple(float(v) for v in lams)
        for name in ("samples", "tokens", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "seed" else 1):
                raise RankCollapseError(f"{name}={quote(v, 20)} is invalid; allowed: a positive integer")
        check_ends(self.ends, self.tokens)
        t = self.sink_threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= t <= 1.0:
            raise RankCollapseError(f"sink_threshold={quote(t, 20)} is invalid; allowed: a number in [0, 1]")
        self.dtype = dtype_name(self.dtype)


@dataclass
class RolloutMeasurement:
    """What :func:`measure_rollout` measured (module docstring), per-sample values in sample order.

    ``columns[lam][name]``: [b, L+1] for each name of :data:`ROLLOUT_COLUMNS`; ``profile[lam]``: the last
    token's head-averaged profile [b, L+1, n]; ``head_share[lam]``: [b, h, L+1]; ``head_profile[lam]``:
    the last token's per-head profile at layer L [b, h, n]; ``sinks[name]``: [b, L] (layers 1..L) for each
    of :data:`SINK_COLUMNS`; ``head_first_token_attention``: [b, h, L]; ``model``: the model's columns
    (``models.measure.model_columns``) and ``own_mask``, the spec of its first layer's own mask (``causal``
    for a decoder, ``complete`` for an encoder); ``summary``: the run's facts."""

    lams: tuple[float, ...]
    columns: dict[float, dict[str, np.ndarray]]
    profile: dict[float, np.ndarray]
    head_share: dict[float, np.ndarray]
    head_profile: dict[float, np.ndarray]
    sinks: dict[str, np.ndarray]
    head_first_token_attention: np.ndarray
    model: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def layers(self) -> int:
        """L, the depth the products ran to."""
        return int(next(iter(self.profile.values())).shape[1]) - 1


class _Rollouts:
    """The running products of one batch: per lam, the head-averaged ``P(t)`` [b, n, n] and the per-head
    ``P_h(t)`` [b, h, n, n] in float64, and what each layer keeps of them."""

    def __init__(self, lams: tuple[float, ...], b: int, n: int, ends: int) -> None:
        self.lams, self.ends = lams, ends
        eye = torch.eye(n, dtype=torch.float64)
        self.mean = {lam: eye.expand(b, n, n).clone() for lam in lams}
        self.head: dict[float, Tensor] = {}
        self.cols: dict[float, dict[str, list[Tensor]]] = {
            lam: {k: [] for k in ROLLOUT_COLUMNS} for lam in lams
        }
        self.prof: dict[float, list[Tensor]] = {lam: [] for lam in lams}
        self.hshare: dict[float, list[Tensor]] = {lam: [] for lam in lams}
        self.sinks: dict[str, list[Tensor]] = {k: [] for k in SINK_COLUMNS}
        self.hfirst: list[Tensor] = []
        self.keep()

    def keep(self) -> None:
        """Record every kept quantity of the current products (layer t)."""
        for lam in self.lams:
            p = self.mean[lam]
            got = rollout_columns(p)
            last = p[:, -1, :]
            got.update(end_over_middle_logs(last, self.ends))
            for k in ROLLOUT_COLUMNS:
                self.cols[lam][k].append(got[k])
            self.prof[lam].append(last.clone())
            if lam in self.head:
                self.hshare[lam].append(self.head[lam][..., :, 0].mean(-1))

    def step(self, attn: Tensor, threshold: float) -> None:
        """Multiply layer t's attention ``attn [b, h, n, n]`` in, and record its sink measures."""
        a = attn.detach().to(device="cpu", dtype=torch.float64)
        h = a.shape[1]
        for lam in self.lams:
            if lam not in self.head:
                n = a.shape[-1]
                eye = torch.eye(n, dtype=torch.float64)
                self.head[lam] = eye.expand(a.shape[0], h, n, n).clone()
                self.hshare[lam].append(torch.ones(a.shape[0], h, dtype=torch.float64) / n)
            elif self.head[lam].shape[1] != h:
                raise RankCollapseError(
                    f"a layer has {h} heads, an earlier one {self.head[lam].shape[1]}; a per-head rollout "
                    "needs the same heads in every layer"
                )
            self.mean[lam] = rollout_step(self.mean[lam], head_mean(a), lam)
            self.head[lam] = rollout_step(self.head[lam], a, lam)
        first = dg.first_token_attention(a)  # [b, h]
        self.hfirst.append(first)
        self.sinks["first_token_attention"].append(first.mean(-1))
        self.sinks["sink_rate"].append(dg.sink_rate(a, threshold))
        self.keep()

    def head_last(self, lam: float) -> Tensor:
        """The last token's per-head profile at the current layer [b, h, n]."""
        return self.head[lam][:, :, -1, :].clone()


def measure_rollout(
    cfg: RolloutConfig, on_layer: OnLayer, device: str = "cpu", batch_size: int | None = None
) -> RolloutMeasurement:
    """Rollout, influence profiles and sink measures of one model's own attention (module docstring).

    The excerpts go through the model ``batch_size`` at a time on ``device``; each sample's values are
    its own (a product per sample), concatenated in sample order. ``on_layer(t)`` after each layer
    (t = 0..L, as for one batch)."""
    from rankcollapse.core.execution import batch_slices
    from rankcollapse.models import excerpts, iter_hidden_states  # the package's: patchable in tests
    from rankcollapse.models.measure import Ticks, model_columns
    from rankcollapse.models.run_model import load_model_cached
    from rankcollapse.models.stream import iter_batches

    start = time.perf_counter()
    model = load_model_cached(cfg.model, cfg.dtype, cfg.seed, device)
    if not model.dissected:
        raise RankCollapseError(
            f"{cfg.model!r} is not dissected: its attention weights are not available to the rollout"
        )
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    loaded = time.perf_counter() - start
    depth = len(model.layers)
    chunks = batch_slices(cfg.samples, batch_size)
    ticks = Ticks(on_layer, depth + 1, len(chunks))
    parts: list[_Rollouts] = []
    heads_last: list[dict[float, Tensor]] = []
    for batch in iter_batches(ids, batch_size, model.device):
        record: dict[str, Any] = {}
        roll = _Rollouts(cfg.lams, batch.size, cfg.tokens, cfg.ends)
        for t, _, _x in iter_hidden_states(model, batch.ids, mode="full", record=record):
            if t > 0:
                roll.step(batch.real(record.pop("attn")), cfg.sink_threshold)
            ticks.step()
        parts.append(roll)
        heads_last.append({lam: roll.head_last(lam) for lam in cfg.lams})

    def cat(get: Callable[[_Rollouts], list[Tensor]], axis: int) -> np.ndarray:
        return torch.cat([torch.stack(get(r), dim=axis) for r in parts]).numpy()

    columns = {lam: {k: cat(lambda r, lam=lam, k=k: r.cols[lam][k], 1) for k in ROLLOUT_COLUMNS}
               for lam in cfg.lams}
    profile = {lam: cat(lambda r, lam=lam: r.prof[lam], 1) for lam in cfg.lams}
    head_share = {lam: cat(lambda r, lam=lam: r.hshare[lam], 2) for lam in cfg.lams}
    head_profile = {lam: torch.cat([h[lam] for h in heads_last]).numpy() for lam in cfg.lams}
    sinks = {k: cat(lambda r, k=k: r.sinks[k], 1) for k in SINK_COLUMNS}
    hfirst = cat(lambda r: r.hfirst, 2)
    info = {**model_columns(model), "own_mask": model.own_layer_mask(0).spec}
    summary = {
        **info,
        "layers_run": depth,
        "heads": int(hfirst.shape[1]),
        "load_s": round(loaded, 2),
        "device": str(model.device),
        "batch_size": chunks[0].stop - chunks[0].start if chunks else 0,
        "seconds": round(time.perf_counter() - start, 2),
    }
    for lam in cfg.lams:
        share = columns[lam]["first_token_share_mean"][:, -1]
        summary[f"first_token_share_last_lam{lam:g}"] = float(np.mean(share)) if share.size else math.nan
    return RolloutMeasurement(
        cfg.lams, columns, profile, head_share, head_profile, sinks, hfirst, info, summary
    )
