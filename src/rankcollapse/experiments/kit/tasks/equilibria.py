"""Thin task adapters over ``rankcollapse.equilibria`` (the paper's §4.2-§4.3 and App. E-F, and ours), and
what a story reads back from it: one run's params in, the package's measurements out (nothing here
measures).

- :func:`paper_counterexample_run` (Figs. 1 and 5, the paper's construction):
  ``equilibria.counterexample_paper.paper_measurements``; :func:`counterexample` (ours, the surrogate):
  ``equilibria.counterexample.surrogate_measurements``; :func:`counterexample_figures` /
  :func:`paper_counterexample_figures`: the package's own drawings of both;
- :func:`ln_bounds` (Theorem 2, Corollary 1): ``equilibria.orthogonal.ln_collapse_run`` with the bound checks
  of ``dynamics.theory`` per result of :data:`RESULTS`, and its cost;
- :func:`theorem3_run` (Theorem 3, App. F.2-F.3), :func:`complete_mask_run` (App. F.4),
  :func:`equilibrium_rank` (ours: designed equilibria); a run's summary read back as the typed record
  (:func:`theorem3_summaries`, :func:`complete_mask_summaries`) and the residual up to which a
  complete-mask run analyses an end (:func:`check_residual_max`).

Names: every task here reads its params under the names table's names (``engine.tasks``): ``tokens`` for
the YAML's ``n`` and, in the maps iterated layer by layer (Figs. 1 and 5, Theorem 3, the designed
equilibria), ``layers`` for its ``steps`` (:data:`ITERATED`: one step of the map is one layer); the
package's own functions keep their argument names (``steps=``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_param, param_float, param_int
from rankcollapse.equilibria.complete_mask import CompleteMaskSummary
from rankcollapse.equilibria.theorem3_checks import Theorem3Summary
from rankcollapse.experiments.contract.story import Data
from rankcollapse.experiments.engine.store import run_summary
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task
from rankcollapse.experiments.kit.curves import curve_rows

__all__ = [
    "COMPLETE_MASK_RUN",
    "COUNTEREXAMPLE",
    "EQUILIBRIUM_RANK",
    "ITERATED",
    "LN_BOUNDS",
    "PAPER_COUNTEREXAMPLE_RUN",
    "RESULTS",
    "THEOREM3_RUN",
    "CompleteMaskSummary",
    "Theorem3Summary",
    "check_residual_max",
    "complete_mask_run",
    "complete_mask_summaries",
    "counterexample",
    "counterexample_figures",
    "equilibrium_rank",
    "ln_bounds",
    "ln_bounds_cost",
    "paper_counterexample_figures",
    "paper_counterexample_run",
    "theorem3_run",
    "theorem3_summaries",
]


# --- Figs. 1 and 5: the N = d = 2 counterexample ---------------------------------------------------------


def paper_counterexample_run(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """``equilibria.counterexample_paper.paper_measurements`` on a run's params (w, per_arc, layers (the
    YAML's steps), token1, moving_grid, noln_steps; seed recorded). Rows: one per arc; summary: A, B, the
    red segment, token 1's limits, the no-LN distance, the moving-token-1 basin."""
    from rankcollapse.equilibria.counterexample_paper import paper_measurements

    rows, summary = paper_measurements(
        param_float(params, "w"),
        per_arc=param_int(params, "per_arc"),
        steps=param_int(params, "layers"),
        token1=tuple(params["token1"]),
        moving_grid=param_int(params, "moving_grid"),
        noln_steps=param_int(params, "noln_steps"),
    )
    on_layer(param_int(params, "layers"))
    return RunOutput(rows, summary)


def counterexample(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """Our surrogate N = 2, d = 2 counterexample: ``equilibria.counterexample.surrogate_measurements`` on a
    run's params (w_v, w_qk, d_qk, token0, angles, layers (the YAML's steps), rank_tol, arc_grid,
    arc_steps; seed recorded). Rows: one per start angle; summary: the fixed points, point B and its basin
    arc."""
    from rankcollapse.equilibria.counterexample import surrogate_measurements

    rows, summary = surrogate_measurements(
        params["w_v"],
        params.get("w_qk"),
        param_float(params, "d_qk"),
        token0=tuple(params["token0"]),
        angles=param_int(params, "angles"),
        steps=param_int(params, "layers"),
        rank_tol=param_float(params, "rank_tol"),
        arc_grid=param_int(params, "arc_grid"),
        arc_steps=param_int(params, "arc_steps"),
    )
    on_layer(param_int(params, "layers"))
    return RunOutput(rows, summary)


def paper_counterexample_figures(w: float, token1: tuple[float, float]) -> tuple[Any, Any]:
    """Figs. 1 and 5 of the paper's construction at ``w`` (``equilibria.plots_paper``), token 1 at
    ``token1``."""
    from rankcollapse.equilibria.plots_paper import plot_paper_figure1, plot_paper_figure5

    return plot_paper_figure1(w, token1=token1), plot_paper_figure5(w)


def counterexample_figures(params: dict[str, Any]) -> tuple[Any, Any, pd.DataFrame]:
    """Ours, Figs. 1 and 5 of the surrogate of an arm's ``params`` (w_v, w_qk, d_qk, token0;
    ``equilibria.plots``), and the angle map ``f(theta)`` of token 1 (token 0 at A) on 721 angles."""
    from rankcollapse.equilibria.counterexample import angle_map, counterexample_2d
    from rankcollapse.equilibria.plots import plot_figure1, plot_figure5

    cx = counterexample_2d(params["w_v"], params.get("w_qk"), float(params.get("d_qk", 1.0)))
    theta = np.linspace(0, 2 * math.pi, 721)
    f5 = pd.DataFrame({"theta": theta, "f_theta": np.mod(angle_map(theta, cx), 2 * math.pi)})
    return plot_figure1(cx, token0=tuple(params.get("token0", (0.6, 0.8)))), plot_figure5(cx), f5


# --- Theorem 2 and Corollary 1 ------------------------------------------------------------------------------

RESULTS = {"thm2": "Theorem 2", "cor1": "Corollary 1", "cor1n": "Corollary 1 (n centers)"}


def ln_bounds(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """One Theorem 2 / Corollary 1 run. Params: mask, tokens, d, placement, inputs, samples, layers, seed,
    qk_scale, d_qk. Rows (``kind = curve``): the kit's curve rows of the per-sample mu and mu_rel.
    Summary: epsilon, tail_rate, centers, final mu_rel, and per result (thm2, cor1, cor1n) applicable /
    verdict / reason / rate / c_over_mu0 / tail (the measured tail rate it compared, NaN at the floor)."""
    from rankcollapse.equilibria.orthogonal import ln_collapse_run

    run = ln_collapse_run(
        str(params["mask"]),
        param_int(params, "tokens"),
        param_int(params, "d"),
        placement=str(params["placement"]),
        inputs=str(params["inputs"]),
        samples=param_int(params, "samples"),
        layers=param_int(params, "layers"),
        seed=param_int(params, "seed", low=0),
        qk_scale=float(params.get("qk_scale", 1.0)),
        d_qk=float(params.get("d_qk", 1.0)),
    )
    arrays = {"mu": run.mu.T.double().numpy(), "mu_rel": run.mu_rel.T.double().numpy()}
    info = {
        "kind": "curve",
        "mode": f"{params['placement']}-LN",
        "mask": str(params["mask"]),
        "dtype": "float64",
    }
    with np.errstate(divide="ignore", invalid="ignore"):  # ||X||_F = mu / mu_rel
        x_norm = np.where(arrays["mu_rel"] > 0, arrays["mu"] / arrays["mu_rel"], np.nan)
    rows = [{**info, **row} for row in curve_rows(arrays, "float64", x_norm=x_norm)]
    on_layer(param_int(params, "layers"))
    summary: dict[str, Any] = {
        "epsilon": run.epsilon,
        "tail_rate": run.tail_rate,
        "centers": run.extra["centers"],
        "final_mu_rel_max": float(run.mu_rel[-1].max()),
        "source": run.source,
    }
    for key, name in RESULTS.items():
        c = run.check(name)
        summary.update(
            {
                f"{key}_applicable": c.applicable,
                f"{key}_verdict": c.verdict,
                f"{key}_reason": c.reason,
                f"{key}_rate": c.rate,
                f"{key}_c_over_mu0": c.c_over_mu0,
                f"{key}_tail": math.nan if c.tail_rate is None else c.tail_rate,
            }
        )
    return RunOutput(rows, summary)


def ln_bounds_cost(params: dict[str, Any]) -> float:
    """About 2e-8 s per (layer x sample x n^2 d), float64 (measured on the 2-core reference machine)."""
    n, d = check_param(params, "tokens"), check_param(params, "d")
    return 2e-8 * check_param(params, "layers") * check_param(params, "samples") * n * n * d + 0.05


# --- Theorem 3 and App. F --------------------------------------------------------------------------------


def theorem3_run(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """``equilibria.theorem3_checks.theorem3_measurements`` on a run's params: tokens (N = d), w, starts,
    layers (the YAML's steps), lemma13_samples/_steps, seed. Rows: one per equilibrium; summary: counts
    per rank and family, max residual, F.2, Lemma 13."""
    from rankcollapse.equilibria.theorem3_checks import theorem3_measurements

    keys = {"starts": "starts", "steps": "layers", "lemma13_samples": "lemma13_samples",
            "lemma13_steps": "lemma13_steps", "seed": "seed"}  # the measurement's argument: the param
    rows, summary = theorem3_measurements(
        param_int(params, "tokens"),
        param_float(params, "w"),
        **{arg: param_int(params, k, low=0 if k == "seed" else 1) for arg, k in keys.items()},
    )
    on_layer(param_int(params, "layers"))
    return RunOutput(rows, summary.to_summary())


def complete_mask_run(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """App. F.4: ``equilibria.complete_mask.complete_mask_measurements`` on a run's params: tokens (N = d), w,
    starts (per rank 2..N-1), full_rank_starts, m_bound, draws, nearby, layers, seed. Rows: one per
    search end (its residual, rank, smallest attention weight, X and M, and where it is at rest its
    tangent spectrum and nearby starts); summary: starts and drawn per rank, the full-rank checks."""
    from rankcollapse.equilibria.complete_mask import complete_mask_measurements

    counts = ("starts", "full_rank_starts", "draws", "nearby", "layers")
    rows, summary = complete_mask_measurements(
        param_int(params, "tokens"),
        param_float(params, "w"),
        m_bound=param_float(params, "m_bound"),
        seed=param_int(params, "seed", low=0),
        **{k: param_int(params, k, low=1) for k in counts},
    )
    on_layer(param_int(params, "layers"))
    return RunOutput(rows, summary.to_summary())


def equilibrium_rank(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """Ours: ``equilibria.construction.designed_measurement`` on a run's params (tokens, d, k, samples,
    radius, layers (the YAML's steps), seed): a stable equilibrium of rank ``k`` for its own designed W_V."""
    from rankcollapse.equilibria.construction import designed_measurement

    rows, summary = designed_measurement(
        param_int(params, "tokens"),
        param_int(params, "d"),
        param_int(params, "k"),
        samples=param_int(params, "samples"),
        radius=params["radius"],
        steps=param_int(params, "layers"),
        seed=param_int(params, "seed", low=0),
    )
    on_layer(param_int(params, "layers"))
    return RunOutput(rows, summary)


def theorem3_summaries(ok: pd.DataFrame) -> list[tuple[pd.Series, Theorem3Summary]]:
    """Each finished run's index row (its parameters, as the labels print them) with its summary read
    back as the typed record (the measurements)."""
    return [(r, Theorem3Summary.from_summary(r["tokens"], r["w"], run_summary(r))) for _, r in ok.iterrows()]


def complete_mask_summaries(data: Data) -> list[tuple[CompleteMaskSummary, pd.DataFrame]]:
    """Each finished complete-mask run's summary (typed) with its table rows (one per search end)."""
    table = data.rows
    out = []
    for _, r in data.ok.iterrows():
        rows = table[table["run_id"] == r["run_id"]] if not table.empty else table
        out.append((CompleteMaskSummary.from_summary(r["tokens"], r["w"], run_summary(r)), rows))
    return sorted(out, key=lambda x: (x[0].n, x[0].w))


def check_residual_max(residual_max: float) -> None:
    """Refuse (one line) a ``residual_max`` above the complete-mask runs' analysis cut
    (``complete_mask.ANALYSED_RESIDUAL``): those ends have no tangent spectrum or nearby starts."""
    from rankcollapse.equilibria.complete_mask import ANALYSED_RESIDUAL

    if residual_max > ANALYSED_RESIDUAL:
        raise RankCollapseError(
            f"theorem3.yaml: residual_max = {residual_max:g} is above {ANALYSED_RESIDUAL:g}, the "
            "residual up to which complete-mask runs analyse an end; allowed: at most that"
        )


#: The quantities the tasks of a map iterated layer by layer name (module docstring): ``steps`` is ``layers``.
ITERATED = ("tokens", "samples", "layers")

PAPER_COUNTEREXAMPLE_RUN = Task(paper_counterexample_run, names=ITERATED)
COUNTEREXAMPLE = Task(counterexample, names=ITERATED)
LN_BOUNDS = Task(ln_bounds, cost_s=ln_bounds_cost)
THEOREM3_RUN = Task(theorem3_run, names=ITERATED)
COMPLETE_MASK_RUN = Task(complete_mask_run, names=ITERATED)
EQUILIBRIUM_RANK = Task(equilibrium_rank, names=ITERATED)
