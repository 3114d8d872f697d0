"""``reproduce`` takes one :class:`ReproduceConfig`, checked on construction (one line per bad option,
nothing written); the keyword call of the earlier release still works for one release, with one warning."""

from __future__ import annotations

import warnings

import pytest

from rankcollapse.edge.deprecation import RankCollapseDeprecation
from rankcollapse.edge.errors import RankCollapseError
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


def test_the_keyword_call_still_works_for_one_release_with_one_warning(tmp_path) -> None:
    config = ReproduceConfig(tmp_path, profile="tiny", only=ONLY, workers=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RankCollapseDeprecation)
        first = reproduce(config)  # the API: no warning
    assert first.sweep.failed == 0 and first.sweep.finished == first.sweep.total > 0
    old = r"reproduce\(out_dir, profile=\.\.\., \.\.\.\) is deprecated; use reproduce\(ReproduceConfig\("
    with pytest.warns(RankCollapseDeprecation, match=old) as caught:
        again = reproduce(tmp_path, profile="tiny", only=ONLY, workers=1, progress=False)
    assert len([w for w in caught if issubclass(w.category, RankCollapseDeprecation)]) == 1
    assert caught[0].filename == __file__  # points at the caller's line
    assert again.sweep.skipped == again.sweep.total == first.sweep.total  # the same runs: resumed
    assert [c.to_dict() for c in again.claims] == [c.to_dict() for c in first.claims]
    with pytest.warns(RankCollapseDeprecation), pytest.raises(RankCollapseError, match="unknown executor"):
        reproduce(tmp_path, executor="slurm")  # the old form is checked as the config is


def test_options_beside_a_config_are_refused() -> None:
    with pytest.raises(RankCollapseError, match="give profile in the ReproduceConfig, not beside it"):
        reproduce(ReproduceConfig("results/x"), profile="tiny")
