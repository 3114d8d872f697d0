"""One thread check (issue 39, resources; issue 43, one ``--threads`` check): every thread option is a whole
number between 1 and this machine's CPUs, refused in one line beyond (``--metric-threads 100000`` segfaulted,
``--threads 100000`` hung with a traceback storm, ``Monitor(metric_threads=100000)`` aborted the training
process). Each case was accepted before ``edge.validate.check_threads`` was applied to it."""

from __future__ import annotations

import os

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError

TOO_MANY = 100_000


@pytest.mark.parametrize("flag", ["--threads", "--metric-threads"])
def test_analyze_refuses_more_threads_than_cpus_in_one_line(flag, tmp_path, capsys):
    code = main(["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", flag, str(TOO_MANY),
                 "--out", str(tmp_path / "o"), "--no-progress", "--no-table"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"between 1 and {os.cpu_count()}" in err[0], err
    assert not (tmp_path / "o" / "metrics.csv").exists()


def test_every_python_config_with_threads_caps_them():
    from rankcollapse.equilibria.entry import EquilibriaConfig
    from rankcollapse.models import AnalyzeConfig
    from rankcollapse.monitor.telemetry import MonitorConfig
    from rankcollapse.monitor.trajectory import TrajectoryConfig

    for make in (lambda: AnalyzeConfig(model="tiny:bert", metric_threads=TOO_MANY),
                 lambda: MonitorConfig(metric_threads=TOO_MANY),
                 lambda: TrajectoryConfig(threads=TOO_MANY),
                 lambda: EquilibriaConfig(tokens=3, d=3, threads=TOO_MANY)):
        with pytest.raises(RankCollapseError, match=r"threads must be between 1 and \d+"):
            make()
    ok = AnalyzeConfig(model="tiny:bert", metric_threads=os.cpu_count())
    assert ok.metric_threads == os.cpu_count()
