"""kit.tasks.phases: the residual strength as the simulator's skip, and the rows the phase stories read."""

from __future__ import annotations

import math

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.kit.tasks.phases import SIMULATE_PHASES, simulate_phases, skip_of

PARAMS = {"tokens": 8, "d": 8, "layers": 4, "samples": 2, "mode": "transformer", "d_qk": 8, "seed": 0}


def test_the_residual_strength_is_one_over_the_skip_and_zero_is_no_skip() -> None:
    assert skip_of(4) == 0.25 and skip_of(0) == 0.0
    with pytest.raises(RankCollapseError):
        skip_of(-1)


def test_rows_per_layer_and_sample_with_the_cell_they_belong_to() -> None:
    out = simulate_phases({**PARAMS, "residual": 2.0, "qk_scale": 0.5}, lambda t: None)
    rows = [r for r in out.rows if r["kind"] == "phase_sample"]
    assert len(rows) == (4 + 1) * 2
    assert {r["residual"] for r in rows} == {2.0} and {r["qk_scale"] for r in rows} == {0.5}
    assert all(math.isnan(r["attention_entropy"]) for r in rows if r["layer"] == 0)
    assert out.summary["layers_run"] == 4


def test_norm_of_a_x_plus_f_is_norm_of_x_plus_f_over_a() -> None:
    a = simulate_phases({**PARAMS, "residual": 4.0}, lambda t: None).rows
    b = simulate_phases({**PARAMS, "skip": 0.25}, lambda t: None).rows
    assert [r["mu_rel"] for r in a] == [r["mu_rel"] for r in b]


def test_residual_and_skip_together_are_refused_and_the_cost_is_positive() -> None:
    with pytest.raises(RankCollapseError, match="residual or skip"):
        simulate_phases({**PARAMS, "residual": 1.0, "skip": 1.0}, lambda t: None)
    assert SIMULATE_PHASES.cost_s is not None
