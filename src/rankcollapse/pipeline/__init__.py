"""The pipeline: run every story's arms through one sweep, judge every statement, write the report.

Above ``experiments`` (it imports the engine, the kit and the stories; nothing imports it but the CLI):

- ``reproduce``: :func:`reproduce` of a :class:`ReproduceConfig` -> :class:`ReproduceResult` (runs, figures,
  the claims table);
- ``report``: ``report.html``, one self-contained page.
"""

from rankcollapse.pipeline.reproduce import ReproduceConfig, ReproduceResult, finished_runs, reproduce

__all__ = ["ReproduceConfig", "ReproduceResult", "finished_runs", "reproduce"]
