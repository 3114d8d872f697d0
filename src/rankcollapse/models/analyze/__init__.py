"""The analyze command's machinery: one model measured layer by layer on text (or images), in memory or
into a run folder, one idea a module.

- ``config``  :class:`AnalyzeConfig` (one run, checked on construction), :class:`AnalyzeOutputs` (what
              ``rankcollapse analyze`` writes beside the rows), ``check_excerpt_size``, the defaults
- ``batch``   what a run reads: :func:`token_batch` (excerpts), :func:`pixel_batch` (images), and
              :func:`check_inputs`, the checks that need the loaded model, made before anything runs
- ``memory``  a run's memory estimates (``kept_bytes``, ``batch_bytes``, ``forward_bytes``) and
              ``check_run_memory``
- ``run``     :func:`analyze` -> :class:`AnalyzeResult`: the run in memory, each layer's hidden state
              measured as it comes
- ``into``    :func:`analyze_into` -> :class:`AnalyzeRun`: the run streamed into a folder, as the command
              makes it (``per_sample.csv``, the figures, the attention maps, ``mask_check.json``)
- ``result``  :class:`AnalyzeResult`, :class:`AnalyzeRun`, :func:`model_info`, :func:`write_run`,
              :func:`write_per_sample`

Its neighbours in ``rankcollapse.models``: ``samples`` (per-sample values, a row's summary), ``run_model``
(``load_model_cached``, the checks on a model given), ``stream`` (the hidden states layer by layer).
"""

from rankcollapse.models.analyze.batch import check_inputs, pixel_batch, token_batch
from rankcollapse.models.analyze.config import AnalyzeConfig, AnalyzeOutputs
from rankcollapse.models.analyze.into import analyze_into
from rankcollapse.models.analyze.result import (
    AnalyzeResult,
    AnalyzeRun,
    model_info,
    write_per_sample,
    write_run,
)
from rankcollapse.models.analyze.run import analyze

__all__ = [
    "AnalyzeConfig",
    "AnalyzeOutputs",
    "AnalyzeResult",
    "AnalyzeRun",
    "analyze",
    "analyze_into",
    "check_inputs",
    "model_info",
    "pixel_batch",
    "token_batch",
    "write_per_sample",
    "write_run",
]
