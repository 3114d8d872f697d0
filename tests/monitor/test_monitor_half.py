"""The monitor on a half-precision model (issue 41, item 4): a probe is labelled by the dtype of the hidden
states it measured (``Monitor.dtype``, ``config.json``), ``at_floor`` is that dtype's floor, the figure
draws that floor (never float32's assumed), and training trajectories refuse half precision."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from torch import nn

from rankcollapse.core.precision import floor_rel
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze
from rankcollapse.monitor import Monitor, plot_monitor
from rankcollapse.monitor.plot import source_dtype
from rankcollapse.monitor.trajectory import TrajectoryConfig


def tiny_gpt2_lm(dtype: torch.dtype) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=300, n_positions=32, bos_token_id=0,
                        eos_token_id=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return GPT2LMHeadModel(config).to(dtype)


IDS = torch.randint(1, 300, (3, 12), generator=torch.Generator().manual_seed(1))


def _floor_lines(fig) -> list[str]:
    return [line.get_label() for ax in fig.axes for line in ax.get_lines() if "floor" in line.get_label()]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_model_is_probed_and_labelled_in_its_own_dtype(dtype, tmp_path):
    name = str(dtype).removeprefix("torch.")
    model = tiny_gpt2_lm(dtype)
    with Monitor(every=1, metrics="mu_rel,at_floor", out=str(tmp_path / "m")) as monitor:
        monitor.measure(model, IDS, step=0)
    assert monitor.dtype == monitor.model_dtype == name
    record = json.loads((tmp_path / "m" / "config.json").read_text())["config"]["monitor"]
    assert record["dtype"] == record["model_dtype"] == name
    assert source_dtype(tmp_path / "m") == source_dtype(tmp_path / "m" / "metrics.csv") == name
    # the values are analyze's on the same weights and ids, at_floor against the same (own) floor
    ref = analyze(AnalyzeConfig(metrics=("mu_rel", "at_floor")), model=model, ids=IDS)
    assert ref.config.dtype == name
    frame = monitor.to_frame()
    for row in ref.rows:
        got = frame[(frame["layer"] == row["layer"])].set_index("metric")["value"]
        assert got["at_floor"] == row["at_floor"]
        assert got["mu_rel"] == pytest.approx(row["mu_rel"], rel=4 * torch.finfo(dtype).eps)


def test_the_figure_draws_the_floor_of_the_dtype_measured_and_none_when_unknown(tmp_path):
    rows = [{"step": s, "layer": t, "hidden_state": f"h{t}", "hook": "", "metric": "mu_rel", "value": v}
            for s in (0, 1) for t, v in ((0, 0.9), (1, 0.05))]  # 0.05 < 100 x float16's floor, > float32's
    frame = pd.DataFrame(rows)
    assert _floor_lines(plot_monitor(frame)) == []  # a bare table says no dtype: none assumed
    assert _floor_lines(plot_monitor(frame, dtype="bf16")) == [f"bfloat16 precision floor {0.25:.1e}"]
    assert _floor_lines(plot_monitor(frame, dtype="float16")) == [f"float16 precision floor {2**-5:.1e}"]
    assert _floor_lines(plot_monitor(frame, dtype="float32")) == []  # 0.05 is far above float32's floor
    monitor = Monitor(every=1, metrics="mu_rel")
    monitor.measure(tiny_gpt2_lm(torch.bfloat16), IDS, step=0)
    fig = plot_monitor(monitor)
    low = monitor.to_frame()["value"].min()
    assert low < 100 * floor_rel("bfloat16")
    assert _floor_lines(fig) == [f"bfloat16 precision floor {0.25:.1e}"]


def test_a_later_probe_in_another_dtype_is_one_warning_line(capsys):
    monitor = Monitor(every=1, metrics="mu_rel")
    model = tiny_gpt2_lm(torch.float32)
    monitor.measure(model, IDS, step=0)
    monitor.measure(model.to(torch.bfloat16), IDS, step=1)
    assert monitor.dtype == "float32"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 1: the hidden states are bfloat16, the first probe's float32" in err[0]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "bf16"])
def test_training_trajectories_refuse_half_precision_in_one_line(dtype):
    with pytest.raises(RankCollapseError) as err:
        TrajectoryConfig(dtype=dtype)
    assert "half precision" in str(err.value) and "trajectory training" in str(err.value)
    assert "\n" not in str(err.value)
