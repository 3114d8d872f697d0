"""Per-sample values of a hidden state and the summary a row is made of.

:func:`sample_values` gives each sample's metric values (float64 [b], NaN for a non-finite sample);
:func:`summarize_samples` makes a row's statistics from them (mean, ``_min``, ``_max``, ``_std``);
:func:`measure` / :func:`measure_samples` do both. :func:`zero_samples` and :func:`status_of` give a
row's ``status``; :class:`LayerSamples` gathers one hidden state's values over a run's batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rankcollapse.models.diagnose import diagnostic_row, mean_defined

__all__ = ["LayerSamples", "measure", "measure_samples", "sample_values", "status_of", "summarize_samples",
           "zero_samples"]


def measure(x: Tensor, names: tuple[str, ...] | None = None,
            threads: int | None = None, lengths: Tensor | None = None) -> tuple[float, dict[str, float]]:
    """``(finite share, summary)`` of a hidden state x [b, n, d]: for each metric of
    :func:`rankcollapse.metrics.collapse_metrics`, its mean, ``_min``, ``_max`` over samples
    (:func:`rankcollapse.metrics.summarize`) and ``_std``, the sample standard deviation
    (``sqrt(sum (v - mean)^2 / (b - 1))``; NaN for one sample).

    Samples with a non-finite entry (overflow, e.g. ``attn+skip`` in float32 at depth) are left
    out of the metrics and counted in the finite share; with none finite every metric is NaN.
    ``lengths`` [b]: sample ``i`` is its first ``lengths[i]`` tokens (right padding left out of
    mu, ranks and cosines: each sample's metrics are those of its unpadded ``x[i, :lengths[i]]``).
    """
    finite, stats, _ = measure_samples(x, names, threads, lengths)
    return finite, stats


def measure_samples(x: Tensor, names: tuple[str, ...] | None = None, threads: int | None = None,
                    lengths: Tensor | None = None) -> tuple[float, dict[str, float], dict[str, Tensor]]:
    """:func:`measure` and the values it summarises: per metric, float64 [b], one per sample (NaN for
    a non-finite sample; ``metrics.per_sample_metrics``)."""
    ok, values = sample_values(x, names, threads, lengths)
    finite, stats = summarize_samples(ok, values)
    return finite, stats, values


def sample_values(x: Tensor, names: tuple[str, ...] | None = None, threads: int | None = None,
                  lengths: Tensor | None = None, cos_rows: int | None = None,
                  cos_seed: int = 0) -> tuple[Tensor, dict[str, Tensor]]:
    """Per sample of x [b, n, d] (wherever it lives): ``ok`` bool [b] (its hidden state is finite) and
    each metric's value, float64 [b] (NaN where not ok), both on the CPU. The values of several batches
    concatenated are those of one batch of all their samples; :func:`summarize_samples` summarises them.
    ``cos_rows``, ``cos_seed``: a sampled mean |cos| (``metrics.collapse_metrics``)."""
    from rankcollapse.metrics import METRIC_NAMES, per_sample_metrics

    wanted = tuple(names) if names else METRIC_NAMES
    before = torch.get_num_threads()
    if threads is not None and threads != before:
        torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            if lengths is None:
                lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.long)
            ok = torch.stack([torch.isfinite(x[i, : int(m)]).all() for i, m in enumerate(lengths)]).cpu()
            values = per_sample_metrics(x, wanted, lengths, cos_rows, cos_seed)  # NaN where not finite
            return _overflowed_metrics(ok, values, x, lengths), values
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _overflowed_metrics(ok: Tensor, values: dict[str, Tensor], x: Tensor, lengths: Tensor) -> Tensor:
    """``ok`` with every sample whose metrics overflowed its dtype taken out (and their values set NaN): a
    finite state so large that a measure's sums do not fit (float32 tokens near 1e37: ``mu`` inf,
    ``mu_rel`` inf / inf). Such a sample is an overflow like a non-finite state, never ``status ok``
    with an infinite ``mu``. (A zero or tiny state's ``mu_rel`` is 0/0, NaN: an underflow, kept.)"""
    bad = torch.zeros_like(ok)
    for v in values.values():
        bad |= torch.isinf(v)
    if "mu_rel" in values and bool(torch.isnan(values["mu_rel"][ok]).any()):
        # NaN: inf / inf (an overflow) or 0 / 0 (a zero state, or squares too small for the dtype: an
        # underflow); entries of magnitude >= 1 cannot underflow
        large = torch.stack([x[i, : int(m)].abs().amax() >= 1 for i, m in enumerate(lengths)]).cpu()
        bad |= torch.isnan(values["mu_rel"]) & large
    bad &= ok
    if not bool(bad.any()):
        return ok
    for v in values.values():
        v[bad] = math.nan
    return ok & ~bad


def summarize_samples(ok: Tensor, values: dict[str, Tensor]) -> tuple[float, dict[str, float]]:
    """``(finite share, summary)`` of per-sample values (:func:`sample_values`, of one batch or several
    concatenated): the share of ok samples, and over the ok ones each metric's mean, ``_min``, ``_max``
    (:func:`rankcollapse.metrics.summarize`) and ``_std`` (``sqrt(sum (v - mean)^2 / (b - 1))``; NaN
    for one sample)."""
    from rankcollapse.metrics import summarize

    with torch.inference_mode():
        finite = 1.0 if bool(ok.all()) else float(ok.to(torch.float64).mean())
        per = {k: v[ok] for k, v in values.items()}
        stats = summarize(per)
        for name, v in per.items():
            stats[f"{name}_std"] = float(v.std(correction=1)) if v.numel() > 1 else math.nan
    return finite, stats


def zero_samples(x: Tensor) -> Tensor:
    """bool [b] on the CPU: sample ``i`` of x [b, n, d] is exactly zero (its ``mu_rel`` is 0/0)."""
    with torch.inference_mode():
        return (x.flatten(1).abs().amax(dim=1) == 0).cpu()


def status_of(finite: float, zero: Tensor) -> str:
    """``overflow`` if some sample is non-finite (``finite < 1``), else ``underflow`` if some sample is
    exactly zero (``zero`` bool [b], :func:`zero_samples`; its ``mu_rel`` is then 0/0, undefined),
    else ``ok``."""
    if finite < 1.0:
        return "overflow"
    return "underflow" if bool(zero.any()) else "ok"


@dataclass
class LayerSamples:
    """What one row is made from: every batch's per-sample values of one hidden state, in sample order."""

    name: str = ""
    ok: list[Tensor] = field(default_factory=list)
    values: list[dict[str, Tensor]] = field(default_factory=list)
    zero: list[Tensor] = field(default_factory=list)
    docs: list[dict[str, Tensor]] = field(default_factory=list)
    diagnostics: list[dict[str, Tensor]] = field(default_factory=list)

    @staticmethod
    def _cat(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]} if parts else {}

    def row(self, t: int, n_layers: int, hook: str, threshold: float, n_heads: int | None
            ) -> tuple[dict[str, Any], dict[str, Tensor]]:
        """Row ``t`` and its per-sample metric values (all batches concatenated)."""
        values = self._cat(self.values)
        finite, stats = summarize_samples(torch.cat(self.ok), values)
        row = {"layer": t, "hidden_state": self.name, "model_layer": "" if t == 0 else (t - 1) % n_layers,
               "finite": finite, "status": status_of(finite, torch.cat(self.zero)), "hook": hook, **stats}
        row.update({k: mean_defined(v) for k, v in self._cat(self.docs).items()})
        if self.diagnostics:
            row.update(diagnostic_row(self._cat(self.diagnostics), threshold, n_heads))
        return row, values
