"""The judging kit: the one way every story summarises curves, judges statements and draws figures.

- ``thresholds``: :class:`Thresholds` from the story's YAML (no defaults in code) with their ranges;
- ``curves``: :class:`Curve` (mean ± std per layer, per-sample log drops), the one std, the one rate;
- ``statuses``: one word per curve (``StatusName``: collapsing, kept, unstable, ...);
- ``judgement``, ``causes``: what a rule returns (of a statement or of one condition), and the tested set
  of cause sentences;
- ``combine``: the verdict algebra (one judgement per condition, merged by ``combine_parts``);
- ``rules``: every claim rule, one module per shape of data (``curves``, ``rates``, ``layers``,
  ``checks``), pure functions pinned by synthetic-data tests;
- ``claims``: a statement's row (plotted quantity and mechanism, origin, word, cause, sensitivity);
- ``data``: from an arm's tables to curves; ``plots``: every figure helper; ``tasks``: thin adapters
  over ``models`` and ``dynamics``; ``glossary``: every term once.

A story (``experiments/stories/<name>.py``) uses only the kit, the judging contract
(``experiments.contract``) and the engine.
"""
