"""``reproduce`` takes one :class:`ReproduceConfig`, checked on construction (one line per bad option,
nothing written); the keyword call of the earlier release is refused (retired in 0.2.0)."""

from __future__ import annotations

import pytest

from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.pipeline import ReproduceConfig, reproduce

ONLY = ["theorem2.hemisphere"]  # a few small simulations


@pytest.mark.parametrize(
    ("options", "line"),
    [
        ({"out_dir": " "}, "--out must name a folder, got ''"),
        ({"profile": ""}, "--profile must name a profile"),
        ({"executor": "slurm"}, "unknown executor 'slurm'; allowed: local, dask"),
        ({"scheduler": "tcp://1.2.3.4:8786"}, "--scheduler applies only with --executor dask"),
        ({"executor": "dask"}, "--executor dask needs --scheduler"),
        ({"workers": 0}, "--workers must be between 1 and"),
        ({"max_samples": 64}, "--max-samples applies only with --until-decided"),
        ({"until_decided": True, "budget_s": -1.0}, "--budget must be a positive number of seconds"),
        ({"batch_size": 0}, "batch"),
        ({"device": "tpu"}, "tpu"),
    ],
)
def test_a_bad_option_is_one_line_at_construction_and_nothing_is_written(tmp_path, options, line) -> None:
    options = {"out_dir": tmp_path / "out", **options}
    with pytest.raises(RankCollapseError, match=line) as err:
        ReproduceConfig(**options)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_the_config_holds_the_parsed_values() -> None:
    config = ReproduceConfig("results/x", profile="tiny", only=("fig2",), device="cpu", batch_size=2)
    assert str(config.out_dir) == "results/x" and config.only == ["fig2"]
    assert config.execution == {"device": "cpu", "batch_size": 2}
    assert ReproduceConfig("results/x").execution == {}  # only the settings given


def test_the_config_call_runs_and_the_retired_keyword_call_is_refused_in_one_line(tmp_path) -> None:
    """0.2.0 retired ``reproduce(out_dir, profile=..., ...)``: a folder where the config goes is one line
    naming the call to make (a TypeError, and a RankCollapseError for the CLI's exit 2); options beside
    a config are Python's own TypeError. Nothing is written either way."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'profile'"):
        reproduce(tmp_path / "old", profile="tiny", only=ONLY, workers=1, progress=False)
    with pytest.raises(RankCollapseTypeError) as info:
        reproduce(tmp_path / "old")
    assert str(info.value) == ("config must be a ReproduceConfig (reproduce(ReproduceConfig(out_dir, "
                               "profile=..., ...))), got pathlib.PosixPath")
    assert isinstance(info.value, TypeError) and isinstance(info.value, RankCollapseError)
    with pytest.raises(TypeError, match="unexpected keyword argument 'profile'"):
        reproduce(ReproduceConfig(tmp_path / "old"), profile="tiny")
    assert not (tmp_path / "old").exists()
    config = ReproduceConfig(tmp_path / "new", profile="tiny", only=ONLY, workers=1, progress=False)
    first = reproduce(config)
    assert first.sweep.failed == 0 and first.sweep.finished == first.sweep.total > 0
