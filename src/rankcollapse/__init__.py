"""rankcollapse: rank collapse in transformers, after Wu et al., NeurIPS 2024 (arXiv 2405.18781).

Layout (each folder has a module docstring saying what lives there), lowest floor first:

- ``core``        the vocabulary: the one masked softmax, the norms, every random draw, the precision floor
- ``edge``        what meets the user: the one error, input opener, validation, output layer
- ``masks``       attention masks as directed graphs: specs, sparse form, graph analysis, exporters
- ``metrics``     collapse measures (mu, ranks, cosines) as pure functions of token matrices
- ``dynamics``    deep self-attention dynamics: attention kernels, norms, layers, simulator, theory
- ``equilibria``  LayerNorm dynamics: the N = 2 counterexample and equilibria of every rank
- ``models``      pretrained Hugging Face models dissected layer by layer, corpora
- ``monitor``     collapse telemetry per layer inside a training loop (Trainer callback, plain loop)
- ``experiments`` the engine (grid, store, executors), the judging kit and one story per paper result
- ``pipeline``    ``reproduce``: every story's grid run and judged, the report
- ``cli``         the ``rankcollapse`` command, a thin layer over the Python API
"""

from rankcollapse.edge.network import sync_offline

sync_offline()  # first: the hub library offline for the whole process until downloads are allowed

from rankcollapse.edge.errors import RankCollapseError  # noqa: E402

__version__ = "0.2.0"

__all__ = ["RankCollapseError", "__version__"]
