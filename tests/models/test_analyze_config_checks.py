"""The checks `rankcollapse analyze` used to make in the command live in the Python API (issue 43 item 3):
``AnalyzeConfig`` refuses a bad depth on construction, and ``check_inputs`` (which ``analyze`` and
``analyze_into`` call) refuses what the loaded model cannot take. A Python caller gets the same one line
as the command, whose line names the flag instead of the field (``cli.main.flag_named``)."""

from __future__ import annotations

import re

import pytest
import torch

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks.schedule import MAX_LAYERS
from rankcollapse.models.analyze import (
    AnalyzeConfig,
    AnalyzeOutputs,
    AnalyzeRun,
    analyze,
    analyze_into,
    check_inputs,
)
from rankcollapse.models.loading import load_model

CHECK_MASKS = "check_masks applies to text models (a vision encoder's mask is complete)"
PIXELS = "pixel_values applies only to a vision encoder (ViT); "


def _cli_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rankcollapse: error: ") and "\n" not in err
    return err.removeprefix("rankcollapse: error: ")


@pytest.mark.parametrize("layers", [-1, MAX_LAYERS + 1])
def test_a_depth_out_of_range_is_refused_by_the_config_and_named_by_its_flag(layers, tmp_path, capsys):
    needle = f"must be between 0 and {MAX_LAYERS}, got {layers}"
    with pytest.raises(RankCollapseError, match=re.escape(f"layers {needle}")):
        AnalyzeConfig(model="tiny:bert", layers=layers)
    args = ["analyze", "--model", "tiny:bert", "--layers", str(layers), "--out", str(tmp_path / "o")]
    err = _cli_error(args, capsys)
    assert err.startswith(f"--layers {needle}")
    assert not (tmp_path / "o").exists()


def test_a_fractional_depth_is_refused_by_the_config():
    with pytest.raises(RankCollapseError, match="layers must be an integer"):
        AnalyzeConfig(model="tiny:bert", layers=2.5)


def test_check_masks_on_a_vision_encoder_is_one_line_in_python_and_at_the_command(tmp_path, capsys):
    vit = load_model("tiny:vit")
    with pytest.raises(RankCollapseError, match=re.escape(CHECK_MASKS)):
        check_inputs(AnalyzeConfig(model="tiny:vit"), vit, check_masks=True)
    with pytest.raises(RankCollapseError, match=re.escape(CHECK_MASKS)):
        analyze_into(tmp_path / "py", AnalyzeOutputs(AnalyzeConfig(model="tiny:vit", samples=1),
                                                     check_masks=True))
    assert not (tmp_path / "py" / "config.json").exists()  # refused before anything is written
    err = _cli_error(["analyze", "--model", "tiny:vit", "--samples", "1", "--check-masks", "--no-progress",
                      "--out", str(tmp_path / "cli")], capsys)
    assert err == "--" + CHECK_MASKS.replace("_", "-", 1)


def test_pixel_values_for_a_text_model_are_one_line_in_python_and_at_the_command(tmp_path, capsys):
    config = AnalyzeConfig(model="tiny:bert", samples=1, tokens=8)
    with pytest.raises(RankCollapseError, match=re.escape(PIXELS) + r"'.+' reads token ids$"):
        analyze(config, pixel_values=torch.zeros(1, 3, 32, 32))
    with pytest.raises(RankCollapseError, match=re.escape(PIXELS)):
        analyze_into(tmp_path / "py", config, pixel_values=tmp_path / "pixels.npy")
    err = _cli_error(["analyze", "--model", "tiny:bert", "--samples", "1", "--tokens", "8", "--no-progress",
                      "--pixel-values", str(tmp_path / "pixels.npy"), "--out", str(tmp_path / "cli")], capsys)
    assert err.startswith("--" + PIXELS.replace("_", "-", 1)) and err.endswith("reads token ids")


def test_a_vision_encoder_refuses_token_inputs_and_a_text_model_ids_and_texts_together():
    vit = load_model("tiny:vit")
    with pytest.raises(RankCollapseError, match="is a vision encoder: give pixel_values"):
        check_inputs(AnalyzeConfig(model="tiny:vit"), vit, ids=torch.zeros(1, 4, dtype=torch.long))
    bert = load_model("tiny:bert")
    with pytest.raises(RankCollapseError, match="give ids or texts, not both"):
        check_inputs(AnalyzeConfig(model="tiny:bert"), bert, ids=torch.zeros(1, 4, dtype=torch.long),
                     texts=["a b c"])
    check_inputs(AnalyzeConfig(model="tiny:bert"), bert, check_masks=True)  # a text model: fine


def test_analyze_into_writes_the_run_the_command_writes(tmp_path):
    """The folder API is the command's run: the same metrics.csv bytes, and what the outputs ask for."""
    config = AnalyzeConfig(model="tiny:gpt2", samples=2, tokens=8, mask="causal-window:w=4")
    run = analyze_into(tmp_path / "py", AnalyzeOutputs(config, per_sample=True, check_masks=True))
    assert isinstance(run, AnalyzeRun) and run.out == tmp_path / "py" and run.figures == []
    assert run.masks_match and len(run.mask_checks) == len(run.result.rows) - 1
    assert {p.name for p in run.out.iterdir()} >= {"config.json", "metrics.csv", "per_sample.csv",
                                                    "mask_check.json"}
    assert main(["analyze", "--model", "tiny:gpt2", "--samples", "2", "--tokens", "8", "--mask",
                 "causal-window:w=4", "--no-progress", "--no-table", "--out", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "metrics.csv").read_bytes() == (tmp_path / "py" / "metrics.csv").read_bytes()
    with pytest.raises(RankCollapseError):  # an earlier run is never replaced silently
        analyze_into(tmp_path / "py", config)
