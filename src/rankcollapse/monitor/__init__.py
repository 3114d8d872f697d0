"""Collapse while it trains: per-layer telemetry inside any training loop (``docs/monitor.md``).

- ``telemetry``  :class:`Monitor`, :class:`MonitorConfig`: every k steps (or on demand) a probe runs
                 the model once in eval mode under ``torch.no_grad`` and forward hooks reduce each
                 layer's hidden state to ``mu``, ``mu_rel``, ``at_floor``, ranks, mean ``|cos|`` (and,
                 with ``diagnostics``, sink rate, first-token attention, attention entropy, the
                 massive-activation ratio) as ``rankcollapse analyze`` computes them
- ``layers``     :func:`find_layers`: the layer modules a probe hooks, and their TransformerLens names
- ``outputs``    tidy rows (``step, layer, hidden_state, hook, metric, value``) to a CSV appended as
                 it goes, Parquet, TensorBoard and wandb scalars (optional)
- ``callback``   :class:`MonitorCallback`, the ``transformers.TrainerCallback`` (imported on first use)
- ``plot``       :func:`plot_monitor`: metric x layer over steps
"""

from typing import Any

from rankcollapse.monitor.layers import Layers, find_layers
from rankcollapse.monitor.outputs import COLUMNS
from rankcollapse.monitor.telemetry import DEFAULT_METRICS, DIAGNOSTICS, Monitor, MonitorConfig

__all__ = [
    "COLUMNS",
    "DEFAULT_METRICS",
    "DIAGNOSTICS",
    "Layers",
    "Monitor",
    "MonitorCallback",
    "MonitorConfig",
    "find_layers",
    "plot_monitor",
]


def __getattr__(name: str) -> Any:
    """``MonitorCallback`` (imports transformers) and ``plot_monitor`` (matplotlib) on first use."""
    if name == "MonitorCallback":
        from rankcollapse.monitor.callback import MonitorCallback

        return MonitorCallback
    if name == "plot_monitor":
        from rankcollapse.monitor.plot import plot_monitor

        return plot_monitor
    raise AttributeError(f"module 'rankcollapse.monitor' has no attribute {name!r}")
