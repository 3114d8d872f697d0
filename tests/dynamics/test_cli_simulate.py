"""`rankcollapse simulate` through main([...]): files, JSON summary, plot, one-line errors with exit 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rankcollapse.cli.main import main


def test_simulate_writes_tidy_csv_config_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["simulate", "--mask", "causal", "--tokens", "16", "--d", "8", "--layers", "12",
                 "--samples", "2", "--seed", "3", "--out", str(out), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert len(rows) == 13 and rows[0]["layer"] == "0" and rows[-1]["layer"] == "12"
    assert list(rows[0])[:3] == ["layer", "mu", "mu_rel"]
    assert {"mu_rel_min", "mu_rel_max", "effective_rank", "mean_abs_cos", "dong_residual"} <= set(rows[0])
    assert summary["final_mu_rel"] == pytest.approx(float(rows[-1]["mu_rel"]))
    assert isinstance(summary["at_precision_floor"], bool)
    assert summary["theory"]["applicable"] and summary["theory"]["radius"] == 1
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["simulate"]["mask"] == "causal" and "torch" in config["versions"]


def test_simulate_reruns_identically_from_config(tmp_path: Path) -> None:
    args = ["simulate", "--mask", "window:w=1", "--tokens", "12", "--d", "4", "--layers", "5", "--seed", "9",
            "--dtype", "f32", "--value", "orthogonal", "--mode", "attn+sphere",
            "--metrics", "mu_rel,sigma_min"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a/metrics.csv").read_text() == (tmp_path / "b/metrics.csv").read_text()
    header = (tmp_path / "a/metrics.csv").read_text().splitlines()[0]
    assert header.startswith("layer,mu,mu_rel,sigma_min,") and "effective_rank" not in header


def test_simulate_plot(tmp_path: Path) -> None:
    assert main(["simulate", "--mask", "complete", "--layers", "40", "--tokens", "8", "--d", "4",
                 "--out", str(tmp_path), "--plot"]) == 0
    assert (tmp_path / "mu.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--mask", "nonsense"], "nonsense"), (["--value", "foo"], "value"), (["--dtype", "f16"], "dtype"),
     (["--mode", "gpt"], "unknown mode"), (["--tokens", "0"], "tokens must"), (["--device", "cuda"], "cuda"),
     (["--metrics", "mu,bogus"], "metrics"), (["--heads", "3"], "heads"), (["--threads", "0"], "threads")],
)
def test_bad_options_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    import torch

    if args[:2] == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["simulate", *args, "--layers", "2", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("rankcollapse: error:") and needle in err


def test_an_os_error_while_the_run_writes_is_one_line_naming_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import importlib

    sim = importlib.import_module("rankcollapse.dynamics.simulate")  # the package's name is the function

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sim, "simulate", full)
    assert main(["simulate", "--layers", "2", "--out", str(tmp_path / "x"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot write into --out" in err
    assert "No space left on device (ENOSPC)" in err


def test_plot_into_a_read_only_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rankcollapse.dynamics.plot import plot_mu
    from rankcollapse.dynamics.simulate import SimulationConfig, simulate
    from rankcollapse.edge.errors import RankCollapseError
    from readonly import read_only

    rows = simulate(SimulationConfig(tokens=4, d=3, layers=3, seed=0)).rows
    out = read_only(tmp_path / "ro", monkeypatch)
    with pytest.raises(RankCollapseError, match=r"^cannot write plot '.*mu\.png'.*\(EACCES\)$"):
        plot_mu(rows, out / "mu.png", dtype="float64")
    assert list(out.iterdir()) == []


def test_missing_out_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--layers", "2"]) == 2
    assert "--out" in capsys.readouterr().err


def test_json_flags_precision_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--mask", "complete", "--layers", "128", "--metrics", "mu_rel",
                 "--out", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["at_precision_floor"] is True
    assert summary["final_mu_rel_max"] <= summary["precision_floor"]
