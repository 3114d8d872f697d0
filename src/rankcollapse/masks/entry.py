"""The entry point of ``rankcollapse mask``: one query, validating on construction, and :func:`mask_facts`.

>>> facts = mask_facts(MaskQuery(spec="causal-window:w=4", tokens=64)).facts      # one mask
>>> facts = mask_facts(MaskQuery(spec="causal-window:w=3;causal", tokens=64, layers=8)).facts  # a schedule

A query names one source: a mask ``spec`` (a schedule when it holds ``;``, ``*`` or ``[``, or when ``layers``
is given) or a Hugging Face ``hf_config`` (a ``config.json``, a model folder, or its dict: the model's own
per-layer schedule). ``plot`` draws one mask, never a schedule. ``hasse`` adds where the composed flow ends
up with depth (``masks.hasse``: the layers after which it stops changing, its condensation and Hasse
diagram), under the key ``hasse``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_int, quote
from rankcollapse.masks.schedule import is_schedule_spec


@dataclass(frozen=True)
class MaskQuery:
    """What :func:`mask_facts` analyses.

    Arguments:
        spec: a mask spec or a schedule (``rankcollapse.masks.parse_mask`` / ``masks.schedule``).
        tokens: the sequence length N (checked by the masks package: ``sequence length n``).
        layers: analyse ``spec`` as a schedule repeated to this depth (with ``hf_config``: must be the
            model's depth).
        hf_config: a model's ``config.json`` (a file, a folder, or the parsed dict) instead of ``spec``.
        full: JSON lists per-token arrays in full (None: iff N <= 4096).
        plot: draw the mask matrix with its center nodes into this file (one mask only).
        hasse: add the limit of the composed flow (``masks.hasse.hasse_analysis``: the mask, or the schedule's
            period, repeated without end) under the key ``hasse``.
    """

    spec: str | None = None
    tokens: int | None = None
    layers: int | None = None
    hf_config: str | Path | dict[str, Any] | None = None
    full: bool | None = None
    plot: str | Path | None = None
    hasse: bool = False

    def __post_init__(self) -> None:
        if self.tokens is None:
            raise RankCollapseError("missing tokens N (the sequence length); allowed: an integer >= 1")
        check_int("tokens", self.tokens)
        if self.layers is not None:
            check_int("layers", self.layers, low=1)
        if self.spec is not None and self.hf_config is not None:
            raise RankCollapseError("give one of spec and hf_config, not both")
        if self.spec is None and self.hf_config is None:
            raise RankCollapseError("missing spec (a mask spec or a schedule) or hf_config")
        if not isinstance(self.hasse, bool):
            raise RankCollapseError(f"hasse={quote(self.hasse)} is invalid; allowed: True or False")
        if self.plot is not None:
            _check_plot_path(self.plot)
            if self.is_schedule:
                raise RankCollapseError(
                    "plot does not apply to a schedule (layers, ';', '*' or a model's config); "
                    "allowed: plot one mask"
                )

    @property
    def is_schedule(self) -> bool:
        """Whether the query is a per-layer schedule (a model's config, ``layers``, or a schedule spec)."""
        return self.hf_config is not None or self.layers is not None or is_schedule_spec(self.spec or "")


def _check_plot_path(plot: str | Path) -> None:
    if not str(plot).strip():
        raise RankCollapseError("plot '' is empty; allowed: a file path such as mask.png")
    path, shown = Path(plot), quote(str(plot), 100)
    if path.is_dir():
        raise RankCollapseError(
            f"plot {shown} is a directory; allowed: a file path such as {quote(str(path / 'mask.png'), 100)}"
        )
    if not path.parent.is_dir():
        raise RankCollapseError(f"cannot write plot {shown}: folder {quote(str(path.parent), 100)} does not "
                                "exist; allowed: a path in an existing folder")


@dataclass(frozen=True)
class MaskFacts:
    """What :func:`mask_facts` found: ``facts`` (the JSON object of docs/masks.md), ``schedule`` (a
    schedule's one-line description, None for one mask) and ``plot`` (the picture written, if any)."""

    facts: dict[str, Any]
    schedule: str | None = None
    plot: Path | None = None


def mask_facts(query: MaskQuery) -> MaskFacts:
    """The graph facts of ``query``'s mask (edge ``j -> i`` iff token i attends to j: connectivity,
    centers, radius) or of its schedule (the composed graph, layers to a center, the bound)."""
    if query.is_schedule:
        from rankcollapse.masks.composed import analyze_schedule
        from rankcollapse.masks.schedule import parse_schedule

        if query.hf_config is not None:
            from rankcollapse.masks.hf_schedule import schedule_from_hf_config

            schedule = schedule_from_hf_config(query.hf_config)
            if query.layers is not None and query.layers != schedule.depth:
                raise RankCollapseError(
                    f"layers {query.layers} does not fit the model, which has {schedule.depth} layers; "
                    f"allowed: layers {schedule.depth} or none"
                )
            schedule = parse_schedule(schedule, None)
        else:
            schedule = parse_schedule(query.spec, query.layers)
        analysis = analyze_schedule(schedule, query.tokens)
        facts = analysis.to_dict(full=query.full)
        if query.hasse:
            facts["hasse"] = _hasse(schedule, query.tokens)
        return MaskFacts(facts, schedule=schedule.describe())
    from rankcollapse.masks import parse_mask

    mask = parse_mask(query.spec)
    analysis = mask.analysis(query.tokens)
    facts = analysis.to_dict(full=query.full)
    if query.hasse:
        facts["hasse"] = _hasse(mask, query.tokens)
    if query.plot is None:
        return MaskFacts(facts)
    from rankcollapse.masks.picture import plot_mask

    title = f"{mask.spec[:80]}, n={query.tokens}, radius={analysis.radius}"
    plot_mask(mask, query.tokens, analysis.center_nodes, Path(query.plot), title)
    facts["plot"] = str(query.plot)
    return MaskFacts(facts, plot=Path(query.plot))


def _hasse(mask: Any, tokens: int) -> dict[str, Any]:
    """``masks.hasse.hasse_analysis(mask, tokens).to_dict()`` (a schedule: its period repeated)."""
    from rankcollapse.masks.hasse import hasse_analysis
    from rankcollapse.masks.schedule import MaskSchedule

    if isinstance(mask, MaskSchedule):
        mask = MaskSchedule(mask.period, len(mask.period))
    return hasse_analysis(mask, tokens).to_dict()
