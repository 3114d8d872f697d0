"""Mask schedules: a different mask per layer, analysed as a sequence of graphs.

Syntax (ours)::

    schedule := item (';' item)*
    item     := MASK ['*' COUNT]  |  '[' schedule ']' ['*' COUNT]

``MASK`` is any mask spec (``&``, ``|`` and parentheses included); ``*COUNT`` repeats an item
``COUNT >= 1`` times; brackets group items. The schedule is one *period*; at depth ``L`` the period
repeats cyclically (the last repetition may be cut short). Examples: ``causal-window:w=511*5;causal``
(five local layers, then one global: Gemma 3's pattern), ``[window:w=4;complete]*2;causal``, and
``causal`` (the same mask in every layer). A ``file:`` path containing ``;``, ``*`` or brackets goes in
quotes (``file:'a;b.npy'``), as in a mask spec.

``MaskSchedule.spec`` is canonical: the period run-length encoded (``a*2;b``), brackets expanded.
Layer ``t`` (0-based) uses ``masks[t]``; ``X(t + 1) = A(t) X(t)``, so the network's mask is the
boolean product ``P_L = M_{L-1} ... M_1 M_0``: ``P_L[i, j]`` iff a path ``j -> ... -> i`` goes
through the layers, one edge of layer ``t`` at step ``t`` (self-loops let a path wait).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.masks.base import Mask
from rankcollapse.masks.spec import MAX_NESTING, cut_hint, parse_mask, scan

MAX_LAYERS = 100_000
"""Most layers a schedule may have (period or depth)."""

#: The characters that make a spec a schedule (outside a quoted ``file:`` path).
SCHEDULE_MARKS = ";*[]"


@dataclass(frozen=True, eq=False)
class MaskSchedule:
    """One mask per layer: ``period`` repeated cyclically to ``depth`` layers."""

    period: tuple[Mask, ...]
    depth: int

    def __post_init__(self) -> None:
        if not self.period:
            raise RankCollapseError("a mask schedule needs at least one mask")
        if not all(isinstance(m, Mask) for m in self.period):
            raise RankCollapseError("a mask schedule holds Mask objects (use parse_schedule for a spec)")
        _check_layers(self.depth, "depth")

    @property
    def spec(self) -> str:
        """The period, run-length encoded: ``causal-window:w=511*5;causal``."""
        runs: list[list] = []
        for m in self.period:
            if runs and runs[-1][0] == m:
                runs[-1][1] += 1
            else:
                runs.append([m, 1])
        return ";".join(m.spec + (f"*{k}" if k > 1 else "") for m, k in runs)

    @property
    def masks(self) -> tuple[Mask, ...]:
        """The ``depth`` layer masks (objects repeat, so their caches are shared)."""
        p = len(self.period)
        return tuple(self.period[t % p] for t in range(self.depth))

    def at_depth(self, depth: int) -> MaskSchedule:
        """The same period at another depth."""
        return MaskSchedule(self.period, depth)

    def reduced(self) -> MaskSchedule:
        """The same layers with the shortest period that repeats to them (``a;b;a;b`` -> ``a;b``, the
        depth kept); the layers of the period must fill the depth for a shorter period to count."""
        layers = self.masks
        for p in range(1, len(layers) + 1):
            if all(layers[t] == layers[t % p] for t in range(len(layers))):
                return MaskSchedule(tuple(layers[:p]), self.depth)
        return self

    def describe(self) -> str:
        """One line: the period and how it fills the depth."""
        p = len(self.period)
        reps, rest = divmod(self.depth, p)
        fill = f"{reps} x {p} layers" + (f" + the first {rest}" if rest else "")
        return f"{self.spec} (period {p}, depth {self.depth} = {fill})"

    def __repr__(self) -> str:
        return f"parse_schedule({self.spec!r}, depth={self.depth})"


def _check_layers(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LAYERS:
        raise RankCollapseError(f"schedule {what}={value!r} is invalid; allowed: an integer 1..{MAX_LAYERS}")
    return value


class _ScheduleParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> RankCollapseError:
        return RankCollapseError(
            f"bad mask schedule {quote(self.text)}: {what} at position {self.pos}; "
            "allowed: MASK[*COUNT];...  with [ ] grouping, e.g. 'causal-window:w=511*5;causal'"
        )

    def parse(self) -> list[Mask]:
        if not self.text.strip():
            raise self.error("empty schedule")
        items = self.sequence(0)
        if self.pos < len(self.text):
            raise self.error(f"unexpected {self.text[self.pos]!r}")
        return items

    def sequence(self, depth: int) -> list[Mask]:
        out: list[Mask] = []
        while True:
            out.extend(self.item(depth))
            if len(out) > MAX_LAYERS:
                raise self.error(f"more than {MAX_LAYERS} layers in one period")
            if self.pos < len(self.text) and self.text[self.pos] == ";":
                self.pos += 1
                continue
            return out

    def item(self, depth: int) -> list[Mask]:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        if self.pos < len(self.text) and self.text[self.pos] == "[":
            if depth >= MAX_NESTING:
                raise self.error(f"brackets nested deeper than {MAX_NESTING}")
            self.pos += 1
            inner = self.sequence(depth + 1)
            if self.pos >= len(self.text) or self.text[self.pos] != "]":
                raise self.error("missing ']'")
            self.pos += 1
        else:
            start = self.pos
            self.pos = scan(self.text, self.pos, SCHEDULE_MARKS)
            spec = self.text[start : self.pos].strip()
            if not spec:
                raise self.error("expected a mask spec")
            try:
                inner = [parse_mask(spec)]
            except RankCollapseError as err:
                raise cut_hint(err, self.text, self.pos) if "file:" in spec else err from None
        return inner * self.count(len(inner))

    def count(self, size: int) -> int:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        if self.pos >= len(self.text) or self.text[self.pos] != "*":
            return 1
        self.pos += 1
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isdigit() or self.text[self.pos].isspace()):
            self.pos += 1
        digits = self.text[start : self.pos].strip()
        if not digits.isdigit() or int(digits) < 1:
            raise self.error(f"repeat count {quote(digits or '', 20)} is not an integer >= 1")
        if len(digits) > 6 or int(digits) * size > MAX_LAYERS:
            raise self.error(f"more than {MAX_LAYERS} layers in one period")
        return int(digits)


def is_schedule_spec(spec: str) -> bool:
    """Whether a spec string is a schedule: a ``;``, ``*`` or bracket outside a quoted ``file:`` path."""
    return scan(spec, 0, SCHEDULE_MARKS) < len(spec)


def parse_schedule(spec: str | Mask | MaskSchedule | Any, depth: int | None = None) -> MaskSchedule:
    """Parse a schedule spec (module docstring); ``depth`` defaults to the period's length.

    A ``Mask`` (or anything ``parse_mask`` takes: a predicate ``f(i, j)``, a bool tensor) is the
    one-mask schedule; a list of masks is the period, one item per layer; a ``MaskSchedule`` passes
    through (re-depthed if ``depth``).
    """
    if isinstance(spec, MaskSchedule):
        return spec if depth is None else spec.at_depth(depth)
    if isinstance(spec, str):
        period = tuple(_ScheduleParser(spec).parse())
    elif isinstance(spec, list | tuple):
        if not spec or len(spec) > MAX_LAYERS:
            raise RankCollapseError(
                f"a mask schedule given as a list needs 1..{MAX_LAYERS} masks, got {len(spec)}"
            )
        period = tuple(parse_mask(m) for m in spec)
    else:
        period = (parse_mask(spec),)  # a Mask, a predicate or a tensor: the same mask in every layer
    return MaskSchedule(period, len(period) if depth is None else _check_layers(depth, "depth"))


def schedule_from_masks(masks: list[Mask | str]) -> MaskSchedule:
    """The schedule with exactly these layer masks (specs parsed once each)."""
    return MaskSchedule(tuple(parse_mask(m) for m in masks), len(masks))
