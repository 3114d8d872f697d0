"""Pretrained Hugging Face models dissected layer by layer, and the text they read.

- ``parts``    :class:`LayerParts` (one layer's weights, norms, MLP) and :func:`run_block`
               (modes ``full``, ``attn``, ``attn+ln``, ``attn+skip``, ``attn+skip+ln``)
- ``loading``  :func:`load_model` (hub name, path, ``minilm``, ``smollm2``, ``random:<arch>``)
- ``corpora``  :func:`load_corpus`, :func:`sample_token_batches`
- ``analyze``  :func:`iter_hidden_states`, :class:`AnalyzeConfig`, :func:`analyze` -> :class:`AnalyzeResult`
- ``plot``     :func:`~rankcollapse.models.plot.plot_token_geometry` (paper Figure 4 panels)

Formulas and conventions: ``docs/models.md``.
"""

from rankcollapse.models.analyze import (
    AnalyzeConfig,
    AnalyzeResult,
    analyze,
    hidden_state_name,
    iter_hidden_states,
    write_run,
)
from rankcollapse.models.corpora import CORPORA, load_corpus, sample_token_batches, tokenize
from rankcollapse.models.loading import RANDOM_SIZES, SUPPORTED, LoadedModel, dissect, load_model
from rankcollapse.models.parts import MODES, LayerParts, attention, run_block

__all__ = [
    "CORPORA",
    "MODES",
    "RANDOM_SIZES",
    "SUPPORTED",
    "AnalyzeConfig",
    "AnalyzeResult",
    "LayerParts",
    "LoadedModel",
    "analyze",
    "attention",
    "dissect",
    "hidden_state_name",
    "iter_hidden_states",
    "load_corpus",
    "load_model",
    "run_block",
    "sample_token_batches",
    "tokenize",
    "write_run",
]
