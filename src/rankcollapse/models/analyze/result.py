"""What an :func:`~rankcollapse.models.analyze.analyze` run returns and how it is written.

:class:`AnalyzeResult` (the rows, the per-sample values, the ids, the notes), :class:`AnalyzeRun` (a
result and what ``analyze_into`` wrote beside it), :func:`model_info` (what
``config.json`` records about the model), :func:`write_run` (``config.json`` and ``metrics.csv``
through the output layer) and :func:`write_per_sample` (``per_sample.csv``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from rankcollapse.core.precision import ALL_DTYPE_NAMES, dtype_name
from rankcollapse.models.analyze.config import AnalyzeConfig
from rankcollapse.models.diagnose import layer_schedule_info
from rankcollapse.models.loading import LoadedModel
from rankcollapse.models.run_model import check_surgery, needs_surgery
from rankcollapse.models.stream import choose_backend, is_own_mask

__all__ = ["AnalyzeResult", "AnalyzeRun", "model_info", "write_per_sample", "write_run"]


@dataclass
class AnalyzeResult:
    """Rows (one per hidden state: ``layer``, ``hidden_state``, ``model_layer``, ``finite``,
    ``status``, ``hook``, metrics; ``mu_rel_doc{k}`` and ``mu_rel_docs_max`` when the mask splits the
    tokens into independent parts, e.g. ``document:``).

    ``hook``: the TransformerLens name of the same tensor, ``""`` where TransformerLens has no such
    tensor (:func:`rankcollapse.models.names.tl_hook_names`). ``samples``: per row, each metric's
    value per sample (float64 [b], NaN for a non-finite sample): :meth:`per_sample_rows`,
    ``to_frame(per_sample=True)``. ``ids``: the token ids read, int64 [b, n] (right padding: 0).

    ``finite``: share of samples whose hidden state and metrics are finite (metrics cover those samples
    only). ``status``: ``ok``; ``overflow`` where some sample is non-finite (inf / NaN), or so large that
    its metrics overflow the dtype (float32 tokens near 1e37: ``mu`` inf; every metric is NaN when no
    sample is finite); ``underflow`` where some sample is exactly zero (float32 at
    depth: ``mu_rel`` is then 0/0, NaN). ``seconds``: ``load``, ``tokenize``, ``forward`` (layers
    only) and ``metrics``. ``notes``: plain-words remarks about the run.

    ``config``: the run's config with ``dtype`` the hidden states' own (``model_info["dtype"]``): an
    in-memory bfloat16 model run under ``AnalyzeConfig()`` gives ``config.dtype == "bfloat16"``, which
    ``config.json``, the figures' titles and their floor lines read (:meth:`AnalyzeConfig.labelled`).
    """

    config: AnalyzeConfig
    rows: list[dict[str, Any]]
    model_info: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    samples: list[dict[str, Tensor]] = field(default_factory=list, repr=False)
    ids: Tensor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        own = self.model_info.get("dtype")
        if isinstance(own, str) and own in ALL_DTYPE_NAMES:
            self.config = self.config.labelled(own)

    def column(self, name: str) -> list[Any]:
        return [row[name] for row in self.rows]

    def __repr__(self) -> str:
        """A short notebook line: the model, the rows, the metrics, mu_rel from the first to the last row
        (the full record: ``.rows``, ``.to_frame()``, ``.model_info``)."""
        from rankcollapse.metrics import METRIC_NAMES

        label = self.model_info.get("model_label") or self.config.model
        metrics = [k for k in (self.rows[0] if self.rows else {}) if k in METRIC_NAMES]
        span = ""
        if self.rows and "mu_rel" in self.rows[0]:
            span = f", mu_rel {self.rows[0]['mu_rel']:.3g} -> {self.rows[-1]['mu_rel']:.3g}"
        layers = f"layers {self.rows[0]['layer']}..{self.rows[-1]['layer']}" if self.rows else "no rows"
        return (
            f"AnalyzeResult({label!r}, mode {self.config.mode!r}, {len(self.rows)} rows ({layers}), "
            f"metrics {', '.join(metrics)}{span}; .to_frame() for the table)"
        )

    def per_sample_rows(self) -> list[dict[str, Any]]:
        """One row per hidden state and sample: ``layer``, ``hidden_state``, ``model_layer``, ``hook``,
        ``sample`` (its index in the batch), then each metric's value for that sample (NaN when the
        sample's hidden state is non-finite). The batch rows' mean, ``_min`` and ``_max`` are over these."""
        out = []
        for row, values in zip(self.rows, self.samples, strict=True):
            head = {k: row[k] for k in ("layer", "hidden_state", "model_layer", "hook")}
            b = len(next(iter(values.values()))) if values else 0
            for i in range(b):
                out.append({**head, "sample": i, **{k: float(v[i]) for k, v in values.items()}})
        return out

    def to_frame(self, per_sample: bool = False) -> Any:
        """The rows as a ``pandas.DataFrame``: one row per hidden state (columns as in ``metrics.csv``),
        or with ``per_sample=True`` one per hidden state and sample (:meth:`per_sample_rows`, as
        ``per_sample.csv``)."""
        import pandas as pd

        return pd.DataFrame(self.per_sample_rows() if per_sample else self.rows)

    def figures(self) -> dict[str, Any]:
        """Every figure of this run that applies, by name (``mu``, ``geometry``, and ``diagnostics`` with
        ``diagnostics=True``): ``matplotlib.figure.Figure`` objects one paper column wide, not registered
        with pyplot (``fig.savefig(path)``); :func:`rankcollapse.models.plots.figures`."""
        from rankcollapse.models.plots import figures

        return figures(self)

    @property
    def overflow_layers(self) -> list[int]:
        """Layers ``t`` whose hidden state is non-finite in at least one sample."""
        return [int(r["layer"]) for r in self.rows if r["status"] == "overflow"]


@dataclass
class AnalyzeRun:
    """What :func:`~rankcollapse.models.analyze.analyze_into` wrote into its folder ``out``: the run's
    ``result``, the ``figures`` drawn (``AnalyzeOutputs.plot``) and, with ``check_masks``, one
    :class:`~rankcollapse.models.fingerprint.MaskFingerprint` per model layer (``mask_check.json``)."""

    result: AnalyzeResult
    out: Path
    figures: list[Path] = field(default_factory=list)
    mask_checks: list[Any] = field(default_factory=list)

    @property
    def masks_match(self) -> bool:
        """Whether every layer's kernel applies its config's mask (True without ``check_masks``)."""
        return all(c.matches for c in self.mask_checks)


def _image(model: LoadedModel, config: AnalyzeConfig) -> str | None:
    """A vision encoder's image as the run read it (``analyze.pixel_batch``: its size may differ from the
    config's, then the positions were interpolated); None for a text model."""
    if model.image is None:
        return None
    seen = getattr(config, "_image", None) or model.image
    return seen.describe(model.image)


def _dtype(model: LoadedModel) -> str:
    """The model's dtype by its name (:data:`~rankcollapse.core.precision.ALL_DTYPE_NAMES`: its weights',
    which its hidden states have), or torch's spelling of another one."""
    own = str(model.dtype).removeprefix("torch.")
    return dtype_name(model.dtype, half=True) if own in ALL_DTYPE_NAMES else own


def model_info(model: LoadedModel, config: AnalyzeConfig) -> dict[str, Any]:
    """What ``config.json`` records about the model (what it is, its label) and the backend."""
    mask = config.parsed_mask
    src = model.source
    check_surgery(model, config)
    return {"model_name": model.name, "model_label": model.label, "model_kind": src.kind if src else "",
            "checkpoint": src.checkpoint if src else None, "stand_in_for": src.stand_in_for if src else None,
            "pretrained": src.pretrained if src else None, "arch": model.arch,
            "source": model.info.get("loaded_from", ""), "tokenizer": model.info.get("tokenizer", ""),
            "inputs": model.input_name, "image": _image(model, config),
            "start_token": model.start_token, "model_layers": len(model.layers), "d_model": model.d_model,
            "own_d_qk": model.own_d_qk, "d_qk": config.d_qk if config.d_qk is not None else model.own_d_qk,
            "is_decoder": model.is_decoder, "own_mask": model.own_mask,
            "mask": model.own_mask if mask is None else mask.spec, "dissected": model.dissected,
            **layer_schedule_info(model, mask, config.layers),
            "dtype": _dtype(model), "max_tokens": model.max_tokens,
            "hf_casts": bool(model.info.get("hf_casts", True)),
            "backend": choose_backend(model, config.mode, is_own_mask(model, mask, config.tokens),
                                      config.d_qk, "parts" if needs_surgery(config) else config.backend),
            "diagnostics": config.diagnostics, "ablation": config.ablation,
            "sink_damping": config.sink_damping,
            "note": model.info.get("note")}


def read_size(config: AnalyzeConfig, ids: Any = None, pixels: Any = None) -> dict[str, int]:
    """What a run read, as ``config.json``'s ``read`` records it: ``samples`` x ``tokens`` of the ids
    ([b, n], right-padded) or images ([b, ...]; the config's tokens); the config's own sizes without
    either. A run given 2 excerpts of 512 tokens under the default config says 2 x 512, not 16 x 128."""
    if ids is not None and getattr(ids, "ndim", 0) == 2:
        return {"samples": int(ids.shape[0]), "tokens": int(ids.shape[1])}
    if pixels is not None and getattr(pixels, "ndim", 0) >= 1:
        return {"samples": int(pixels.shape[0]), "tokens": int(config.tokens)}
    return {"samples": int(config.samples), "tokens": int(config.tokens)}


def write_run(result: AnalyzeResult, out_dir: str | Path, per_sample: bool = False,
              overwrite: bool = False) -> Path:
    """Write ``config.json`` and ``metrics.csv`` of a finished result (see also the streaming CLI);
    ``per_sample``: also ``per_sample.csv`` (:func:`write_per_sample`). Through the output layer: staged
    and published together, the marker complete last. An earlier finished analyze run in ``out_dir`` is
    replaced with ``overwrite=True`` and refused without it (RankCollapseError, one line; the earlier run
    untouched). Returns the path of ``metrics.csv``."""
    from rankcollapse.edge.folder import OutputFolder
    from rankcollapse.edge.runs import RunWriter

    existing = "replace" if overwrite else "refuse"
    legacy = ("config.json", RunWriter.FINAL, RunWriter.PARTIAL, "per_sample.csv")  # before manifests
    with OutputFolder(out_dir, "analyze", option="out_dir", existing=existing, outputs=legacy) as folder:
        record = {"analyze": asdict(result.config), "model": result.model_info,
                  "read": read_size(result.config, result.ids), "notes": result.notes}
        with RunWriter(folder, record) as writer:
            for row in result.rows:
                writer.write_row(row)
        if per_sample:
            write_per_sample(result, folder.file("per_sample.csv"))
    return writer.metrics_path


def write_per_sample(result: AnalyzeResult, path: str | Path) -> Path:
    """Write :meth:`AnalyzeResult.per_sample_rows` as a CSV (atomically), through its declaration
    (``edge.runs.PER_SAMPLE``, which its reader reads it by)."""
    from rankcollapse.edge.runs import PER_SAMPLE, write_table

    return write_table(path, PER_SAMPLE, result.per_sample_rows())
