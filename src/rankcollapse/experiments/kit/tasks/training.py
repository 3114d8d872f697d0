"""A thin task adapter over ``rankcollapse.monitor.trajectory`` (ours): one small model trained from random
init under a block variant and a mask, probed every ``every`` steps; the rows the kit's step rules read
(``kit.rules.steps``), and the monitor's sink threshold a figure draws.

Names: the task reads its params as ``TrajectoryConfig`` calls them and names none of the table's stored
keys (``Task.names`` empty): ``steps`` are optimiser steps (not a depth), ``batch`` the excerpts of one step
(not the samples measured: those are the ``probe``'s), ``variant`` the monitor's block label
(``monitor.trajectory.VARIANTS``, each a simulator preset: its stored labels kept).
"""

from __future__ import annotations

from typing import Any

from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task, config_from
from rankcollapse.experiments.kit.rules.steps import KIND
from rankcollapse.metrics.diagnostics import SINK_THRESHOLD

__all__ = ["SINK_THRESHOLD", "STEP_UNIT_S", "TRAIN_TRAJECTORIES", "train_cost", "train_trajectories"]


def train_trajectories(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """One training run (``monitor.trajectory.train_trajectory`` on the config of ``params``) as rows:
    ``kind = trajectory`` (``step, layer, metric, value``, ``samples`` = the probe's excerpts) and
    ``kind = loss`` (``step, train_loss, probe_loss``). ``on_layer`` gets ``layers + 1`` ticks spread
    over the training (the engine's progress counts a run's layers)."""
    from rankcollapse.monitor.trajectory import TrajectoryConfig, train_trajectory

    config = config_from(TrajectoryConfig, params)
    ticks = [0]

    def progress(step: int) -> None:
        due = (config.layers + 1) * step // config.steps
        while ticks[0] < due:
            on_layer(ticks[0])
            ticks[0] += 1

    run = train_trajectory(config, on_probe=progress)
    frame = run.frame[["step", "layer", "metric", "value"]]
    rows = [{"kind": KIND, "samples": config.probe, **r} for r in frame.to_dict("records")]
    rows += [{"kind": "loss", **r} for r in run.loss.to_dict("records")]
    first, last = run.loss.iloc[0], run.loss.iloc[-1]
    summary = {
        "probe_loss_init": float(first["probe_loss"]),
        "probe_loss_final": float(last["probe_loss"]),
        "probes": len(run.loss),
        "monitor_failures": len(run.failures),
    }
    return RunOutput(rows, summary)


#: Seconds of one training step per (excerpt x token x layer) at d = 64 on one core (measured on this
#: project's 2-core machine under load; an estimate for ordering and the printed total only).
STEP_UNIT_S = 8.0e-6


def train_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one run: ``STEP_UNIT_S x batch x tokens x layers x max(1, d / 64)^2`` per step."""
    width = max(1.0, float(params.get("d", 64)) / 64.0) ** 2
    per = float(params.get("batch", 16)) * float(params.get("tokens", 64)) * float(params.get("layers", 4))
    return STEP_UNIT_S * per * width * float(params.get("steps", 300)) + 1.0


TRAIN_TRAJECTORIES = Task(train_trajectories, cost_s=train_cost, names=())
