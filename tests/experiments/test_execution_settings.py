"""Execution settings (``device``, ``batch_size``) are how a run is computed, never what: not part of its
identity (resume finds it whatever they are), carried on ``RunSpec.execution``, passed to the tasks
that take them, refused for the tasks that cannot use a device, and recorded in each run's record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.engine.config import load_experiment
from rankcollapse.experiments.engine.grid import RunSpec, make_runs
from rankcollapse.experiments.engine.store import RunStore
from rankcollapse.experiments.engine.tasks import execute_run
from rankcollapse.pipeline import ReproduceConfig, reproduce
from rankcollapse.pipeline.reproduce import print_estimate, with_execution

SWEEP = """title: t
task: analyze
base: {{model: "tiny:bert", layers: 2, samples: 5, tokens: 12, dtype: float64, metrics: [mu, mu_rel]{extra}}}
grid: {{seed: [0, 1]}}
"""


def _sweep(folder: Path, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mine.yaml").write_text(SWEEP.format(extra=extra))
    return folder


def test_execution_is_not_part_of_a_runs_identity() -> None:
    plain = make_runs("e", "toy", {"layers": 2}, {"seed": [0, 1]})
    other = make_runs(
        "e", "toy", {"layers": 2}, {"seed": [0, 1]}, execution={"device": "cuda", "batch_size": 3}
    )
    assert [r.run_id for r in plain] == [r.run_id for r in other] and plain == other
    assert other[0].execution == {"device": "cuda", "batch_size": 3} and plain[0].execution == {}
    assert (
        RunSpec("e", "toy", {"x": 1}).run_id
        == RunSpec("e", "toy", {"x": 1}, execution={"batch_size": 1}).run_id
    )


def test_a_profile_batch_size_is_an_execution_setting_not_a_param(tmp_path: Path) -> None:
    with_size = load_experiment(_sweep(tmp_path / "a", ", batch_size: 2") / "mine.yaml")
    without = load_experiment(_sweep(tmp_path / "b") / "mine.yaml")
    assert with_size.execution == {"batch_size": 2} and "batch_size" not in with_size.base
    assert [r.run_id for r in with_size.runs()] == [r.run_id for r in without.runs()]
    assert all(r.execution == {"batch_size": 2} for r in with_size.runs())
    (tmp_path / "a" / "mine.yaml").write_text(SWEEP.format(extra=", batch_size: 0"))
    with pytest.raises(RankCollapseError, match="--batch-size must be >= 1") as info:
        load_experiment(tmp_path / "a" / "mine.yaml")
    assert "\n" not in str(info.value)
    (tmp_path / "a" / "mine.yaml").write_text(
        SWEEP.format(extra="").replace("seed: [0, 1]", "batch_size: [1, 2]")
    )
    with pytest.raises(RankCollapseError, match="execution setting, not a grid axis"):
        load_experiment(tmp_path / "a" / "mine.yaml")


def test_a_sweep_resumed_with_another_batch_size_skips_its_finished_runs(tmp_path: Path) -> None:
    config = _sweep(tmp_path / "cfg")
    out = tmp_path / "out"
    first = reproduce(ReproduceConfig(out, profile="full", config_dir=config, workers=1, progress=False,
                                      batch_size=1))
    assert first.sweep.finished == 2 and first.sweep.failed == 0
    records = RunStore(out).records()
    assert [r["execution"] for r in records] == [{"device": "cpu", "batch_size": 1}] * 2
    assert all(r["summary"]["batch_size"] == 1 and r["summary"]["device"] == "cpu" for r in records)
    rows = (out / "runs.csv").read_text()
    again = reproduce(
        ReproduceConfig(out, profile="full", config_dir=config, workers=1, progress=False, batch_size=3,
                        device="cpu")
    )
    assert again.sweep.skipped == 2 and again.sweep.finished == 0
    assert [r["execution"] for r in RunStore(out).records()] == [{"device": "cpu", "batch_size": 1}] * 2
    fresh = reproduce(
        ReproduceConfig(tmp_path / "fresh", profile="full", config_dir=config, workers=1, progress=False,
                        batch_size=3)
    )
    assert fresh.sweep.finished == 2 and (tmp_path / "fresh" / "runs.csv").read_text() == rows  # bitwise
    record = json.loads(next((tmp_path / "fresh" / "runs" / "mine").glob("*.json")).read_text())
    assert record["execution"] == {"device": "cpu", "batch_size": 3}


def test_a_record_without_execution_settings_says_cpu_and_one_batch(tmp_path: Path) -> None:
    spec = make_runs("toy", "toy", {"layers": 2, "rate": 0.5}, {"seed": [0]})[0]
    RunStore(tmp_path).save(spec, execute_run(spec, on_layer=lambda t: None))
    assert RunStore(tmp_path).record(spec)["execution"] == {"device": "cpu", "batch_size": None}


def test_a_task_that_cannot_use_a_device_refuses_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = make_runs("toy", "toy", {"layers": 2, "rate": 0.5}, {"seed": [0]}, execution={"device": "cuda"})[0]
    result = execute_run(spec, on_layer=lambda t: None)
    assert result.status == "failed" and "runs on the CPU only; --device cuda does not apply" in result.error
    cpu = make_runs("toy", "toy", {"layers": 2, "rate": 0.5}, {"seed": [0]}, execution={"batch_size": 4})[0]
    assert execute_run(cpu, on_layer=lambda t: None).status == "ok"  # a batch size it cannot take: ignored
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(RankCollapseError, match="runs on the CPU only"):
        with_execution(make_runs("toy", "toy", {"layers": 2, "rate": 0.5}, {"seed": [0]}), {"device": "cuda"})
    (tmp_path / "toy.yaml").write_text(
        "title: t\ntask: toy\nbase: {layers: 2, rate: 0.5}\ngrid: {seed: [0]}\n"
    )
    with pytest.raises(RankCollapseError, match="runs on the CPU only"):
        reproduce(
            ReproduceConfig(tmp_path / "out", profile="full", config_dir=tmp_path, workers=1, progress=False,
                            device="cuda")
        )
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_the_estimate_for_cuda_says_it_is_extrapolated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rankcollapse.experiments.stories import load_experiments

    exps = {e.name: e for e in load_experiments("quick", ["fig8"])}
    specs = [s for e in exps.values() for s in e.runs()]
    print_estimate(specs, exps, "quick", 1, RunStore(tmp_path))
    cpu = capsys.readouterr().err
    assert "of CPU time" in cpu and "extrapolated" not in cpu
    print_estimate(specs, exps, "quick", 1, RunStore(tmp_path), device="cuda")
    gpu = capsys.readouterr().err
    assert gpu.startswith(cpu.rstrip("\n")) and "cuda: about" in gpu
    assert (
        "extrapolated from FLOPs at an assumed 10 TFLOP/s; not measured here" in gpu and gpu.count("\n") == 1
    )
