"""``simulate --alibi-slope``: the table's flag for ``SimulationConfig.alibi_slope``, the run of the API."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.cli.main import main
from rankcollapse.core.names import QUANTITIES
from rankcollapse.dynamics.config import SimulationConfig
from rankcollapse.dynamics.simulate import simulate

ARGS = ["simulate", "--mask", "causal", "--tokens", "8", "--d", "4", "--layers", "3", "--samples", "2",
        "--no-progress"]


def test_the_flag_runs_the_api_s_decay_bias_and_records_it(tmp_path: Path, capsys) -> None:
    assert main([*ARGS, "--alibi-slope", "0.5", "--out", str(tmp_path / "m")]) == 0
    assert main([*ARGS, "--out", str(tmp_path / "none")]) == 0
    capsys.readouterr()
    got = pd.read_csv(tmp_path / "m" / "metrics.csv")
    plain = pd.read_csv(tmp_path / "none" / "metrics.csv")
    api = simulate(SimulationConfig(mask="causal", tokens=8, d=4, layers=3, samples=2, alibi_slope=0.5))
    assert got["mu_rel"].tolist() == pytest.approx([r["mu_rel"] for r in api.rows], rel=1e-12)
    assert got["mu_rel"].iloc[-1] != pytest.approx(plain["mu_rel"].iloc[-1], rel=1e-6)  # the bias acts
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert json.dumps(config).count('"alibi_slope": 0.5') == 1
    assert QUANTITIES["alibi_slope"].flag == "--alibi-slope"


@pytest.mark.parametrize(("extra", "words"), [(["--alibi-slope", "-1"], "--alibi-slope must be >= 0"),
                                              (["--alibi-slope", "0.5", "--kernel", "band"], "dense")])
def test_a_bad_slope_or_kernel_is_one_line_and_exit_2(tmp_path: Path, capsys, extra, words) -> None:
    assert main([*ARGS, *extra, "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err
