"""Claim rules: verdicts follow the data (synthetic curves flip them), rate fits, curve classes."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rankcollapse.experiments.analysis import fitted_log_rate, floor_rel, layers_to_floor, pre_floor_length
from rankcollapse.experiments.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Data,
    claims_equilibria,
    claims_fig2_random,
    claims_radius,
    classify_curve,
)
from rankcollapse.experiments.config import Experiment


def test_fitted_log_rate_recovers_an_exponential_and_stops_before_the_floor():
    floor = floor_rel("float64")
    curve = [0.9**t for t in range(50)] + [floor / 2] * 20
    assert fitted_log_rate(curve, floor) == pytest.approx(math.log(0.9), rel=1e-9)
    assert pre_floor_length(curve, floor) == 50
    assert layers_to_floor(curve, floor) == 50
    assert fitted_log_rate([1.0, floor], floor) is None  # too few points above the floor


def test_classify_curve_tells_floor_collapse_kept_and_unclear_apart():
    f32 = floor_rel("float32")
    assert classify_curve([1.0, 1e-3, f32 / 3], "float32", 5e-3, 1e-2)[0] == "at floor"
    assert classify_curve([0.5 * 0.97**t for t in range(100)], "float64", 5e-3, 1e-2)[0] == "collapsing"
    assert classify_curve([0.5 + 0.001 * math.sin(t) for t in range(100)], "float64", 5e-3, 1e-2)[0] == "kept"
    assert classify_curve([1e-3] * 100, "float64", 5e-3, 1e-2)[0] == "unclear"
    # float32 data that would be fine in float64 is at the float32 floor
    assert classify_curve([1.0, 1e-3, 1e-6], "f32", 5e-3, 1e-2)[0] == "at floor"


def _data(name: str, runs: list[dict], curves: dict[str, list[float]], verdict: dict | None = None) -> Data:
    exp = Experiment(
        name=name,
        title=name,
        task="simulate",
        base={},
        grid={},
        verdict=verdict or {},
        source=f"{name}.yaml",
        profile="tiny",
    )
    index = pd.DataFrame([{"status": "ok", "error": "", **r} for r in runs])
    table = pd.DataFrame(
        [{"run_id": rid, "layer": t, "mu_rel": v} for rid, c in curves.items() for t, v in enumerate(c)]
    )
    return Data(exp, table, index)


def _fig2(ln_curve: list[float]) -> Data:
    runs, curves = [], {}
    for preset, curve in (("attn", [0.9**t for t in range(60)]), ("attn+ln", ln_curve)):
        for dtype in ("float32", "float64"):
            rid = f"{preset}-{dtype}"
            runs.append(
                {
                    "run_id": rid,
                    "mask": "causal",
                    "preset": preset,
                    "dtype": dtype,
                    "seed": 0,
                    "summary.final_mu_rel": curve[-1],
                }
            )
            curves[rid] = curve
    return _data("fig2_random", runs, curves)


def test_fig2_layernorm_verdict_flips_with_the_data():
    kept = claims_fig2_random(_fig2([0.6] * 60))
    collapsed = claims_fig2_random(_fig2([0.8**t for t in range(60)]))
    ln_kept = next(c for c in kept if c.id.startswith("fig2.ln_random"))
    ln_gone = next(c for c in collapsed if c.id.startswith("fig2.ln_random"))
    assert ln_kept.verdict == REPRODUCED and not ln_kept.disagreement
    assert ln_gone.verdict == NOT_REPRODUCED and "paper reports" in ln_gone.disagreement
    assert next(c for c in kept if c.id == "fig2.pure_collapse").verdict == REPRODUCED


def _radius(rates: dict[int, float]) -> Data:
    runs = [
        {
            "run_id": f"r{r}",
            "mask": f"window:w={10 - r}",
            "seed": 0,
            "summary.radius": r,
            "summary.fit_log_rate": v,
        }
        for r, v in rates.items()
    ]
    return _data("radius_rate", runs, {f"r{r}": [1.0] for r in rates}, {"min_rho": 0.8})


def test_radius_verdict_follows_the_measured_ordering():
    assert claims_radius(_radius({1: -0.5, 2: -0.2, 4: -0.05}))[0].verdict == REPRODUCED
    assert claims_radius(_radius({1: -0.05, 2: -0.2, 4: -0.5}))[0].verdict == NOT_REPRODUCED
    assert claims_radius(_radius({1: -0.5, 2: -0.2}))[0].verdict == INCONCLUSIVE


def test_a_missing_component_gives_inconclusive_with_the_error():
    exp = Experiment(name="radius_rate", title="t", task="simulate", base={}, grid={}, source="x.yaml")
    failed = {"run_id": "a", "status": "failed", "error": "ImportError: no module x", "seed": 0}
    index = pd.DataFrame([failed])
    claim = claims_radius(Data(exp, pd.DataFrame(columns=["run_id", "layer"]), index))[0]
    assert claim.verdict == INCONCLUSIVE and "ImportError" in claim.evidence


def test_a_failed_run_turns_reproduced_into_inconclusive_and_is_quoted():
    from rankcollapse.experiments.claims import evaluate

    exp = Experiment(name="radius_rate", title="t", task="simulate", base={}, grid={}, source="x.yaml")
    runs = [
        {
            "run_id": f"r{r}",
            "experiment": "radius_rate",
            "status": "ok",
            "error": "",
            "seed": 0,
            "mask": f"window:w={10 - r}",
            "summary.radius": r,
            "summary.fit_log_rate": v,
        }
        for r, v in {1: -0.5, 2: -0.2, 4: -0.05}.items()
    ]
    runs.append(
        {
            "run_id": "bad",
            "experiment": "radius_rate",
            "status": "failed",
            "error": "RuntimeError: boom",
            "seed": 1,
        }
    )
    table = pd.DataFrame(
        [{"run_id": f"r{r}", "experiment": "radius_rate", "layer": 0, "mu_rel": 1.0} for r in (1, 2, 4)]
    )
    claim = evaluate(exp, table, pd.DataFrame(runs))[0]
    assert claim.verdict == INCONCLUSIVE and "RuntimeError: boom" in claim.evidence


def _ranks(rows: list[dict]) -> Data:
    exp = Experiment(name="equilibria_ranks", title="t", task="equilibrium_rank", base={"n": 3, "d": 3},
                     grid={}, verdict={"residual_max": 1e-10}, source="x.yaml", profile="tiny")
    index = pd.DataFrame([{"run_id": f"k{r['k']}", "status": "ok", "error": "", "seed": 0} for r in rows])
    table = pd.DataFrame([{"run_id": f"k{r['k']}", "constructed": True, "reason": "", "residual": 1e-15,
                           "spectral_radius": 0.8, "basin_fraction": 0.5, "basin_ci_high": 0.7,
                           "basin_radius": 1e-3, **r} for r in rows])
    return Data(exp, table, index)


def test_every_rank_needs_stability_and_a_measured_basin():
    good = [{"k": k, "rank": k, "stable": True, "basin_ci_low": 0.3} for k in (1, 2, 3)]
    assert claims_equilibria(_ranks(good))[0].verdict == REPRODUCED
    no_basin = [*good[:2], {"k": 3, "rank": 3, "stable": True, "basin_ci_low": 0.0}]
    assert claims_equilibria(_ranks(no_basin))[0].verdict == INCONCLUSIVE
    unstable = [*good[:2], {"k": 3, "rank": 3, "stable": False, "basin_ci_low": 0.3}]
    assert claims_equilibria(_ranks(unstable))[0].verdict == NOT_REPRODUCED
    wrong_rank = [*good[:2], {"k": 3, "rank": 2, "stable": True, "basin_ci_low": 0.3}]
    assert claims_equilibria(_ranks(wrong_rank))[0].verdict == NOT_REPRODUCED
