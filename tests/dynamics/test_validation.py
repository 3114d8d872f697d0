"""The simulator's edge: validated config, names, the parsed mask passed down, numerical states."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

from rankcollapse.cli.main import main
from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.dynamics.config import estimate_memory
from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.edge.validate import available_memory, check_memory


def small(**kw: object) -> SimulationConfig:
    base: dict[str, object] = {"tokens": 8, "d": 4, "layers": 4, "samples": 2}
    base.update(kw)
    return SimulationConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "match"),
    [({"seed": -1}, "seed must be >= 0"),
     ({"value": "identity", "value_scale": 5.0}, "value_scale does not apply"),
     ({"value_matrix": torch.eye(4), "value_scale": 2.0}, "value_scale does not apply"),
     ({"value_matrix": torch.eye(4), "value": "orthogonal"}, "not both"),
     ({"mask_matrix": torch.ones(8, 8, dtype=torch.bool), "mask": "causal"}, "not both"),
     ({"kernel": "dense", "band_block": 8}, "band_block"), ({"metric_threads": 10**6}, "metric_threads"),
     ({"d_qk": math.nan}, "d_qk"), ({"d_qk": -1.0}, "d_qk"), ({"layers": 2.5}, "layers must be an integer"),
     ({"tokens": 2_000_000_000}, "needs about .* of memory"),
     ({"tokens": 10**20}, "needs about .* of memory"),
     ({"layers": 10**13}, "needs about"), ({"stop_below": 0.0}, "stop_below"),
     ({"value_matrix": torch.full((4, 4), math.nan)}, "non-finite"),
     ({"input_tokens": torch.full((8, 4), math.inf)}, "non-finite"),
     ({"value_matrix": torch.eye(4, dtype=torch.complex128)}, "real floating-point"),
     ({"shared_weights": True, "value_matrix": torch.eye(4).expand(4, 1, 4, 4)}, "shared_weights")],
)
def test_bad_settings_are_refused_when_the_config_is_built(change: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(RankCollapseError, match=match) as info:
        small(**change)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", [torch.eye(4).numpy(), [[1.0, 0.0], [0.0, 1.0]], "eye"])
def test_non_tensors_are_type_errors_naming_the_argument(bad: object) -> None:
    with pytest.raises(RankCollapseTypeError, match=r"value_matrix must be a torch\.Tensor"):
        small(value_matrix=bad)
    with pytest.raises(TypeError, match="config must be a SimulationConfig"):
        simulate(bad)  # type: ignore[arg-type]


def test_memory_estimate_refuses_before_allocating_and_names_the_estimate() -> None:
    cfg = small()
    # the dense mask alone is 2 n^2 bytes: n = 2e9 needs 8e18 bytes
    assert estimate_memory(cfg, 8, band=None, fixed_only=True) >= 2 * 8**2
    with pytest.raises(RankCollapseError, match=r"needs about 1 kB of memory, more than the 10 B available"):
        check_memory("a job", 1000.0, available=10)
    free = available_memory()
    assert free is None or free > 0


@pytest.mark.parametrize(("old", "new"), [("attn+ln", "attn+sphere"), ("attn+skip+ln", "attn+skip+sphere")])
def test_the_simulators_retired_mode_names_are_refused_in_one_line(old: str, new: str) -> None:
    """0.2.0 retired the simulator's ``attn+ln`` / ``attn+skip+ln`` (the scaling-only sphere normalisation,
    not a LayerNorm): an unknown mode, whose one line lists the names, ``attn+sphere`` among them."""
    with pytest.raises(RankCollapseError, match=f"unknown mode '{re.escape(old)}'; allowed: ") as info:
        small(mode=old)
    assert "\n" not in str(info.value) and new in str(info.value).split("allowed: ")[1].split(", ")
    assert small(mode=new).mode == new


def test_dtype_names_are_canonical() -> None:
    assert small(dtype="f32").dtype == "float32" and small(dtype="float64").dtype == "float64"


def test_the_mask_is_parsed_once_and_passed_down(monkeypatch: pytest.MonkeyPatch) -> None:
    import rankcollapse.masks as masks

    calls: list[str] = []
    real = masks.parse_mask

    def counting(spec: str) -> object:
        calls.append(spec)
        return real(spec)

    monkeypatch.setattr(masks, "parse_mask", counting)
    cfg = small(mask="causal&window:w=2", layers=3)
    result = simulate(cfg)
    assert calls == ["causal&window:w=2"], calls
    assert cfg.mask == cfg.parsed_mask.spec and result.radius is not None
    # a Mask object is used as given, never re-parsed
    calls.clear()
    simulate(small(mask=real("window:w=1"), layers=2))
    assert calls == []


def test_overflow_is_its_own_state_never_at_floor() -> None:
    cfg = small(mask="complete", value="scaled-identity", value_scale=1e3, dtype="float32", layers=100)
    r = simulate(cfg)
    last = r.rows[-1]
    assert r.nonfinite_layer == last["layer"] and last["overflow"] == 1.0
    assert math.isnan(last["mu_rel"]) and math.isnan(last["at_floor"]) and math.isnan(last["num_rank"])
    assert all(row["overflow"] == 0.0 for row in r.rows[:-1])
    summary = r.summary()
    assert summary["state"] == "overflow" and summary["overflow"] and not summary["at_precision_floor"]


def test_vanished_tokens_are_undefined_not_collapsed() -> None:
    r = simulate(small(value_matrix=torch.zeros(4, 4, dtype=torch.float64), layers=2))
    assert math.isnan(r.rows[-1]["mu_rel"]) and math.isnan(r.rows[-1]["at_floor"])
    assert r.summary()["state"] == "undefined" and not r.summary()["at_precision_floor"]


def test_cli_reports_overflow_on_stderr_and_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["simulate", "--mask", "complete", "--tokens", "8", "--d", "4", "--value", "scaled-identity",
                 "--value-scale", "1000", "--dtype", "float32", "--layers", "100", "--samples", "2", "--json",
                 "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert code == 0
    summary = json.loads(captured.out)
    assert summary["state"] == "overflow" and summary["final_mu_rel"] is None
    warned = [line for line in captured.err.splitlines() if "non-finite" in line]
    assert len(warned) == 1 and f"layer {summary['nonfinite_layer']}" in warned[0]


def test_cli_never_overwrites_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--tokens", "8", "--d", "4", "--layers", "2", "--no-progress",
            "--out", str(tmp_path / "run")]
    assert main(args) == 0
    before = (tmp_path / "run" / "metrics.csv").read_text()
    capsys.readouterr()
    assert main([*args, "--seed", "5"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (tmp_path / "run" / "metrics.csv").read_text() == before
    assert main([*args, "--seed", "5", "--overwrite"]) == 0
    assert (tmp_path / "run" / "metrics.csv").read_text() != before


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--value", "identity", "--value-scale", "5"], "--value-scale does not apply"),
     (["--seed", "-1"], "--seed must be >= 0"), (["--threads", "1000"], "--threads must be between 1 and"),
     (["--tokens", "2000000000"], "needs about"), (["--tokens", "99999999999999999999"], "needs about"),
     (["--layers", "2.5"], "--layers '2.5' is not a valid integer"),
     (["--mode", "attn+ln"], "unknown mode 'attn+ln'"),
     (["--kernel", "band", "--mask", "block:size=4"], "needs a band mask")],
)
def test_cli_refusals_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert main(["simulate", *args, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "x").exists()
