"""Thin task adapter over ``models.rollout``: one model's rollout, influence profiles and sinks as rows; and
the statistics of an influence profile a story computes on rows (``metrics.influence``: :func:`profile_peak`,
:func:`end_over_middle_logs`; ``metrics.cesaro``, Chowdhury's closed forms: :func:`theory_profile`,
:func:`mixed_row`, :func:`dead_zone`, :func:`middle_position`, :func:`spearman`).

:func:`model_rollout` builds a ``RolloutConfig`` from a run's params (unknown keys are an error; besides
them ``stand_in_for``, what these weights stand in for in the story's claim), calls
``models.rollout.measure_rollout`` (nothing here measures) and returns, with the model's columns
(``model_label``, ``pretrained``, ...) on every row and ``rollout_residual`` (``lam``) where it applies:

- ``kind = curve``: ``kit.curves.curve_rows`` of ``first_token_share_mean`` and ``first_token_gap_max`` of the
  head-averaged rollout per lam (per layer t = 0..L, over the excerpts);
- ``kind = shape``: per lam and layer, ``kit.curves.sample_stats`` of ``start_over_middle_log`` and
  ``end_over_middle_log`` of the last token's profile (``metrics.influence``; read with ``kit.data.layered``);
- ``kind = sink``: per layer t = 1..L, ``sample_stats`` of ``first_token_attention`` (mean over heads) and
  ``sink_rate`` (``metrics.diagnostics``, the same attention);
- ``kind = influence``: per lam, at the layers of ``kit.tasks.curves.profile_layers`` and each position
  ``j``, the mean over excerpts of ``P(t)[n-1, j]``;
- ``kind = head_share``: per lam, head and layer, the mean over excerpts of the per-head rollout's
  ``first_token_share_mean``; ``kind = head_influence``: per lam, head and position, the mean last-token
  profile of the per-head rollout at the last layer; ``kind = head_sink``: per head and layer t = 1..L,
  the mean ``first_token_attention``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from
from rankcollapse.experiments.kit.curves import curve_rows, sample_stats
from rankcollapse.experiments.kit.tasks.curves import (
    LOAD_S,
    Execution,
    _execution,
    model_facts,
    profile_layers,
)
from rankcollapse.metrics.cesaro import dead_zone, middle_position, mixed_row, spearman, theory_profile
from rankcollapse.metrics.influence import end_over_middle_logs, profile_peak
from rankcollapse.metrics.rollout import ROLLOUT_NAMES as ROLLOUT_QUANTITIES
from rankcollapse.metrics.rollout import uniform_causal_boundary, uniform_causal_gap_mixed

__all__ = [
    "MODEL_ROLLOUT",
    "ROLLOUT_QUANTITIES",
    "dead_zone",
    "end_over_middle_logs",
    "middle_position",
    "mixed_row",
    "model_rollout",
    "profile_peak",
    "spearman",
    "theory_profile",
    "uniform_causal_boundary",
    "uniform_causal_gap_mixed",
]

#: Seconds of one layer for one 128-token excerpt (the dissected forward with its attention weights kept,
#: the per-head products of two lams in float64), a 12-head, d = 384 model, 2-core machine at load ~10:
#: MiniLM 8 excerpts x 6 layers took 8.4 s, SmolLM2 4 x 30 took 40 s (2026-12). For estimates only.
ROLLOUT_LAYER_SAMPLE_S = 0.2
#: Depth of the bundled models, from their configs (for the estimate only; another name counts 12 layers).
ESTIMATE_DEPTH: dict[str, int] = {"minilm": 6, "smollm2": 30, "mpnet": 12, "gemma3-270m": 18,
                                  "qwen2.5-coder-0.5b": 24}


def model_rollout(params: dict[str, Any], on_layer: OnLayer, execution: Execution = None) -> RunOutput:
    """One model's rollout rows (module docstring)."""
    from rankcollapse.models.rollout import RolloutConfig, measure_rollout

    params = dict(params)
    stand_in_for = str(params.pop("stand_in_for", "") or "")
    if isinstance(params.get("lams"), list):
        params["lams"] = tuple(params["lams"])
    cfg = config_from(RolloutConfig, params)
    device, batch_size = _execution(execution)
    m = measure_rollout(cfg, on_layer, device, batch_size)
    model = {**m.model, "stand_in_for": stand_in_for or m.model["stand_in_for"]}
    shared = {"dtype": cfg.dtype, **model}
    rows: list[dict[str, Any]] = []
    depth = m.layers
    for lam in m.lams:
        cols = m.columns[lam]
        quantities = {q: cols[q] for q in ("first_token_share_mean", "first_token_gap_max")}
        curves = curve_rows(quantities, cfg.dtype)
        rows += [{"kind": "curve", "rollout_residual": lam, **shared, **r} for r in curves]
        for t in range(depth + 1):
            row: dict[str, Any] = {
                "kind": "shape", "rollout_residual": lam, "layer": t, "samples": cfg.samples
            }
            for q in ("start_over_middle_log", "end_over_middle_log"):
                row.update(sample_stats(q, cols[q][:, t]))
            rows.append({**row, **shared})
        prof = m.profile[lam].mean(axis=0)  # [L+1, n]
        for t in profile_layers(depth):
            rows += [
                {"kind": "influence", "rollout_residual": lam, "layer": t, "position": j,
                 "influence": float(v), **shared}
                for j, v in enumerate(prof[t])
            ]
        hshare = m.head_share[lam].mean(axis=0)  # [h, L+1]
        hprof = m.head_profile[lam].mean(axis=0)  # [h, n]
        for h in range(hshare.shape[0]):
            rows += [
                {"kind": "head_share", "rollout_residual": lam, "head": h, "layer": t,
                 "first_token_share_mean": float(v), **shared}
                for t, v in enumerate(hshare[h])
            ]
            rows += [
                {"kind": "head_influence", "rollout_residual": lam, "head": h, "layer": depth, "position": j,
                 "influence": float(v), **shared}
                for j, v in enumerate(hprof[h])
            ]
    for t in range(1, depth + 1):
        row = {"kind": "sink", "layer": t, "samples": cfg.samples}
        for q, v in m.sinks.items():
            row.update(sample_stats(q, v[:, t - 1]))
        rows.append({**row, **shared})
    hfirst = np.nanmean(m.head_first_token_attention, axis=0)  # [h, L]
    for h in range(hfirst.shape[0]):
        rows += [
            {"kind": "head_sink", "head": h, "layer": t + 1, "first_token_attention": float(v), **shared}
            for t, v in enumerate(hfirst[h])
        ]
    return RunOutput(rows, {**m.summary, "stand_in_for": model["stand_in_for"]})


def model_rollout_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`model_rollout` run (``ROLLOUT_LAYER_SAMPLE_S`` per layer and excerpt,
    linear in the tokens, the number of lams beyond two neglected)."""
    depth = ESTIMATE_DEPTH.get(str(params.get("model", "")), 12)
    scale = float(params.get("tokens", 128)) / 128.0
    return ROLLOUT_LAYER_SAMPLE_S * depth * int(params.get("samples", 8)) * scale + LOAD_S


MODEL_ROLLOUT = Task(model_rollout, cost_s=model_rollout_cost, identity_facts=model_facts)
