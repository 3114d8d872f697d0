"""``rankcollapse analyze --out``: one :func:`~rankcollapse.models.analyze.analyze` run streamed into a
folder (:func:`analyze_into`), with what :class:`~rankcollapse.models.analyze.config.AnalyzeOutputs`
asks for beside ``config.json`` and ``metrics.csv``: ``per_sample.csv``, the figures
(:mod:`rankcollapse.models.plots`), ``attention/layer_<t>.npy`` and ``mask_check.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from torch import Tensor

from rankcollapse.edge.messages import warning
from rankcollapse.models.analyze.batch import check_inputs, pixel_batch, token_batch
from rankcollapse.models.analyze.config import AnalyzeConfig, AnalyzeOutputs
from rankcollapse.models.analyze.result import AnalyzeRun, model_info, read_size, write_per_sample
from rankcollapse.models.analyze.run import analyze
from rankcollapse.models.diagnose import diagnostics_info
from rankcollapse.models.inputs import with_tokenizer
from rankcollapse.models.loading import LoadedModel

__all__ = ["analyze_into"]


def analyze_into(out: str | Path, config: AnalyzeConfig | AnalyzeOutputs, *, overwrite: bool = False,
                 model_label: str | None = None, tokenizer: Any | str | None = None,
                 pixel_values: str | Path | Tensor | None = None, progress: bool = False) -> AnalyzeRun:
    """Run ``config`` into the folder ``out``, as ``rankcollapse analyze --out`` does: ``config.json`` and
    ``metrics.csv`` (its rows streamed as they are made, published when the run is complete) and what an
    :class:`AnalyzeOutputs` given instead of the config asks for (``per_sample.csv``, the figures,
    ``attention/layer_<t>.npy``, ``mask_check.json``).

    ``out``: a new or empty folder, or an earlier analyze run with ``overwrite`` (else refused in one
    line, before the model loads). The model is loaded by name (``load_model``, not kept in memory) and
    :func:`check_inputs` refuses a run it cannot make before the folder is touched. ``pixel_values``: a
    vision encoder's images, a tensor or a ``.npy`` file
    (:func:`~rankcollapse.models.images.read_pixel_values`). ``model_label``, ``tokenizer``,
    ``progress``: as :func:`analyze`. A mask given for every layer is announced on stderr beside the
    model's own. Returns an :class:`AnalyzeRun` (the result, the figures drawn, the mask checks).
    """
    from rankcollapse.edge.folder import OutputFolder, check_output_folder
    from rankcollapse.edge.runs import RunWriter
    from rankcollapse.models.images import read_pixel_values
    from rankcollapse.models.loading import load_model
    from rankcollapse.models.plots import FORMATS, figure_files, figure_names, save_figures

    outputs = config if isinstance(config, AnalyzeOutputs) else AnalyzeOutputs(config)
    config = outputs.config
    existing = "replace" if overwrite else "refuse"  # the one rule: never replaced silently
    check_output_folder(out, "analyze", existing=existing)
    model = with_tokenizer(load_model(config.model, config.dtype, seed=config.seed, device=config.device,
                                      model_label=model_label), tokenizer)
    check_inputs(config, model, pixel_values=pixel_values, whole_maps=outputs.save_attention,
                 check_masks=outputs.check_masks)
    ids = pixels = None
    if model.image is not None:  # a vision encoder: images in, its token count set by them
        if isinstance(pixel_values, str | Path):
            pixel_values = read_pixel_values(pixel_values, model.image)
        pixels, config = pixel_batch(config, model, pixel_values)
    else:
        ids = token_batch(config, model)
    info = {**model_info(model, config), **diagnostics_info(model, config, outputs.save_attention)}
    if config.parsed_mask is not None:
        warning(f"mask {info['mask'][:60]} applies to every layer (the model's own: {model.own_mask[:60]})")
    figures = figure_files(figure_names(None, True), FORMATS)  # every name a figure may have: replaced
    # what analyze wrote before the marker listed a run's files (a folder from then is replaced by these)
    written = ("config.json", RunWriter.FINAL, RunWriter.PARTIAL, *figures, "per_sample.csv",
               "mask_check.json", "attention")
    with OutputFolder(out, "analyze", existing=existing, outputs=written) as folder:
        record = {"analyze": asdict(config), "model": info, "read": read_size(config, ids, pixels)}
        with RunWriter(folder, record) as writer:
            result = analyze(config, model=model, ids=ids, pixel_values=pixels, on_row=writer.write_row,
                             progress=progress,
                             on_attention=_attention_writer(folder) if outputs.save_attention else None)
        run = AnalyzeRun(result, Path(out))
        if outputs.per_sample:
            write_per_sample(result, folder.file("per_sample.csv"))
        if outputs.plot:
            run.figures = save_figures(result, folder.staging, outputs.formats)  # published with the run
        if outputs.check_masks:
            run.mask_checks = _check_masks(model, ids, folder.file("mask_check.json"), config.batch_size)
    return run


def _attention_writer(out: Any) -> Callable[[int, Tensor], None]:
    """``on_attention`` that saves each layer's weights to ``attention/layer_<t>.npy`` (float32) of the
    output folder ``out`` (an ``edge.folder.OutputFolder``: staged, published with the run)."""
    import numpy as np

    from rankcollapse.edge.atomic import atomic_path
    from rankcollapse.edge.runs import ATTENTION

    out.subfolder(str(Path(ATTENTION.name).parent))  # a real folder in the staging folder, never a link

    def save(t: int, attn: Tensor) -> None:
        with atomic_path(out.file(ATTENTION.name.format(k=f"{t:03d}"))) as tmp, tmp.open("wb") as f:
            np.save(f, ATTENTION.check(attn.detach().to("cpu").float().numpy()))

    return save


def _check_masks(model: LoadedModel, ids: Tensor, path: Path, batch_size: int | None) -> list[Any]:
    """Run the per-layer mask check and write ``mask_check.json``; return the checks (one per layer)."""
    from rankcollapse.edge.atomic import write_json
    from rankcollapse.edge.runs import MASK_CHECK
    from rankcollapse.models.diagnose import check_masks

    checks = check_masks(model, ids, batch_size)
    write_json(path, MASK_CHECK.check({
        "source": "ours: the mask each layer's attention kernel applies, probed through the model's "
                  "own attention function (count of allowed keys and first and last key per row), vs the "
                  "config's masks",
        "matches": all(c.matches for c in checks), "layers": [asdict(c) for c in checks]}))
    return checks
