"""The Hugging Face ``Trainer`` integration: a ``TrainerCallback`` that drives a :class:`Monitor`.

>>> trainer = Trainer(model=model, args=args, train_dataset=data,
...                   callbacks=[MonitorCallback(every=10, out="runs/telemetry")])

At the start of training (``at_start``: step 0 when training starts fresh) and at every global step
that is a multiple of ``every`` (after the optimiser step) it probes the model the Trainer hands
it. The probe batch is the monitor's ``probe``, else a fixed one: the first
``per_device_train_batch_size`` examples of the training set, collated by the training
dataloader's own collator (under a forked RNG, so a collator that draws, e.g. MLM masking, leaves
the training's random stream as it was; the sampler is never touched). At the end of training the
monitor is closed (``metrics.csv``, ``metrics.parquet``). A failure of the telemetry is one warning
line and training goes on. In multi-process training only the main process
(``state.is_world_process_zero``) probes and writes.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import TrainerCallback

from rankcollapse.edge.inputs import error_line
from rankcollapse.monitor.telemetry import Monitor


def first_examples(dataloader: Any, count: int) -> Any:
    """The first ``count`` examples of ``dataloader.dataset``, collated by ``dataloader.collate_fn``
    (the global RNG restored afterwards)."""
    dataset = dataloader.dataset
    size = len(dataset)
    if size == 0:
        raise ValueError("the training set is empty")
    examples = [dataset[i] for i in range(min(count, size))]
    with torch.random.fork_rng(devices=[]):
        return dataloader.collate_fn(examples)


class MonitorCallback(TrainerCallback):
    """``Trainer(..., callbacks=[MonitorCallback(monitor)])`` (module docstring). ``monitor``: a
    :class:`Monitor`, or its :class:`~rankcollapse.monitor.telemetry.MonitorConfig` fields as
    keywords (``every=10, out=...``); :attr:`monitor` holds it (``.to_frame()`` after training)."""

    def __init__(self, monitor: Monitor | None = None, **fields: Any) -> None:
        self.monitor = monitor if monitor is not None else Monitor(**fields)
        if monitor is not None and fields:
            from rankcollapse.edge.errors import RankCollapseError

            raise RankCollapseError(f"give a Monitor or its fields ({', '.join(fields)}), not both")
        self._batch: Any = None

    def on_train_begin(
        self,
        args: Any,
        state: Any,
        control: Any,
        model: Any = None,
        train_dataloader: Any = None,
        **kwargs: Any,
    ) -> None:
        if not getattr(state, "is_world_process_zero", True):
            return
        if self.monitor.closed:  # a second trainer.train(): its steps restart at 0, its rows would mix
            self.monitor._warn("this MonitorCallback's training ended (its monitor is closed); this "
                               "training is not monitored (allowed: a new MonitorCallback, another out=, per "
                               "trainer.train())")
            return
        if self.monitor.probe is None and train_dataloader is not None:
            try:
                self._batch = first_examples(train_dataloader, int(args.per_device_train_batch_size))
            except Exception as err:  # never stop training for the telemetry
                self.monitor._warn(f"no probe batch from the training set ({error_line(err)}); pass probe=")
        if self.monitor.config.at_start and model is not None:
            self.monitor.safe_measure(model, self._batch, step=int(state.global_step))

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if not getattr(state, "is_world_process_zero", True) or model is None or self.monitor.closed:
            return
        if state.global_step % self.monitor.config.every == 0:
            self.monitor.safe_measure(model, self._batch, step=int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if getattr(state, "is_world_process_zero", True) and not self.monitor.closed:
            self.monitor.close()
