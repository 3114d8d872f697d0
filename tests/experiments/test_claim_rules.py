"""Claim rules of the simulator stories: synthetic tables pin every verdict each rule can give.

Also: the one verdict combiner, the failed-run downgrade, rate fits and curve classes.
"""

from __future__ import annotations

import math

import pytest

from rankcollapse.experiments.analysis import (
    classify_curve,
    fitted_log_rate,
    floor_rel,
    layers_to_floor,
    majority,
    pre_floor_length,
)
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    combine_verdicts,
    judge,
)
from rankcollapse.experiments.stories import (
    fig2_random,
    fig3_temperature,
    ln_orthogonal,
    radius_rate,
    theorem1,
)

from .synthetic import by_id, collapsing, kept, make_data, unclear

R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE


@pytest.mark.parametrize(
    "parts,expected",
    [([], I), ([R], R), ([R, R], R), ([R, I], I), ([I], I), ([N], N), ([R, N], N), ([I, N, R], N)],
)
def test_combine_verdicts_no_evidence_is_never_reproduced_and_any_contradiction_wins(parts, expected):
    assert combine_verdicts(parts) == expected


def test_combine_verdicts_refuses_an_unknown_verdict_and_claims_need_evidence():
    with pytest.raises(ValueError, match="maybe"):
        combine_verdicts([R, "maybe"])
    with pytest.raises(ValueError, match="evidence"):
        Claim("x", "e", "s", "ours", "", R, "rule")


def test_fitted_log_rate_recovers_an_exponential_and_stops_before_the_floor():
    floor = floor_rel("float64")
    curve = [0.9**t for t in range(50)] + [floor / 2] * 20
    assert fitted_log_rate(curve, floor) == pytest.approx(math.log(0.9), rel=1e-9)
    assert pre_floor_length(curve, floor) == 50
    assert layers_to_floor(curve, floor) == 50
    assert fitted_log_rate([1.0, floor], floor) is None  # too few points above the floor


def test_classify_curve_tells_floor_collapse_kept_overflow_and_unclear_apart():
    f32 = floor_rel("float32")
    assert classify_curve([1.0, 1e-3, f32 / 3], "float32", 5e-3, 1e-2)[0] == "at floor"
    assert classify_curve(collapsing(100, 0.97), "float64", 5e-3, 1e-2)[0] == "collapsing"
    assert classify_curve([0.5 + 0.001 * math.sin(t) for t in range(100)], "float64", 5e-3, 1e-2)[0] == "kept"
    assert classify_curve(unclear(100), "float64", 5e-3, 1e-2)[0] == "unclear"
    assert classify_curve([1.0, math.inf, math.nan], "float64", 5e-3, 1e-2)[0] == "overflow"
    assert classify_curve([1.0, 1e-3, 1e-6], "f32", 5e-3, 1e-2)[0] == "at floor"  # alias of float32
    assert majority(["kept", "at floor", "at floor"]) == "at floor" and majority([]) == "unclear"
    assert majority(["kept", "collapsing"]) == "kept"  # a tie goes to the first seen


# ----------------------------------------------------------------------------- theorem1


def _thm1(runs: list[dict]) -> dict:
    full = []
    for i, r in enumerate(runs):
        row = {
            "run_id": f"r{i}",
            "seed": 0,
            "layers": 16,
            "summary.final_mu_rel": 0.5,
            "summary.theory.applicable": r.get("summary.radius") is not None,
            "summary.theory.epsilon": 0.1,
            "summary.theory.c_over_mu0": 1.0,
        }
        row.update(r)
        full.append(row)
    return by_id(theorem1.claims(make_data("theorem1", full, {f"r{i}": [1.0] for i in range(len(runs))})))


def _center(mask="causal", rate=-0.5, floor=None, verdict="consistent"):
    return {
        "mask": mask,
        "summary.radius": 1,
        "summary.fit_log_rate": rate,
        "summary.layers_to_floor": floor,
        "summary.theory.verdict": verdict,
    }


def _block(final=0.5):
    return {
        "mask": "block:size=4",
        "summary.radius": None,
        "summary.fit_log_rate": -1e-4,
        "summary.layers_to_floor": None,
        "summary.final_mu_rel": final,
        "summary.theory.verdict": "not_applicable",
    }


def test_theorem1_collapse_verdicts():
    assert _thm1([_center(), _center("complete", None, 3)])["thm1.collapse"].verdict == R
    assert _thm1([_center(), _center("complete", -1e-5)])["thm1.collapse"].verdict == N  # slow, off the floor
    assert _thm1([_block()])["thm1.collapse"].verdict == I  # no center mask at all


def test_theorem1_bound_verdicts_follow_the_per_run_checks():
    assert _thm1([_center(), _center("complete", verdict="vacuous")])["thm1.bound"].verdict == R
    assert _thm1([_center(), _center("complete", verdict="rate_exceeded")])["thm1.bound"].verdict == N
    assert _thm1([_center(verdict="vacuous")])["thm1.bound"].verdict == I
    assert _thm1([_block()])["thm1.bound"].verdict == I  # no applicable bound
    assert theorem1.bound_verdict([]) == I


def test_theorem1_no_center_verdicts():
    assert _thm1([_center(), _block(0.5)])["thm1.no_center"].verdict == R
    assert _thm1([_center(), _block(0.01)])["thm1.no_center"].verdict == N
    assert _thm1([_center()])["thm1.no_center"].verdict == I


def test_theorem1_without_runs_is_inconclusive_with_the_error():
    data = make_data(
        "theorem1", [{"run_id": "a", "status": "failed", "error": "RuntimeError: boom", "seed": 0}]
    )
    claims = theorem1.claims(data)
    assert len(claims) == 3 and all(c.verdict == I and "boom" in c.evidence for c in claims)


# ----------------------------------------------------------------------------- radius_rate


def _radius(rates: dict[int, float]) -> list:
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
    return radius_rate.claims(
        make_data("radius_rate", runs, {f"r{r}": [1.0] for r in rates}, verdict={"min_rho": 0.8})
    )


def test_radius_verdict_follows_the_measured_ordering():
    assert _radius({1: -0.5, 2: -0.2, 4: -0.05})[0].verdict == R
    assert _radius({1: -0.05, 2: -0.2, 4: -0.5})[0].verdict == N
    assert _radius({1: -0.5, 2: -0.2})[0].verdict == I  # too few fitted rates
    assert _radius({1: -0.5, 2: -0.2, 4: -0.6, 8: -0.05})[0].verdict == I  # rho = 0.4: in between


def test_a_failed_run_turns_reproduced_into_inconclusive_and_is_quoted():
    runs = [
        {
            "run_id": f"r{r}",
            "mask": f"window:w={10 - r}",
            "seed": 0,
            "summary.radius": r,
            "summary.fit_log_rate": v,
        }
        for r, v in {1: -0.5, 2: -0.2, 4: -0.05}.items()
    ]
    runs.append({"run_id": "bad", "status": "failed", "error": "RuntimeError: boom", "seed": 1})
    data = make_data("radius_rate", runs, {f"r{r}": [1.0] for r in (1, 2, 4)}, verdict={"min_rho": 0.8})
    assert radius_rate.claims(data)[0].verdict == R
    claim = judge(radius_rate.claims, data)[0]
    assert claim.verdict == I and "RuntimeError: boom" in claim.evidence


# ----------------------------------------------------------------------------- fig2_random


def _fig2(ln_curve: list[float], pure_curve: list[float] | None = None) -> dict:
    runs, curves = [], {}
    for preset, curve in (("attn", pure_curve or collapsing()), ("attn+sphere", ln_curve)):
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
    return by_id(fig2_random.claims(make_data("fig2_random", runs, curves)))


def test_fig2_random_verdicts_flip_with_the_data():
    got = _fig2(kept())
    assert got["fig2.pure_collapse"].verdict == R
    assert got["fig2.ln_random[causal]"].verdict == R and not got["fig2.ln_random[causal]"].disagreement
    gone = _fig2(collapsing(60, 0.8))["fig2.ln_random[causal]"]
    assert gone.verdict == N and "paper reports" in gone.disagreement
    assert _fig2(unclear())["fig2.ln_random[causal]"].verdict == I
    assert _fig2(kept(), pure_curve=kept())["fig2.pure_collapse"].verdict == N


def test_fig2_random_ln_verdict_per_dtype():
    assert fig2_random.ln_verdict({"float32": "kept", "float64": "kept"}) == R
    assert (
        fig2_random.ln_verdict({"float32": "at floor", "float64": "kept"}) == I
    )  # float32 alone is its floor
    assert fig2_random.ln_verdict({"float32": "kept", "float64": "collapsing"}) == N
    assert fig2_random.ln_verdict({}) == I


# ----------------------------------------------------------------------------- fig3_temperature


def _fig3(rates: dict[str, list[float]], shallow: dict[str, list[int]] | None = None) -> dict:
    runs, curves = [], {}
    for mask, per_t in rates.items():
        for j, (d_qk, rate) in enumerate(zip((1 / 64, 1.0, 64.0), per_t, strict=True)):
            rid = f"{mask}-{j}"
            t_level = (shallow or {}).get(mask, [5, 5, 5])[j]
            runs.append({"run_id": rid, "mask": mask, "d_qk": d_qk, "seed": 0, "summary.fit_log_rate": rate})
            curves[rid] = [1.0] * t_level + [0.05] * (12 - t_level)
    data = make_data("fig3_temperature", runs, curves, verdict={"min_abs_rho": 0.8, "shallow_level": 0.1})
    return by_id(fig3_temperature.claims(data))


def test_fig3_temperature_and_global_verdicts():
    good = _fig3({"complete": [-0.01, -0.1, -1.0], "causal": [-0.01, -0.05, -0.1]})
    assert good["fig3.temperature"].verdict == R and good["fig3.global"].verdict == R
    bad = _fig3({"complete": [-0.5, -0.45, -0.4], "causal": [-1.0, -0.1, -0.01]})
    assert bad["fig3.temperature"].verdict == N and bad["fig3.global"].verdict == N
    mixed = _fig3({"complete": [-0.01, -0.1, -1.0], "causal": [-0.1, -0.01, -0.1]})
    assert mixed["fig3.temperature"].verdict == I
    assert _fig3({"causal": [-0.01, -0.1, -1.0]})["fig3.global"].verdict == I  # no complete mask


def test_fig3_shallow_verdicts():
    rates = {"complete": [-0.01, -0.1, -1.0]}
    assert _fig3(rates, {"complete": [9, 5, 2]})["fig3.shallow"].verdict == R
    assert _fig3(rates, {"complete": [2, 5, 9]})["fig3.shallow"].verdict == N
    assert _fig3(rates, {"complete": [5, 5, 5]})["fig3.shallow"].verdict == I  # constant: rho undefined


# ----------------------------------------------------------------------------- ln_orthogonal


def _ln(rate: float, floor: int | None) -> str:
    runs = [
        {
            "run_id": "a",
            "mask": "causal",
            "seed": 0,
            "summary.fit_log_rate": rate,
            "summary.layers_to_floor": floor,
        }
    ]
    return ln_orthogonal.claims(make_data("ln_orthogonal", runs, {"a": [1.0]}))[0].verdict


def test_ln_orthogonal_verdicts():
    assert _ln(-0.1, None) == R
    assert _ln(math.nan, 4) == R  # reached the floor at once: no fitted rate needed
    assert _ln(-1e-5, None) == N
    assert ln_orthogonal.claims(make_data("ln_orthogonal", []))[0].verdict == I
