"""Collapse telemetry of a model while it trains: per layer, every k steps, reduced inside forward hooks.

A probe runs the model's own forward once on a batch, in eval mode under ``torch.no_grad``, with a
forward hook on each layer module (:mod:`rankcollapse.monitor.layers`); each hook reduces its
hidden state ``X(t) [b, n, d]`` to a few numbers at once and drops it, so a probe never holds more
than one layer's state (with ``diagnostics``: and that layer's attention weights ``[b, h, n, n]``).
Afterwards every module's training flag is as it was and every hook is removed, also when the
probe fails.

The numbers are those of ``rankcollapse analyze`` on the same weights and inputs: per metric of
:data:`rankcollapse.metrics.METRIC_NAMES`, the mean over the batch's samples of
:func:`rankcollapse.models.samples.sample_values` (``mu``, ``mu_rel``, ``at_floor``: ``mu`` at the
precision floor ``FLOOR_FACTOR eps ||X||_F`` of :mod:`rankcollapse.core.precision`, ranks, mean
``|cos|``, ...); with ``diagnostics``, the columns of
:func:`rankcollapse.models.diagnose.diagnostic_row` (attention entropy, first-token attention, sink
rate, first-token norm, largest activation, massive-activation ratio) from the attention weights of
the layer's parts (:func:`rankcollapse.models.parts.attention`, families we dissect), or from the
layers themselves where every layer module declares them (:data:`OWN_ATTENTION`: a plain model such as
:class:`rankcollapse.monitor.trajectory.ByteLM`).

:class:`Monitor` is the API: ``measure(model, batch)`` on demand (raises RankCollapseError on bad
input), ``step(model, batch)`` in a training loop (every ``every`` calls; a failure is one warning
line and training goes on), ``to_frame()``, ``close()`` (or ``with Monitor(...) as monitor:``).
The Trainer integration is :class:`rankcollapse.monitor.callback.MonitorCallback`.

Precision: ``at_floor`` is ``mu`` at the floor of each hidden state's own dtype (``32 eps``: 0.25 for
bfloat16, 0.031 for float16, 3.8e-6 for float32); a half-precision state is reduced in float32.
:attr:`Monitor.dtype` names the coarsest dtype of the first probe's states, ``config.json`` records it
(``dtype``, with the parameters' ``model_dtype``) and :func:`rankcollapse.monitor.plot.plot_monitor`
draws its floor. Under ``torch.autocast`` a float32 model's residual stream usually stays float32 (its
matrix products run in bfloat16): such states are measured against float32's floor; cast the model
(``model.bfloat16()``) to measure bfloat16 states.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
from rankcollapse.edge.inputs import error_line
from rankcollapse.edge.messages import warning
from rankcollapse.edge.validate import check_threads, quote
from rankcollapse.metrics import METRIC_NAMES, SINK_THRESHOLD, metric_names
from rankcollapse.monitor.layers import Layers, find_layers
from rankcollapse.monitor.outputs import COLUMNS, Outputs

#: What a probe measures by default: the paper's measure with its floor, two ranks and the anisotropy
#: (the SVD-based ``num_rank`` and ``effective_rank`` share one SVD per sample).
DEFAULT_METRICS: tuple[str, ...] = ("mu", "mu_rel", "at_floor", "num_rank", "effective_rank", "mean_abs_cos")
#: The ``diagnostics`` a probe adds (:func:`rankcollapse.models.diagnose.diagnostic_row`, means over
#: samples and heads); the first four need attention weights, so row 0 has only the last three.
DIAGNOSTICS: tuple[str, ...] = (
    "attention_entropy",
    "normalized_attention_entropy",
    "first_token_attention",
    "sink_rate",
    "first_token_norm",
    "top_activation",
    "massive_ratio",
)
_ATTENTION = DIAGNOSTICS[:4]
#: What a layer module of a plain model defines for the diagnostics: ``attention_weights(x)``, the
#: weights ``[b, h, n, n]`` it applies to its input ``x [b, n, d]``; ``attention_mask(n)``, its mask
#: bool ``[n, n]``; ``n_heads``.
OWN_ATTENTION: tuple[str, ...] = ("attention_weights", "attention_mask", "n_heads")
#: Keys of a Hugging Face batch the base model reads (``labels`` and the like are left out).
MODEL_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


@dataclass
class MonitorConfig:
    """What a :class:`Monitor` measures, how often, and where it writes.

    ``every``: k, a probe every k training steps (``step`` calls, or the Trainer's global step).
    ``metrics``: names of :data:`rankcollapse.metrics.METRIC_NAMES` (``"mu,mu_rel"`` or a tuple;
    ``"all"``: every one); default :data:`DEFAULT_METRICS`. ``diagnostics``: add :data:`DIAGNOSTICS`
    (sink rate with threshold ``sink_threshold``). ``at_start``: the Trainer callback also probes
    at the start of training (step 0: the initialisation, before any update). ``layers``: the
    attribute path of the layer list of a model no family entry describes (None: found).
    ``out``: a folder for ``metrics.csv`` (appended as it goes) and ``metrics.parquet``
    (:mod:`rankcollapse.monitor.outputs`); None: in memory only. ``metric_threads``: torch threads
    while the metrics run (as :class:`~rankcollapse.models.analyze.AnalyzeConfig`).
    """

    every: int = 10
    metrics: tuple[str, ...] | str | None = DEFAULT_METRICS
    diagnostics: bool = False
    sink_threshold: float = SINK_THRESHOLD
    at_start: bool = True
    layers: str | None = None
    out: str | None = None
    metric_threads: int | None = 1

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise RankCollapseError(
                f"every={quote(self.every)} is invalid; allowed: a whole number >= 1 (steps)"
            )
        self.metrics = metric_names(self.metrics) or METRIC_NAMES
        if not isinstance(self.diagnostics, bool) or not isinstance(self.at_start, bool):
            raise RankCollapseTypeError("diagnostics and at_start must be True or False")
        if (
            isinstance(self.sink_threshold, bool)
            or not isinstance(self.sink_threshold, int | float)
            or not 0.0 <= self.sink_threshold <= 1.0
        ):
            raise RankCollapseError(
                f"sink_threshold={quote(self.sink_threshold)} is invalid; allowed: a number in [0, 1]"
            )
        if self.sink_threshold != SINK_THRESHOLD and not self.diagnostics:
            raise RankCollapseError("sink_threshold applies only with diagnostics=True")
        if self.layers is not None and (not isinstance(self.layers, str) or not self.layers.strip()):
            raise RankCollapseError(
                f"layers={quote(self.layers)} is invalid; allowed: an attribute path such as 'transformer.h'"
            )
        if self.metric_threads is not None:
            self.metric_threads = check_threads("metric_threads", self.metric_threads)
        if self.out is not None:
            from rankcollapse.edge.folder import check_output_folder

            self.out = str(check_output_folder(self.out, "monitor", option="out", keep_interrupted=True))


@dataclass
class _Probe:
    """One probe's state, shared by its hooks: the next row ``t``, the rows made, the attention
    weights of the layer running (diagnostics), and what the attention needs (parts, masks, positions)."""

    step: int
    layers: Layers
    lengths: Tensor | None
    padding: Tensor | None  # bool [b, n]: real tokens (diagnostics with right padding)
    t: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    attn: Tensor | None = None
    parts: list[Any] = field(default_factory=list)
    masks: list[Tensor] = field(default_factory=list)  # bool [n, n] per applied layer
    positions: Any = None
    pos: Any = None  # the positions of this probe's tokens, computed at the first layer
    heads: int = 0
    own: bool = False  # the layers give their own attention weights (OWN_ATTENTION)
    dtypes: list[str] = field(default_factory=list)  # the dtypes of the hidden states measured
    partial: list[tuple[int, int, int]] = field(default_factory=list)  # (row, finite samples, samples)


def _dtype_label(dtype: torch.dtype) -> str:
    """A dtype's name (:data:`~rankcollapse.core.precision.ALL_DTYPE_NAMES`), or torch's spelling of
    another."""
    from rankcollapse.core.precision import ALL_DTYPE_NAMES, dtype_name

    own = str(dtype).removeprefix("torch.")
    return dtype_name(dtype, half=True) if own in ALL_DTYPE_NAMES else own


def coarsest(dtypes: list[str]) -> str | None:
    """The dtype of ``dtypes`` with the largest eps (the highest precision floor; None for none): the one a
    probe is labelled by when its states differ (float32 embeddings under bfloat16 layers)."""
    from rankcollapse.core.precision import ALL_DTYPE_NAMES, eps

    known = [d for d in dtypes if d in ALL_DTYPE_NAMES]
    return max(known, key=eps) if known else (dtypes[0] if dtypes else None)


def _first_tensor(value: Any) -> Any:
    return value[0] if isinstance(value, tuple | list) and value else value


def _is_hf(model: nn.Module) -> bool:
    return hasattr(model, "config") and hasattr(getattr(model, "config", None), "model_type")


class Monitor:
    """Collapse telemetry inside any training loop (module docstring).

    >>> monitor = Monitor(every=10, out="runs/telemetry")
    >>> for batch in loader:
    ...     loss = model(**batch).loss; loss.backward(); opt.step(); opt.zero_grad()
    ...     monitor.step(model, batch)
    >>> monitor.close(); monitor.to_frame()

    ``config``: a :class:`MonitorConfig`, or its fields as keywords. ``probe``: a fixed batch every
    probe measures (held-out text: the same inputs at every step, so a curve over steps is the
    model changing, not the data); None: each probe measures the batch it is given. A batch is token
    ids ``[b, n]``, a mapping (``input_ids``, ``attention_mask`` with right padding, ...; a Hugging
    Face model reads :data:`MODEL_INPUTS` only), or a tuple whose first item is one (``(inputs,
    targets)``); it is moved to the model's device. ``tensorboard``, ``wandb``: optional scalar sinks
    (:mod:`rankcollapse.monitor.outputs`; never required).

    ``rows``: every row so far (:data:`rankcollapse.monitor.outputs.COLUMNS`); ``failures``: every
    failure reported (one line each, also on stderr, each distinct message once). ``dtype``: the dtype
    of the hidden states the first probe measured (``bfloat16``, ``float16``, ``float32``, ``float64``;
    None before it), whose precision floor ``at_floor`` reads; ``model_dtype``: the model's parameters'.
    """

    def __init__(
        self,
        config: MonitorConfig | None = None,
        *,
        probe: Any = None,
        tensorboard: Any = None,
        wandb: Any = None,
        **fields: Any,
    ) -> None:
        if config is not None and fields:
            raise RankCollapseError(f"give a MonitorConfig or its fields ({', '.join(fields)}), not both")
        if config is not None and not isinstance(config, MonitorConfig):
            raise RankCollapseTypeError(f"config must be a MonitorConfig, got {type(config).__name__}")
        try:
            self.config = config if config is not None else MonitorConfig(**fields)
        except TypeError as err:
            raise RankCollapseTypeError(f"Monitor: {error_line(err)}") from None
        self.probe = None if probe is None else _check_batch(probe)
        self.rows: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self._shown: set[str] = set()
        self._count = 0
        self._probed: set[int] = set()  # the step labels with rows: a label is never given twice
        self.closed = False  # close() or the end of a with block: a Monitor is one training
        self.dtype: str | None = None
        self.model_dtype: str | None = None
        self._outputs = Outputs(self.config.out, asdict(self.config), self._warn, tensorboard, wandb)

    # ---- reporting ---------------------------------------------------------------------------------
    def _warn(self, message: str) -> None:
        """One line on stderr (each distinct message once) and in :attr:`failures`."""
        self.failures.append(message)
        key = message.split(": ", 1)[-1] if message.startswith("step ") else message
        if key not in self._shown:
            self._shown.add(key)
            warning(f"monitor: {message}")

    # ---- the loop API ------------------------------------------------------------------------------
    def step(self, model: nn.Module, batch: Any = None, *, step: int | None = None) -> list[dict[str, Any]]:
        """Count one training step (or set the count to ``step``, e.g. the optimiser's global step) and
        probe when the count is a multiple of ``every``: on :attr:`probe`, else on ``batch``. Never
        raises for the probe's sake: a failure is one warning line (:attr:`failures`) and ``[]``."""
        self._count = self._count + 1 if step is None else _check_step(step)
        if self._count % self.config.every:
            return []
        return self.safe_measure(model, batch, step=self._count)

    def safe_measure(self, model: nn.Module, batch: Any = None, *, step: int) -> list[dict[str, Any]]:
        """:meth:`measure`, with any failure (an Exception: bad input, memory, a broken model) reported
        in one line instead of raised; returns the rows made (``[]`` on a failure)."""
        try:
            return self.measure(model, batch, step=step)
        except Exception as err:  # the training must never stop for its telemetry
            self._warn(f"step {step}: probe skipped ({error_line(err)})")
            return []

    def measure(
        self, model: nn.Module, batch: Any = None, *, step: int | None = None
    ) -> list[dict[str, Any]]:
        """Probe ``model`` now on :attr:`probe` (else ``batch``) and return its rows (also appended to
        :attr:`rows` and the sinks). ``step`` labels the rows (default: the count of :meth:`step`).
        RankCollapseError (one line) for a model without layers, a batch it cannot read, a probe that
        does not fit in memory."""
        step = self._count if step is None else _check_step(step)
        if self.closed:
            where = f" (its rows are in {self.config.out})" if self.config.out is not None else ""
            raise RankCollapseError(f"this Monitor is closed: its training ended{where}; allowed: a new "
                                    "Monitor (or MonitorCallback, another out=) for another training")
        if step in self._probed:
            raise RankCollapseError(f"step {step} was probed already by this Monitor; allowed: one probe "
                                    "per step label (measure(..., step=N); a second trainer.train() restarts "
                                    "at step 0: give it a new MonitorCallback)")
        given = self.probe if self.probe is not None else batch
        if given is None:
            raise RankCollapseError("no batch to measure; pass a batch or give the Monitor a probe= batch")
        _check_model(model)
        layers = find_layers(model, self.config.layers)
        args, kwargs, ids_shape, padding = _model_inputs(layers.call, _check_batch(given), _is_hf(model))
        _check_ids(model, kwargs.get("input_ids", args[0] if args else None))
        _check_probe_memory(model, ids_shape)
        state = _Probe(
            step,
            layers,
            None if padding is None else padding.sum(1).cpu(),
            padding if padding is not None and not bool(padding.all()) else None,
        )
        if self.config.diagnostics:
            _attention_parts(model, layers, state, ids_shape[1])
        rows = _run_probe(model, layers, args, kwargs, state, self)
        self._label(model, coarsest(state.dtypes), step)
        if state.partial:
            first, last = state.partial[0][0], state.partial[-1][0]
            fewest = min(state.partial, key=lambda p: p[1])
            where = f"row {first}" if first == last else f"rows {first}..{last} ({len(state.partial)} rows)"
            self._warn(f"step {step}: {where}: only {fewest[1]} of {fewest[2]} probe samples finite "
                       "(overflow); the values there are means over the finite samples only")
        self.rows.extend(rows)
        self._probed.add(step)
        self._outputs.write(rows, step)
        return rows

    def _label(self, model: nn.Module, dtype: str | None, step: int) -> None:
        """Record the dtype of the hidden states a probe measured (and the model's parameters') before its
        rows are written: the first probe's goes to ``config.json``; a later probe in another dtype (the
        model cast, or autocast switched) is one warning line, its rows at their own dtype's floor."""
        first = next(iter(model.parameters()), None)
        own = None if first is None else _dtype_label(first.dtype)
        if self.dtype is None:
            self.dtype, self.model_dtype = dtype, own
            self._outputs.record.update({"dtype": dtype, "model_dtype": own})
        elif dtype is not None and dtype != self.dtype:
            self._warn(f"step {step}: the hidden states are {dtype}, the first probe's {self.dtype}; "
                       "at_floor reads each state's own dtype, config.json and the figure's floor line "
                       "the first's")

    # ---- the hooks' reductions -----------------------------------------------------------------------
    def _reduce(self, state: _Probe, x: Any, attn: Tensor | None) -> None:
        """Row ``state.t`` of the probe from its hidden state ``x [b, n, d]`` (and its layer's attention)."""
        from rankcollapse.models.samples import sample_values, summarize_samples
        from rankcollapse.models.stream import hidden_state_name

        t = state.t
        if not isinstance(x, Tensor) or x.ndim != 3 or not x.is_floating_point():
            what = f"a tensor of shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
            raise RankCollapseError(
                f"layer {max(t - 1, 0)} of {type(state.layers.call).__name__} gives {what}, "
                "not hidden states [b, n, d]; allowed: layers='path' naming the transformer "
                "blocks"
            )
        x = x.detach()
        if _dtype_label(x.dtype) not in state.dtypes:
            state.dtypes.append(_dtype_label(x.dtype))
        base = {
            "step": state.step,
            "layer": t,
            "hidden_state": hidden_state_name(t),
            "hook": state.layers.hook(t),
        }
        ok, values = sample_values(x, self.config.metrics, self.config.metric_threads, state.lengths)
        finite, stats = summarize_samples(ok, values)
        if finite < 1.0:  # the row's means cover the finite samples only: said, with the count
            state.partial.append((t, int(ok.sum()), int(ok.numel())))
        state.rows += [{**base, "metric": name, "value": stats[name]} for name in self.config.metrics]
        if self.config.diagnostics:
            from rankcollapse.models.diagnose import diagnostic_row, diagnostic_values

            mask = state.masks[t - 1] if t > 0 and state.masks else None
            per = diagnostic_values(x, attn, mask, self.config.sink_threshold, state.lengths)
            row = diagnostic_row(per, self.config.sink_threshold, state.heads)
            names = DIAGNOSTICS if attn is not None else DIAGNOSTICS[len(_ATTENTION) :]
            state.rows += [{**base, "metric": name, "value": row[name]} for name in names]

    # ---- results -----------------------------------------------------------------------------------
    def to_frame(self) -> Any:
        """Every row so far as a pandas DataFrame with :data:`COLUMNS` (tidy: one value per row)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(COLUMNS))

    def close(self) -> list[Path]:
        """Publish ``metrics.csv`` (and ``metrics.parquet``) in ``out`` and flush the scalar sinks;
        returns the files written (none when the publishing failed: one warning line, the rows kept in
        ``metrics.partial.csv`` and in memory)."""
        self.closed = True
        return self._outputs.close(self.to_frame)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        """A block that raised (an exception, Ctrl-C) is an interrupted training: its rows stay in
        ``metrics.partial.csv`` (as when the Trainer's callback never sees ``on_train_end``), nothing is
        published as complete; a block that finished publishes (:meth:`close`)."""
        if kind is None:
            self.close()
        else:
            self.closed = True
            self._outputs.close(self.to_frame, interrupted=True)

    def __repr__(self) -> str:
        steps = sorted({r["step"] for r in self.rows})
        span = f"steps {steps[0]}..{steps[-1]}" if steps else "no probe yet"
        return (
            f"Monitor(every={self.config.every}, metrics {', '.join(self.config.metrics)}, {len(steps)} "
            f"probes ({span}), {len(self.failures)} failures; .to_frame() for the table)"
        )


def _check_step(step: Any) -> int:
    """A step label: a whole number >= 0 (a float that is one, e.g. ``3.0``, is taken); one line else."""
    import numbers

    if isinstance(step, numbers.Real) and not isinstance(step, bool) and float(step).is_integer():
        if step >= 0:
            return int(step)
    raise RankCollapseError(f"step={quote(step)} is invalid; allowed: a whole number >= 0 (the training "
                            "step)")


def _check_model(model: Any) -> None:
    """The model a probe can run: an ``nn.Module`` with its weights in memory, reading token ids (one
    line for a model on the meta device, and for a vision model: images are not monitored)."""
    if not isinstance(model, nn.Module):
        raise RankCollapseTypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    first = next(iter(model.parameters()), None)
    if first is not None and first.device.type == "meta":
        raise RankCollapseError(
            f"{type(model).__name__} is on the meta device (no weights in memory); allowed: a model "
            "whose weights are loaded (model.to_empty(...) and load its state, or from_pretrained)"
        )
    cfg = getattr(model, "config", None)
    if _is_hf(model) and (getattr(cfg, "image_size", None) or getattr(cfg, "vision_config", None)):
        raise RankCollapseError(
            f"{type(model).__name__} reads images; images are not monitored (a probe is token ids [b, n] of "
            "a text model; rankcollapse analyze measures a vision encoder)"
        )


def _check_ids(model: nn.Module, ids: Any) -> None:
    """The probe's token ids through the one check of ids (``edge.validate.check_token_ids``: integers,
    in the vocabulary, within the positions) where the model reads ids: a Hugging Face model, or one
    whose input embedding says its vocabulary. A plain model fed other inputs is not checked."""
    from rankcollapse.edge.validate import check_token_ids

    get = getattr(model, "get_input_embeddings", None)
    try:
        embedding = get() if callable(get) else None
    except (NotImplementedError, AttributeError):
        embedding = None
    vocab = getattr(embedding, "num_embeddings", None)
    if not isinstance(ids, Tensor) or (not _is_hf(model) and not isinstance(vocab, int)):
        return
    cfg = getattr(model, "config", None)
    positions = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    if getattr(cfg, "position_embedding_type", "absolute") != "absolute" or not isinstance(positions, int):
        positions = None
    check_token_ids("the probe batch", ids, vocab if isinstance(vocab, int) else None, positions)


def _check_batch(batch: Any) -> Any:
    """A batch as a probe reads it (the :class:`Monitor` docstring); RankCollapseError (one line) else."""
    if isinstance(batch, tuple | list):
        if not batch:
            raise RankCollapseError(
                "batch is an empty tuple; allowed: token ids [b, n], a mapping, or (inputs, ...)"
            )
        if isinstance(batch, list) and (isinstance(batch[0], Mapping) or not isinstance(batch[0], Tensor)):
            raise RankCollapseError(
                f"batch is a list of {len(batch)} examples ({type(batch[0]).__name__}); allowed: a collated "
                "batch (token ids [b, n], or the mapping a data collator returns)"
            )
        batch = batch[0]
    if isinstance(batch, Tensor):
        if batch.ndim < 2 or batch.shape[0] < 1 or batch.shape[1] < 2:
            raise RankCollapseError(
                f"batch has shape {tuple(batch.shape)}; allowed: [b, n] token ids (or "
                "[b, n, ...] inputs) with b >= 1 and n >= 2 tokens"
            )
        return batch
    if isinstance(batch, Mapping):
        if not batch:
            raise RankCollapseError("batch is an empty mapping; allowed: one with input_ids [b, n]")
        return dict(batch)
    raise RankCollapseTypeError(
        f"batch must be token ids [b, n], a mapping or a tuple, got {type(batch).__name__}"
    )


def _model_inputs(
    call: nn.Module, batch: Any, hf: bool
) -> tuple[tuple[Any, ...], dict[str, Any], tuple[int, int], Tensor | None]:
    """``(args, kwargs, (b, n), padding)`` to run ``call`` on ``batch``, on the model's device;
    ``padding``: bool [b, n] of real tokens from a right-padded ``attention_mask`` (None: none)."""
    first = next(iter(call.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")

    def moved(v: Any) -> Any:
        return v.to(device) if isinstance(v, Tensor) else v

    if isinstance(batch, Tensor):
        args, kwargs = ((), {"input_ids": moved(batch)}) if hf else ((moved(batch),), {})
        main = batch
    else:
        kwargs = {k: moved(v) for k, v in batch.items() if not hf or k in MODEL_INPUTS}
        main = kwargs.get("input_ids", kwargs.get("inputs_embeds"))
        if main is None:
            main = next((v for v in kwargs.values() if isinstance(v, Tensor) and v.ndim >= 2), None)
        if main is None:
            raise RankCollapseError(
                f"batch has no input_ids (keys: {', '.join(map(str, batch))[:120]}); "
                "allowed: a mapping with input_ids [b, n]"
            )
        args = ()
    padding = None
    mask = kwargs.get("attention_mask")
    if isinstance(mask, Tensor):
        if mask.shape != main.shape[:2]:
            raise RankCollapseError(
                f"attention_mask has shape {tuple(mask.shape)}, not that of the ids {tuple(main.shape[:2])}"
            )
        real = mask.bool()
        if not bool(real[:, 0].all()) or bool((real[:, 1:] & ~real[:, :-1]).any()):
            raise RankCollapseError(
                "attention_mask must be right padding (1s then 0s, token 0 real in every "
                "sample); allowed: a right-padded batch"
            )
        padding = real
    return args, kwargs, (int(main.shape[0]), int(main.shape[1])), padding


def _check_probe_memory(model: nn.Module, shape: tuple[int, int]) -> None:
    """Refuse, before it runs, a probe whose forward would not fit (the estimate of
    :func:`rankcollapse.models.analyze.memory.forward_bytes`; a model without a config is not estimated)."""
    from rankcollapse.core.execution import device_memory
    from rankcollapse.edge.validate import check_memory
    from rankcollapse.models.analyze.memory import forward_bytes

    cfg = getattr(model, "config", None)
    width = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", None)
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None)
    first = next(iter(model.parameters()), None)
    if not isinstance(width, int) or not isinstance(heads, int) or first is None:
        return
    b, n = shape
    need = forward_bytes(b, n, width, heads, first.element_size())
    free = device_memory(first.device) if first.device.type == "cuda" else None
    check_memory(f"monitor probe of {b} x {n} tokens", need, free, allowed="a smaller probe batch")


def _attention_parts(model: nn.Module, layers: Layers, state: _Probe, n: int) -> None:
    """What the diagnostics' attention weights need: each applied layer's parts and mask (a
    dissected family only; the parts are views of the live weights, taken at each probe)."""
    from rankcollapse.masks import parse_mask
    from rankcollapse.models.families import DISSECTORS
    from rankcollapse.models.loading import base_model, own_schedule

    fam = layers.family
    if fam is None and all(all(hasattr(m, k) for k in OWN_ATTENTION) for m in layers.modules):
        if state.padding is not None:
            raise RankCollapseError(
                "diagnostics of a model's own attention_weights need an unpadded batch; allowed: "
                "excerpts of one length"
            )
        state.own, state.parts = True, list(layers.modules)
        state.heads = int(layers.modules[0].n_heads)
        state.masks = [m.attention_mask(n) for m in layers.modules]
        return
    if fam is None:
        raise RankCollapseError(
            f"diagnostics need the attention weights of a family we dissect or layers that define "
            f"{', '.join(OWN_ATTENTION)}; {type(model).__name__} has neither (diagnostics=False measures "
            "the rest)"
        )
    base = base_model(model)
    try:
        dissected = DISSECTORS[fam.model_type](base, True)
    except Exception as err:
        raise RankCollapseError(
            f"diagnostics: {type(model).__name__} cannot be dissected ({error_line(err)}); "
            "diagnostics=False measures the rest"
        ) from None
    state.parts = dissected.layers
    state.heads = dissected.layers[0].n_heads
    depth = len(dissected.layers)
    sched = own_schedule(getattr(base, fam.stack).config if fam.stack else base.config, depth)
    kind = "causal" if dissected.is_decoder else "complete"
    state.masks = [
        (sched.period[i % len(sched.period)] if sched is not None else parse_mask(kind)).dense(n)
        for i in range(depth)
    ]
    state.positions = dissected.positions


def _layer_attention(state: _Probe, x: Tensor) -> Tensor:
    """The attention weights ``[b, h, n, n]`` of the layer about to run on ``x [b, n, d]``, from its parts
    (the layer's own norm before attention where it has one, its own mask, right padding masked)."""
    from rankcollapse.models.parts import NO_POSITIONS, attention

    i = state.t % len(state.parts)
    if state.own:
        return state.parts[i].attention_weights(x)
    parts = state.parts[i]
    mask = state.masks[i].to(x.device)
    if state.padding is not None:
        eye = torch.eye(x.shape[1], dtype=torch.bool, device=x.device)
        mask = (mask & state.padding[:, None, None, :]) | eye
    if state.pos is None:
        state.pos = state.positions(x) if state.positions is not None else NO_POSITIONS
    z = x if parts.norm_placement == "post" else parts.norm_attn(x)
    record: dict[str, Tensor] = {}
    attention(parts, z, None if bool(mask.all()) else mask, None, state.pos, None, record)
    return record["attn"]


def _forward_failed(layers: Layers, err: Exception) -> RankCollapseError:
    """The one line of a forward that raised on the probe batch (the model's words quoted, one line)."""
    return RankCollapseError(
        f"the forward of {type(layers.call).__name__} failed on the probe batch ({error_line(err)})"
    )


def _run_probe(
    model: nn.Module,
    layers: Layers,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    state: _Probe,
    monitor: Monitor,
) -> list[dict[str, Any]]:
    """Run the forward with the hooks in place, in eval mode under ``torch.no_grad``; hooks removed and
    training flags restored afterwards, also on an error."""
    from rankcollapse.models.inputs import borrowed

    diagnostics = monitor.config.diagnostics

    def before(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        x = args[0] if args else kwargs.get("hidden_states")
        if state.t == 0 and not state.rows:
            monitor._reduce(state, x, None)
        if diagnostics and isinstance(x, Tensor):
            state.attn = _layer_attention(state, x.detach())

    def after(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        state.t += 1
        attn, state.attn = state.attn, None
        monitor._reduce(state, _first_tensor(output), attn)

    handles = []
    try:
        for module in dict.fromkeys(layers.modules):  # a shared layer (ALBERT) is hooked once
            handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
            handles.append(module.register_forward_hook(after))
        with borrowed(model), torch.no_grad():
            try:
                layers.call(*args, **kwargs)
            except torch.OutOfMemoryError as err:
                raise RankCollapseError(
                    f"monitor probe does not fit in memory ({error_line(err)}); "
                    "allowed: a smaller probe batch"
                ) from None
            except RuntimeError as err:
                text = str(err)
                if "can't allocate memory" in text or "out of memory" in text:
                    raise RankCollapseError(
                        f"monitor probe does not fit in memory ({error_line(err)}); allowed: "
                        "a smaller probe batch"
                    ) from None
                raise _forward_failed(layers, err) from None
            except RankCollapseError:
                raise
            except Exception as err:  # the model's own error on this batch: one line, never its traceback
                raise _forward_failed(layers, err) from None
    finally:
        for handle in handles:
            handle.remove()
        state.attn = None
    if state.t == 0:
        raise RankCollapseError(
            f"no layer of {type(layers.call).__name__} ran during the probe ({layers.found}); "
            "allowed: layers='path' naming the blocks its forward calls"
        )
    return state.rows


__all__ = [
    "COLUMNS",
    "DEFAULT_METRICS",
    "DIAGNOSTICS",
    "MODEL_INPUTS",
    "OWN_ATTENTION",
    "Monitor",
    "MonitorConfig",
]
