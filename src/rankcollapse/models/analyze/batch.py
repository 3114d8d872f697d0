"""What an :func:`~rankcollapse.models.analyze.analyze` run reads, as one batch, and the checks made
before anything runs.

:func:`token_batch` (a text model's excerpts) and :func:`pixel_batch` (a vision encoder's images) give
the run's samples, checked against this machine's memory (:mod:`~rankcollapse.models.analyze.memory`);
:func:`check_inputs` refuses, before anything runs, what the loaded model cannot take. Both
:func:`~rankcollapse.models.analyze.analyze` and :func:`~rankcollapse.models.analyze.analyze_into`
go through them, so Python and the command refuse alike.
"""

from __future__ import annotations

import copy
from typing import Any

from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.analyze.config import AnalyzeConfig
from rankcollapse.models.analyze.memory import check_run_memory
from rankcollapse.models.diagnose import diagnostics_path
from rankcollapse.models.excerpts import check_excerpts, excerpts
from rankcollapse.models.images import check_pixels, check_tokens, image_geometry, random_pixels
from rankcollapse.models.loading import LoadedModel
from rankcollapse.models.run_model import check_surgery

__all__ = ["check_inputs", "pixel_batch", "token_batch"]


def token_batch(config: AnalyzeConfig, model: LoadedModel) -> Tensor:
    """The [samples, tokens] token ids of a config (:func:`excerpts` of its corpus or text file), on the CPU.

    A run whose estimated memory exceeds what this machine has is refused before anything is
    allocated (after the context and the tokenizer: :func:`check_excerpts`): what every sample keeps
    (:func:`~rankcollapse.models.analyze.memory.kept_bytes`) and one batch in the model
    (:func:`~rankcollapse.models.analyze.memory.batch_bytes`, ``config.batch_size`` samples or all), on
    the CPU; on CUDA the batch is checked against what is free on the GPU
    (:func:`~rankcollapse.models.analyze.memory.check_run_memory`).
    """
    check_excerpts(model, config.tokens)
    check_run_memory(config, model)
    return excerpts(model, config.corpus, config.samples, config.tokens, config.seed, config.text_file)


def pixel_batch(config: AnalyzeConfig, model: LoadedModel,
                pixel_values: Tensor | None = None) -> tuple[Tensor, AnalyzeConfig]:
    """A vision encoder's input (``model.image``, :mod:`rankcollapse.models.images`) and the run's config.

    ``pixel_values`` [b, C, H, W]: normalised pixels, as the model's image processor gives them, checked
    (:func:`~rankcollapse.models.images.check_pixels`: the model's channels, a float dtype, finite; one
    line else); the config's image size, or another whole number of patches, whose positions are
    interpolated (:func:`~rankcollapse.models.images.interpolate_positions`). None: ``config.samples``
    white-noise images of the config's size seeded by ``config.seed``
    (:func:`~rankcollapse.models.images.random_pixels`). The token count is the image's,
    ``1 + (H / p)(W / p)``: a ``tokens`` given that differs is refused, as are a corpus and a text file.
    The config returned is a copy recording the run as it is (``tokens`` the image's, ``samples`` b, the
    image for ``model_info``), checked against this machine's memory
    (:func:`~rankcollapse.models.analyze.memory.check_run_memory`).
    """
    image = model.image
    if image is None:
        raise _reads_ids(model)
    if config.text_file is not None or getattr(config, "_corpus_given", False):
        what = "--text-file" if config.text_file is not None else "--corpus"
        raise RankCollapseError(f"{what} does not apply to vision encoder {model.label!r}: it reads images "
                                "(pixel_values, or seeded white-noise images by default)")
    given = config.tokens if getattr(config, "_tokens_given", True) else None
    if pixel_values is None:
        check_tokens(given, image, model.label)
        pixels, seen = random_pixels(image, config.samples, config.seed), image
    else:
        pixels = check_pixels(pixel_values, image)
        if getattr(config, "_samples_given", False) and config.samples != pixels.shape[0]:
            if config.samples > pixels.shape[0]:  # never fewer samples than asked for, silently
                raise RankCollapseError(
                    f"samples={config.samples} (--samples) but the pixel values hold {pixels.shape[0]} "
                    f"images; give --samples {pixels.shape[0]} or fewer, or more images")
            pixels = pixels[: config.samples]  # the first ``samples`` images, as excerpts are the first
        seen = image_geometry(pixels.shape, image)
        check_tokens(given, seen, model.label)
    run = copy.copy(config)  # the parsed mask and the flags of what was given come along
    run.tokens, run.samples = seen.tokens, int(pixels.shape[0])
    run._image = seen  # what model_info records: the image read, not only the config's
    check_run_memory(run, model)
    return pixels, run


def check_inputs(config: AnalyzeConfig, model: LoadedModel, *, ids: Tensor | None = None,
                 texts: list[str] | None = None, attention_mask: Tensor | None = None,
                 pixel_values: Any = None, whole_maps: bool = False, check_masks: bool = False) -> None:
    """Refuse, in one line and before anything runs, a run ``model`` cannot make: what the model cannot
    give (:func:`~rankcollapse.models.run_model.check_surgery`; ``whole_maps``: ``on_attention`` or
    ``save_attention``), inputs of the other kind (a vision encoder reads ``pixel_values``, a text model
    ``ids`` or ``texts``, not both) and ``check_masks`` (``AnalyzeOutputs``) on a vision encoder. Every
    :func:`~rankcollapse.models.analyze.analyze` and :func:`~rankcollapse.models.analyze.analyze_into`
    calls it."""
    check_surgery(model, config)
    if config.diagnostics and whole_maps:
        diagnostics_path(model, config, whole_maps)
    if model.image is not None:
        if texts is not None or ids is not None or attention_mask is not None:
            raise RankCollapseError(f"{model.label!r} is a vision encoder: give pixel_values [b, C, H, W], "
                                    "not ids, texts or an attention_mask")
        if check_masks:
            raise RankCollapseError("check_masks applies to text models (a vision encoder's mask is "
                                    "complete)")
        return
    if pixel_values is not None:
        raise _reads_ids(model)
    if texts is not None and ids is not None:
        raise RankCollapseError("give ids or texts, not both")


def _reads_ids(model: LoadedModel) -> RankCollapseError:
    """The one line for pixel values given to a text model."""
    return RankCollapseError(f"pixel_values applies only to a vision encoder (ViT); {model.label!r} reads "
                             "token ids")
