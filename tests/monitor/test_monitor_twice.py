"""Issue 39: ``trainer.train()`` twice labelled two probes with one step (the second training's steps restart
at 0 and its rows joined the first's in ``Monitor.to_frame()``).

One rule in ``Monitor.measure``: a Monitor is one training (closed, it probes no more) and a step label is
given once. The callback of a second training says so in one warning and leaves the first's rows alone.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_monitor import ids_for, run_trainer, tiny_gpt2_lm

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.monitor import Monitor, MonitorCallback


def test_a_second_train_is_not_mixed_into_the_first(tmp_path, capsys):
    callback = MonitorCallback(every=2, out=str(tmp_path / "telemetry"))
    trainer, _, _ = run_trainer(tmp_path, callback, epochs=1)  # steps 0, 2
    first = callback.monitor.to_frame()
    written = (tmp_path / "telemetry" / "metrics.csv").read_bytes()
    trainer.train()  # its global step restarts at 0
    frame = callback.monitor.to_frame()
    assert frame.groupby("step").size().to_dict() == first.groupby("step").size().to_dict()
    assert frame.duplicated(["step", "layer", "metric", "hook"]).sum() == 0
    assert (tmp_path / "telemetry" / "metrics.csv").read_bytes() == written
    err = [line for line in capsys.readouterr().err.splitlines() if "monitor:" in line]
    assert len(err) == 1 and "new MonitorCallback" in err[0], err
    assert pd.read_csv(tmp_path / "telemetry" / "metrics.csv")["step"].value_counts().nunique() == 1


def test_a_step_label_is_given_once_and_a_closed_monitor_probes_no_more():
    model, ids = tiny_gpt2_lm(), ids_for(300)
    monitor = Monitor(every=1)
    monitor.measure(model, ids, step=3)
    with pytest.raises(RankCollapseError, match="step 3 was probed already"):
        monitor.measure(model, ids, step=3)
    assert monitor.safe_measure(model, ids, step=3) == [] and "probed already" in monitor.failures[-1]
    monitor.measure(model, ids, step=4)
    monitor.close()
    with pytest.raises(RankCollapseError, match="this Monitor is closed"):
        monitor.measure(model, ids, step=5)
    assert sorted({r["step"] for r in monitor.rows}) == [3, 4]
