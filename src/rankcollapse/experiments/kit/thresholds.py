"""A story's thresholds: every number a rule compares with, from the story's YAML, never from code.

``verdict:`` in ``stories/<name>.yaml`` holds the values, ``ranges:`` the documented range of each
one a reader may reasonably prefer (e.g. ``rate_tol: [0.01, 0.05]``). A rule asks for a threshold
by name (``th["rate_tol"]``); one the YAML lacks is an error naming the file, so no default hides in
Python. :class:`Thresholds` records which names a rule read, so a claim row can print them with their
ranges, and :func:`rankcollapse.experiments.kit.claims.judged` can re-run the rule at each end of each
range to say whether the verdict depends on a number the paper never gives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rankcollapse.edge.errors import RankCollapseError


@dataclass(frozen=True)
class Thresholds:
    """``values`` (name -> number, or a list of names for a rule setting) and ``ranges`` (name ->
    (lo, hi), lo <= value <= hi). ``used``: the names read so far (filled as rules read them)."""

    story: str
    values: Mapping[str, Any]
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    used: set[str] = field(default_factory=set, compare=False)

    def __post_init__(self) -> None:
        ranges: dict[str, tuple[float, float]] = {}
        for name, span in dict(self.ranges).items():
            if name not in self.values:
                raise RankCollapseError(f"{self.story}.yaml: range for {name!r}, which verdict: does not set")
            if not (isinstance(span, list | tuple) and len(span) == 2):
                raise RankCollapseError(
                    f"{self.story}.yaml: range of {name!r} must be [lo, hi], got {span!r}"
                )
            lo, hi = float(span[0]), float(span[1])
            value = float(self.values[name])
            if not (lo <= value <= hi):
                raise RankCollapseError(
                    f"{self.story}.yaml: {name} = {value:g} lies outside its range [{lo:g}, {hi:g}]"
                )
            ranges[name] = (lo, hi)
        for name, value in self.values.items():
            if isinstance(value, int | float) and not math.isfinite(float(value)):
                raise RankCollapseError(f"{self.story}.yaml: threshold {name} must be finite, got {value!r}")
        object.__setattr__(self, "ranges", ranges)

    @classmethod
    def of(
        cls, story: str, verdict: Mapping[str, Any], ranges: Mapping[str, Any] | None = None
    ) -> Thresholds:
        return cls(story, dict(verdict), dict(ranges or {}))

    def _get(self, name: str) -> Any:
        if name not in self.values:
            raise RankCollapseError(
                f"{self.story}.yaml: threshold {name!r} is missing from its verdict: section "
                "(thresholds have no defaults in code)"
            )
        self.used.add(name)
        return self.values[name]

    def __getitem__(self, name: str) -> float:
        value = self._get(name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise RankCollapseError(f"{self.story}.yaml: threshold {name} must be a number, got {value!r}")
        return float(value)

    def count(self, name: str) -> int:
        """An integer threshold (a sample size, a number of layers)."""
        value = self[name]
        if value != int(value) or value < 0:
            raise RankCollapseError(f"{self.story}.yaml: {name} must be a whole number >= 0, got {value:g}")
        return int(value)

    def names(self, name: str) -> list[str]:
        """A rule setting that lists names (e.g. which masks count as global)."""
        value = self._get(name)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise RankCollapseError(f"{self.story}.yaml: {name} must be a list of names, got {value!r}")
        return list(value)

    def fresh(self) -> Thresholds:
        """The same thresholds with an empty ``used`` record."""
        return Thresholds(self.story, self.values, self.ranges)

    def with_value(self, name: str, value: float) -> Thresholds:
        """A copy with ``name`` set to ``value`` (ranges dropped: a probe, not a config)."""
        return Thresholds(self.story, {**self.values, name: value}, {})

    def describe(self, names: set[str] | None = None) -> str:
        """``rate_tol = 0.02 (range 0.01-0.05); min_samples = 4`` for the names used (default: all)."""
        shown = sorted(self.used if names is None else names)
        parts = []
        for name in shown:
            value = self.values[name]
            text = f"{name} = {value:g}" if isinstance(value, int | float) else f"{name} = {', '.join(value)}"
            if name in self.ranges:
                lo, hi = self.ranges[name]
                text += f" (range {lo:g}-{hi:g})"
            parts.append(text)
        return "; ".join(parts)
