"""Claim rules of the model, counterexample and equilibria stories: every verdict pinned."""

from __future__ import annotations

import math

from rankcollapse.experiments.engine.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.stories import counterexample, equilibria_ranks, fig2_models, fig4_geometry

from .synthetic import by_id, collapsing, kept, make_data, unclear

R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE


# ----------------------------------------------------------------------------- fig2_models


def _models(curves: dict[tuple[str, str], list[float]]) -> dict:
    runs, table = [], {}
    for (model, mode), curve in curves.items():
        rid = f"{model}-{mode}"
        runs.append({"run_id": rid, "model": model, "mode": mode, "dtype": "float32", "seed": 0})
        table[rid] = curve
    return by_id(fig2_models.claims(make_data("fig2_models", runs, table, task="analyze")))


def test_fig2_models_full_and_components_verdicts():
    good = _models(
        {("minilm", "attn"): collapsing(), ("minilm", "full"): kept(), ("tiny:bert", "full"): kept()}
    )
    assert good["fig2.pretrained_full"].verdict == R and good["fig2.pretrained_components"].verdict == R
    assert "tiny:bert" in good["fig2.pretrained_full"].evidence  # random models are reported, not judged
    full_falls = _models({("minilm", "attn"): collapsing(), ("minilm", "full"): collapsing()})
    assert full_falls["fig2.pretrained_full"].verdict == N
    assert full_falls["fig2.pretrained_components"].verdict == I  # attn collapses, but so does full
    attn_kept = _models({("minilm", "attn"): kept(), ("minilm", "full"): kept()})
    assert attn_kept["fig2.pretrained_components"].verdict == N
    assert (
        _models({("minilm", "attn"): collapsing(), ("minilm", "full"): unclear()})[
            "fig2.pretrained_full"
        ].verdict
        == I
    )
    only_random = _models({("tiny:bert", "attn"): collapsing(), ("random:gpt2", "full"): kept()})
    assert {c.verdict for c in only_random.values()} == {I}


def test_fig2_models_verdict_helpers():
    assert fig2_models.full_verdict([]) == I and fig2_models.full_verdict(["kept", "missing"]) == I
    assert fig2_models.components_verdict([], R) == I
    assert fig2_models.components_verdict(["at floor"], R) == R


# ----------------------------------------------------------------------------- fig4_geometry


def _fig4(share: float, cos: float, embeddings: float = 1.0) -> dict:
    runs = [{"run_id": "m", "model": "minilm", "seed": 0, "summary.d_model": 64}]
    rows = [
        {
            "run_id": "m",
            "layer": t,
            "full_rank": embeddings if t == 0 else share,
            "num_rank": 8,
            "mean_abs_cos": cos,
        }
        for t in range(4)
    ]
    return by_id(fig4_geometry.claims(make_data("fig4_geometry", runs, rows=rows, task="analyze")))


def test_fig4_full_rank_and_anisotropy_verdicts():
    baseline = math.sqrt(2 / (math.pi * 64))
    good = _fig4(1.0, 4 * baseline)
    assert good["fig4.full_rank"].verdict == R and good["fig4.anisotropy"].verdict == R
    bad = _fig4(0.5, 2 * baseline)  # factor 3 needed
    assert bad["fig4.full_rank"].verdict == N and bad["fig4.anisotropy"].verdict == N
    # the embeddings X(0) are reported apart: a repeated token there does not count
    assert _fig4(1.0, 4 * baseline, embeddings=0.5)["fig4.full_rank"].verdict == R
    assert {c.verdict for c in fig4_geometry.claims(make_data("fig4_geometry", []))} == {I}


# ----------------------------------------------------------------------------- counterexample

B = (-0.5, -math.sqrt(0.75))


def _cx(
    mu_rel: float = 1e-12, attn: float = 0.1, token0=(0.0, 1.0), rank: int = 2, spread: float = 0.0
) -> dict:
    run = {"run_id": "c", "seed": 0, "summary.sink_x": 0.0, "summary.sink_y": 1.0}
    rows = []
    for i, theta in enumerate((0.5, 1.0, 2.0, 3.0)):
        far = i == 3
        rows.append(
            {
                "run_id": "c",
                "theta": theta,
                "noln_mu_rel": mu_rel if far else 1e-12,
                "noln_attn_10": attn,
                "ln_token0_x": token0[0],
                "ln_token0_y": token0[1],
                "ln_rank": rank if i < 2 else 1,
                "ln_x": B[0] + spread * i,
                "ln_y": B[1],
                "ln_abs_det": 0.5,
            }
        )
    data = make_data(
        "counterexample",
        [run],
        rows=rows,
        base={"steps": 100, "token0": [0.6, 0.8]},
        verdict={"meet_tol": 1e-8},
        task="counterexample",
    )
    return by_id(counterexample.claims(data))


def test_counterexample_meet_verdicts():
    assert _cx()["cx.no_ln_meet"].verdict == R
    assert _cx(mu_rel=0.5, attn=1e-12)["cx.no_ln_meet"].verdict == I  # apart but stalled
    assert _cx(mu_rel=0.5, attn=0.1)["cx.no_ln_meet"].verdict == N


def test_counterexample_token0_and_full_rank_verdicts():
    assert _cx()["cx.token0"].verdict == R
    assert _cx(token0=(0.0, -1.0))["cx.token0"].verdict == R  # -A counts
    assert _cx(token0=(0.6, 0.8))["cx.token0"].verdict == N
    assert _cx()["cx.ln_full_rank"].verdict == R
    assert _cx(rank=1)["cx.ln_full_rank"].verdict == N  # no start keeps rank 2
    assert _cx(spread=1e-3)["cx.ln_full_rank"].verdict == N  # the rank-2 limits disagree
    assert {c.verdict for c in counterexample.claims(make_data("counterexample", []))} == {I}


# ----------------------------------------------------------------------------- equilibria_ranks


def _ranks(rows: list[dict]) -> str:
    runs = [{"run_id": f"k{r['k']}", "seed": 0} for r in rows] or [{"run_id": "k1", "seed": 0}]
    full = [
        {
            "run_id": f"k{r['k']}",
            "constructed": True,
            "reason": "",
            "residual": 1e-15,
            "spectral_radius": 0.8,
            "basin_fraction": 0.5,
            "basin_ci_high": 0.7,
            "basin_radius": 1e-3,
            **r,
        }
        for r in rows
    ]
    data = make_data(
        "equilibria_ranks",
        runs,
        rows=full,
        base={"n": 3, "d": 3},
        verdict={"residual_max": 1e-10},
        task="equilibrium_rank",
    )
    return equilibria_ranks.claims(data)[0].verdict


def test_every_rank_needs_stability_and_a_measured_basin():
    good = [{"k": k, "rank": k, "stable": True, "basin_ci_low": 0.3} for k in (1, 2, 3)]
    assert _ranks(good) == R
    assert _ranks([*good[:2], {"k": 3, "rank": 3, "stable": True, "basin_ci_low": 0.0}]) == I
    assert _ranks([*good[:2], {"k": 3, "rank": 3, "stable": False, "basin_ci_low": 0.3}]) == N
    assert _ranks([*good[:2], {"k": 3, "rank": 2, "stable": True, "basin_ci_low": 0.3}]) == N
    assert (
        _ranks([*good[:2], {"k": 3, "rank": 3, "stable": True, "basin_ci_low": 0.3, "residual": 1e-3}]) == N
    )
    assert _ranks([*good[:2], {"k": 3, "constructed": False, "reason": "none"}]) == I


def test_a_finished_run_without_rows_is_never_reproduced():
    assert _ranks([]) == I
    assert equilibria_ranks.claims(make_data("equilibria_ranks", []))[0].verdict == I
