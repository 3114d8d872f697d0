"""Thin task adapter over ``models.jacobian``: one random network's last-token Jacobian profile, as rows.

:func:`jacobian_profile` builds a ``JacobianConfig`` from a run's params (unknown keys are an error; besides
them ``rope_compare``: also measure the same network and inputs with RoPE removed, where the model has
RoPE), calls ``models.jacobian.measure_jacobian`` (nothing here measures) and returns rows ``kind =
jacobian``: per RoPE variant and input position ``j``, the mean over the run's samples of
``||d h_L[n-1] / d e_j||_F / sqrt(d)`` (``influence``, so ``kit.data.profile_summaries`` reads it as an
influence profile) and its sample std, at ``layer`` = the model's depth, with ``rope`` (applied or not),
``probes``, ``exact`` and the model's columns (``models.jacobian.model_words``). Each run is one network.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from


def jacobian_profile(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """The rows of the module docstring for one random network."""
    from rankcollapse.models.jacobian import JACOBIAN_MODELS, JacobianConfig, measure_jacobian, model_words

    params = dict(params)
    compare = params.pop("rope_compare", False)
    if not isinstance(compare, bool):
        raise RankCollapseError(f"rope_compare={compare!r} is invalid; allowed: true or false")
    cfg = config_from(JacobianConfig, params)
    variants = [cfg]
    if compare and JACOBIAN_MODELS[cfg.model][2] and cfg.rope:
        variants.append(config_from(JacobianConfig, {**params, "rope": False}))
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    words = model_words(cfg.model)
    for k, c in enumerate(variants):
        m = measure_jacobian(c, on_probe=lambda r, k=k: on_layer(k * 1000 + r))
        mean = m.profile.mean(axis=0)
        std = m.profile.std(axis=0, ddof=1) if m.profile.shape[0] > 1 else np.full_like(mean, np.nan)
        rows += [
            {"kind": "jacobian", "layer": m.depth, "position": j, "influence": float(v),
             "influence_std": float(s), "samples": c.samples, "rope": m.rope, "probes": m.probes,
             "exact": m.exact, "dtype": c.dtype, **words}
            for j, (v, s) in enumerate(zip(mean, std, strict=True))
        ]
        summary.update({f"{'rope' if m.rope else 'no_rope'}.{key}": v for key, v in m.summary.items()})
    return RunOutput(rows, summary)


def jacobian_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one run (``models.jacobian.cost_s``, twice the passes with ``rope_compare`` on a
    model with RoPE)."""
    from rankcollapse.models.jacobian import JACOBIAN_MODELS, cost_s

    name = str(params.get("model", "gpt2-medium"))
    if name not in JACOBIAN_MODELS:
        return 1.0  # the run fails with its own one-line error
    once = cost_s(name, int(params.get("tokens", 32)), int(params.get("samples", 1)), params.get("probes", 8))
    twice = bool(params.get("rope_compare")) and JACOBIAN_MODELS[name][2]
    return 2 * once if twice else once


JACOBIAN_PROFILE = Task(jacobian_profile, cost_s=jacobian_cost)
