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
    assert main(["equilibria", "--tokens", "2", "--d", "2", "--rank", "2", "--starts", "32", "--layers",
                 "600",
                 "--json"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert len(rows) == 1
    assert KEYS <= rows[0].keys()
    assert rows[0]["rank"] == 2 and rows[0]["stable"] is True
    assert np.asarray(rows[0]["value"]).shape == (2, 2)


def test_equilibria_every_rank_up_to_six(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["equilibria", "--tokens", "6", "--d", "6", "--starts", "16", "--layers", "600",
                 "--json"]) == 0
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
    assert main(["equilibria", "--tokens", "2", "--d", "2", "--value", str(path), "--starts", "64",
                 "--layers", "800", "--seed", "3", "--json"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert {r["rank"] for r in rows} == {1, 2}
    for r in rows:
        assert KEYS <= r.keys()
        assert len(r["basin_ci"]) == 2


PAPER_KEYS = {"rank", "x", "residual", "signs", "family", "unstable", "neutral", "stable"}


def test_paper_construction_lists_every_equilibrium_of_every_rank(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["equilibria", "--construction", "paper", "--tokens", "4", "--d", "4", "--w", "4",
                 "--layers", "200",
                 "--starts", "2", "--json"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert all(PAPER_KEYS <= r.keys() for r in rows)
    paper = [r["rank"] for r in rows if r["family"] == "paper"]
    assert [paper.count(k) for k in range(1, 5)] == [2, 4, 8, 16]
    assert len(rows) == 68 and {r["rank"] for r in rows} == {1, 2, 3, 4}
    for r in rows:
        assert r["residual"] < 1e-13 and np.asarray(r["x"]).shape == (4, 4)
        assert r["unstable"] + r["neutral"] + r["stable"] == 4 * 3


def test_paper_construction_rank_filter_and_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["equilibria", "--construction", "paper", "--tokens", "3", "--d", "3", "--family", "paper",
                 "--rank", "3", "--layers", "100", "--starts", "2", "--json"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert len(rows) == 8 and all(r["rank"] == 3 and r["family"] == "paper" for r in rows)
    assert all(r["stable_rank"] <= r["srank_bound"] for r in rows)


@pytest.mark.parametrize(
    "args",
    [
        ["--tokens", "4", "--d", "3", "--construction", "paper"],
        ["--tokens", "3", "--d", "3", "--construction", "paper", "--w", "1"],
        ["--tokens", "3", "--d", "3", "--construction", "paper", "--mask", "causal"],
        ["--tokens", "3", "--d", "3", "--construction", "paper", "--d-qk", "2"],
        ["--tokens", "2", "--d", "2", "--rank", "1", "--mask", "nonsense", "--d-qk", "5"],
        ["--tokens", "2", "--d", "2", "--rank", "1", "--d-qk", "5"],
        ["--tokens", "2", "--d", "2", "--w", "3"],
        ["--tokens", "2", "--d", "2", "--value", "{zero}"],
        ["--tokens", "2", "--d", "2", "--value", "{huge}"],
        ["--tokens", "2", "--d", "2", "--value", "{zero}", "--construction", "paper"],
        ["--tokens", "2", "--d", "2", "--construction", "nope"],
        ["--tokens", "2", "--d", "2", "--rank", "3"],
        ["--tokens", "0", "--d", "2"],
        ["--tokens", "2", "--d", "2", "--value", "{bad_shape}"],
        ["--tokens", "2", "--d", "2", "--value", "{not_finite}"],
        ["--tokens", "2", "--d", "2", "--value", "{missing}"],
        ["--tokens", "2", "--d", "2", "--value", "{bad_shape}", "--mask", "nonsense-mask"],
    ],
)
def test_bad_input_is_one_line_exit_2(args, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "shape.npy", np.ones((3, 3)))
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan], [0.0, 1.0]]))
    np.save(tmp_path / "zero.npy", np.zeros((2, 2)))
    np.save(tmp_path / "huge.npy", 1e300 * np.eye(2))
    files = {"bad_shape": str(tmp_path / "shape.npy"), "not_finite": str(tmp_path / "nan.npy"),
             "missing": str(tmp_path / "nope.npy"), "zero": str(tmp_path / "zero.npy"),
             "huge": str(tmp_path / "huge.npy")}
    args = [a.format(**files) for a in args]
    assert main(["equilibria", *args, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rankcollapse: error:") and "\n" not in err


def test_zero_and_overflowing_value_matrices_are_named(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "z.npy", np.zeros((2, 2)))
    np.save(tmp_path / "h.npy", 1e300 * np.eye(2))
    assert main(["equilibria", "--tokens", "2", "--d", "2", "--value", str(tmp_path / "z.npy")]) == 2
    assert "W_V = 0" in capsys.readouterr().err
    assert main(["equilibria", "--tokens", "2", "--d", "2", "--value", str(tmp_path / "h.npy")]) == 2
    assert "overflows" in capsys.readouterr().err


def test_help_texts_are_not_eaten_by_markup(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("portrait", "equilibria", "counterexample"):
        main([cmd, "--help"])
        text = capsys.readouterr().out
        assert "[, [" not in text and "= [," not in text
        assert "((1, w), (0, 1))" in text or cmd == "equilibria"


def test_figures_draw_from_known_numbers() -> None:
    cx = counterexample_2d()
    arc = BasinArc(4.626259302588277, (-0.0860232277, -0.9962931317), 2.4155102718, 3 * math.pi / 2,
                   3 * math.pi / 2 - 2.4155102718, 2.4155102718, 3 * math.pi / 2, "known")
    fig1 = plot_figure1(cx, arc=arc, steps=20)
    fig5 = plot_figure5(cx, steps=30)
    assert len(fig1.axes) == 2 and len(fig5.axes) == 2


def test_portrait_writes_the_paper_figures_by_default(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["portrait", "--out", str(tmp_path / "p"), "--w", "3"]) == 0
    for name in ("paper_figure1.png", "paper_figure5.pdf", "paper_counterexample.json"):
        assert (tmp_path / "p" / name).stat().st_size > 0
    assert json.loads((tmp_path / "p" / "paper_counterexample.json").read_text())["w"] == 3.0
    assert main(["portrait", "--out", str(tmp_path / "q"), "--a", "0.9"]) == 2  # --a is ours only
    assert not (tmp_path / "q").exists()


@pytest.mark.slow
def test_portrait_writes_figures_and_numbers(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["portrait", "--construction", "ours", "--out", str(tmp_path)]) == 0
    for name in ("figure1.png", "figure1.pdf", "figure5.png", "figure5.pdf", "portrait.json"):
        assert (tmp_path / name).stat().st_size > 0
    numbers = json.loads((tmp_path / "portrait.json").read_text())
    assert numbers["basin_arc"]["start"] == pytest.approx(2.4155102718, abs=1e-6)
    assert numbers["basin_arc"]["end"] == pytest.approx(3 * math.pi / 2, abs=1e-6)
