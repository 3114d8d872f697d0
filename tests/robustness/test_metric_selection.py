"""``--metrics all,mu`` (issue 39, unclear): ``all`` among other names was "unknown" in the one parser of a
metric selection (``metrics.metric_names``); it is every metric, and the others named beside it."""

from __future__ import annotations

from rankcollapse.cli.main import main
from rankcollapse.metrics import METRIC_NAMES, metric_names


def test_all_among_other_names_is_every_metric():
    assert metric_names("all,mu") == METRIC_NAMES
    assert set(metric_names(("mu", "all"))) == set(METRIC_NAMES)


def test_simulate_metrics_all_and_a_name_runs_every_metric(tmp_path, capsys):
    code = main(["simulate", "--metrics", "all,mu", "--layers", "2", "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    header = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "mu" in header and "effective_rank" in header
