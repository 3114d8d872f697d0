"""`rankcollapse equilibria` and `portrait`: JSON output with the documented keys, one-line errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rankcollapse.cli.main import main
from rankcollapse.equilibria import BasinArc, counterexample_2d
from rankcollapse.equilibria.plots import plot_figure1, plot_figure5

KEYS = {"rank", "residual", "spectral_radius", "stable", "basin_fraction", "basin_ci", "value"}


def _rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_equilibria_rank_json_has_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["equilibria", "--n", "2", "--d", "2", "--rank", "2", "--starts", "32", "--steps", "600",
                 "--json"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert len(rows) == 1
    assert KEYS <= rows[0].keys()
    assert rows[0]["rank"] == 2 and rows[0]["stable"] is True
    assert np.asarray(rows[0]["value"]).shape == (2, 2)


def test_equilibria_every_rank_up_to_six(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["equilibria", "--n", "6", "--d", "6", "--starts", "16", "--steps", "600", "--json"]) == 0
    captured = capsys.readouterr()
    rows = _rows(captured.out)
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert "no construction" not in captured.err
    for r in rows:
        assert r["mask"] == "causal" and r["stable"] is True and r["spectral_radius"] < 1
        assert r["local_basin_ci"][0] > 0 and r["construction"]


def test_equilibria_value_file_search(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wv.npy"
    np.save(path, np.array([[0.95, 1.0], [0.0, 1.0]]))
    assert main(["equilibria", "--n", "2", "--d", "2", "--value", str(path), "--starts", "64",
                 "--steps", "800", "--seed", "3", "--json"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert {r["rank"] for r in rows} == {1, 2}
    for r in rows:
        assert KEYS <= r.keys()
        assert len(r["basin_ci"]) == 2


@pytest.mark.parametrize(
    "args",
    [
        ["--n", "2", "--d", "2", "--rank", "3"],
        ["--n", "0", "--d", "2"],
        ["--n", "2", "--d", "2", "--value", "{bad_shape}"],
        ["--n", "2", "--d", "2", "--value", "{not_finite}"],
        ["--n", "2", "--d", "2", "--value", "{missing}"],
        ["--n", "2", "--d", "2", "--value", "{bad_shape}", "--mask", "nonsense-mask"],
    ],
)
def test_bad_input_is_one_line_exit_2(args, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "shape.npy", np.ones((3, 3)))
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan], [0.0, 1.0]]))
    files = {"bad_shape": str(tmp_path / "shape.npy"), "not_finite": str(tmp_path / "nan.npy"),
             "missing": str(tmp_path / "nope.npy")}
    args = [a.format(**files) for a in args]
    assert main(["equilibria", *args, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rankcollapse: error:") and "\n" not in err


def test_figures_draw_from_known_numbers() -> None:
    cx = counterexample_2d()
    arc = BasinArc(4.626259302588277, (-0.0860232277, -0.9962931317), 2.4155102718, 3 * math.pi / 2,
                   3 * math.pi / 2 - 2.4155102718, 2.4155102718, 3 * math.pi / 2, "known")
    fig1 = plot_figure1(cx, arc=arc, steps=20)
    fig5 = plot_figure5(cx, steps=30)
    assert len(fig1.axes) == 2 and len(fig5.axes) == 2


@pytest.mark.slow
def test_portrait_writes_figures_and_numbers(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["portrait", "--out", str(tmp_path)]) == 0
    for name in ("figure1.png", "figure1.pdf", "figure5.png", "figure5.pdf", "portrait.json"):
        assert (tmp_path / name).stat().st_size > 0
    numbers = json.loads((tmp_path / "portrait.json").read_text())
    assert numbers["basin_arc"]["start"] == pytest.approx(2.4155102718, abs=1e-6)
    assert numbers["basin_arc"]["end"] == pytest.approx(3 * math.pi / 2, abs=1e-6)
