"""analyze in bfloat16 and float16 (issue 41, item 4): a half-precision run agrees with the eager float64
and float32 runs of the same weights and ids to a few eps of its own dtype; ``at_floor`` is its own
dtype's floor; an in-memory model is labelled by its own dtype everywhere (result, config.json, figure
title and floor line, a run folder read back); the CLI runs ``--dtype bfloat16`` and prints its floor;
every command that computes in full precision refuses half precision in one line."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from rankcollapse.cli.main import main
from rankcollapse.core.precision import FLOOR_FACTOR, eps, floor_rel
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, excerpts, load_model, write_run
from rankcollapse.models.finished import read_run
from rankcollapse.models.plots import figure_collapse

#: Per-sample mu_rel of a run in ``dtype`` against the float64 run of the same weights and ids, relative:
#: at most this many eps of ``dtype`` (measured on these runs, the largest of the tiny Llama and BERT:
#: bfloat16 0.25 eps, float16 0.16, float32 2.5).
HALF_EPS, FLOAT32_EPS = 2.0, 8.0


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _runs(model: str, ids: torch.Tensor, **fields: object) -> dict[str, object]:
    return {dt: analyze(AnalyzeConfig(model=model, dtype=dt, samples=ids.shape[0], tokens=ids.shape[1],
                                      metrics=("mu", "mu_rel", "at_floor"), **fields), ids=ids)
            for dt in ("float64", "float32", "bfloat16", "float16")}


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_half_precision_runs_agree_with_the_eager_float64_and_float32_runs_to_a_few_of_their_eps(family):
    """The same random weights (drawn in float32, then cast) and ids in four dtypes: each sample's mu_rel
    at each layer within HALF_EPS eps of its own dtype (FLOAT32_EPS for float32) of float64's."""
    name = f"tiny:{family}"
    ids = excerpts(load_model(name, "float32"), samples=3, tokens=24, seed=0)
    runs = _runs(name, ids)
    ref = runs["float64"]
    for dt, bound in (("float32", FLOAT32_EPS), ("bfloat16", HALF_EPS), ("float16", HALF_EPS)):
        run = runs[dt]
        assert run.config.dtype == dt and run.model_info["dtype"] == dt
        assert [r["status"] for r in run.rows] == ["ok"] * len(ref.rows)
        for t, (got, want) in enumerate(zip(run.samples, ref.samples, strict=True)):
            rel = ((got["mu_rel"] - want["mu_rel"]).abs() / want["mu_rel"]).max().item()
            assert rel <= bound * eps(dt), (dt, t, rel / eps(dt))
    # the half-precision runs really ran in half precision: they differ from float32 by more than float32 can
    half = max(((a["mu_rel"] - b["mu_rel"]).abs() / b["mu_rel"]).max().item()
               for a, b in zip(runs["bfloat16"].samples, runs["float32"].samples, strict=True))
    assert half > 100 * eps("float32")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_half_model_loaded_by_name_runs_parts_with_hugging_faces_casts(dtype):
    """Loaded by name in half precision, the dissected parts keep HF's float32 casts (RMSNorm): the
    parts' forward equals HF's own to 0.01 eps of the dtype (measured 0 on the tiny Llama; without the
    casts 0.13 bfloat16 eps, 0.07 float16 eps)."""
    ids = excerpts(load_model("tiny:llama", "float32"), samples=3, tokens=24, seed=0)
    runs = {b: analyze(AnalyzeConfig(model="tiny:llama", dtype=dtype, samples=3, tokens=24,
                                     metrics=("mu", "mu_rel"), backend=b), ids=ids) for b in ("parts", "hf")}
    assert runs["parts"].model_info["hf_casts"] is True
    rel = max(((a["mu_rel"] - b["mu_rel"]).abs() / b["mu_rel"]).max().item()
              for a, b in zip(runs["parts"].samples, runs["hf"].samples, strict=True))
    assert rel <= 0.01 * eps(dtype)


def test_at_floor_of_a_half_precision_run_is_its_own_dtypes_floor():
    """Pure attention collapses tiny BERT's tokens to mu_rel ~ 6e-3 at layer 1: below bfloat16's floor
    (32 eps = 0.25), far above float32's (3.8e-6). Every sample's flag is mu_rel <= 32 eps of its run."""
    ids = excerpts(load_model("tiny:bert", "float32"), samples=2, tokens=16, seed=0)
    runs = _runs("tiny:bert", ids, mode="attn", layers=3)
    for dt, run in runs.items():
        for values in run.samples:
            for rel, flag in zip(values["mu_rel"].tolist(), values["at_floor"].tolist(), strict=True):
                assert flag == float(rel <= FLOOR_FACTOR * eps(dt) * (1 + 1e-6)), (dt, rel, flag)
    layer1 = {dt: run.rows[1] for dt, run in runs.items()}
    assert all(floor_rel("float32") < row["mu_rel"] < floor_rel("bfloat16") for row in layer1.values())
    assert layer1["bfloat16"]["at_floor"] == 1.0 and layer1["float32"]["at_floor"] == 0.0


def bert_bf16() -> nn.Module:
    from transformers import BertConfig, BertModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64))
    return model.to(torch.bfloat16)


def test_an_in_memory_bfloat16_model_is_labelled_bfloat16_everywhere(tmp_path):
    """AnalyzeConfig() leaves dtype unset: the result, config.json, the figure's title and floor line and
    the folder read back all say bfloat16 (its floor 0.25), never float32; the caller's config is
    unchanged, so a later run under it loads a model by name in float32."""
    config = AnalyzeConfig(model="mine", samples=2, tokens=12, metrics=("mu", "mu_rel", "at_floor"))
    ids = torch.randint(3, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    result = analyze(config, model=bert_bf16(), ids=ids)
    assert result.config.dtype == "bfloat16" and config.dtype == "float32"
    write_run(result, tmp_path / "run")
    record = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert record["analyze"]["dtype"] == record["model"]["dtype"] == "bfloat16"
    for source in (result, read_run(tmp_path / "run")):
        fig = figure_collapse(source)
        title = fig.subfigs[0].get_suptitle()
        assert "bfloat16" in title and "float32" not in title
        floors = [line for line in fig.axes[1].get_lines() if line.get_label().startswith("precision floor")]
        assert [line.get_label() for line in floors] == ["precision floor 2.5e-01 (bfloat16)"]
        assert set(floors[0].get_ydata()) == {0.25}
    with pytest.raises(RankCollapseError, match="the model given is bfloat16, not dtype 'float32'"):
        analyze(AnalyzeConfig(model="mine", samples=2, tokens=12, dtype="float32"), model=bert_bf16(),
                ids=ids)


def test_a_run_written_before_the_label_reads_back_in_its_models_dtype(tmp_path):
    """A folder whose config.json says analyze.dtype float32 beside model.dtype bfloat16 (an in-memory
    bf16 model, written by an earlier release) is read back as bfloat16: its floor, not float32's."""
    ids = torch.randint(3, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    write_run(analyze(AnalyzeConfig(samples=2, tokens=12, metrics=("mu_rel",)), model=bert_bf16(), ids=ids),
              tmp_path / "old")
    path = tmp_path / "old" / "config.json"
    record = json.loads(path.read_text())
    record["config"]["analyze"]["dtype"] = "float32"
    path.write_text(json.dumps(record))
    assert read_run(tmp_path / "old").facts["dtype"] == "bfloat16"


def test_the_cli_runs_bfloat16_and_prints_its_floor(tmp_path, capsys):
    out = tmp_path / "o"
    code = main(["analyze", "--model", "tiny:gpt2", "--dtype", "bf16", "--layers", "2", "--samples", "2",
                 "--tokens", "12", "--no-progress", "--metrics", "mu,mu_rel,at_floor", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    record = json.loads((out / "config.json").read_text())["config"]
    assert record["analyze"]["dtype"] == record["model"]["dtype"] == "bfloat16"
    line = next(x for x in printed.splitlines() if "precision floor" in x)
    assert line.startswith("bfloat16: mu_rel's precision floor 32 eps = 0.25") and "float32" in line


@pytest.mark.parametrize("dtype", ["bfloat16", "fp16"])
def test_the_simulator_refuses_half_precision_in_one_line(dtype, tmp_path, capsys):
    """simulate is the one other command with --dtype (equilibria computes in float64 only)."""
    code = main(["simulate", "--tokens", "8", "--d", "4", "--layers", "1", "--dtype", dtype,
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert "half precision" in err and "allowed: float64, float32" in err
    assert not (tmp_path / "o").exists()


def test_the_python_configs_that_compute_in_full_precision_refuse_half_precision():
    from rankcollapse.dynamics import SimulationConfig
    from rankcollapse.models.measure import CurvesConfig
    from rankcollapse.monitor.trajectory import TrajectoryConfig

    for make in (lambda: SimulationConfig(dtype="float16"), lambda: TrajectoryConfig(dtype="bfloat16"),
                 lambda: CurvesConfig(model="tiny:bert", dtype="bf16")):
        with pytest.raises(RankCollapseError, match="half precision, refused here"):
            make()
    assert math.isclose(floor_rel(AnalyzeConfig(dtype="fp16").dtype), 2.0**-5)
