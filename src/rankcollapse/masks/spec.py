"""Mask spec strings: ``family[:key=value,...]`` combined with ``&`` (and) and ``|`` (or).

Grammar (``&`` binds tighter than ``|``; parentheses group; spaces around operators ignored)::

    expr   := term ('|' term)*
    term   := factor ('&' factor)*
    factor := '(' expr ')' | atom
    atom   := NAME [':' key=value (',' key=value)*]  |  'file:' PATH

A ``file:`` path runs up to the next ``&``, ``|`` or ``)`` (paths containing those characters are
not supported). ``parse_mask`` returns a ``Mask`` whose ``.spec`` is canonical (parameters in
the documented order, ``&`` parts of an ``|`` unparenthesised).
"""

from __future__ import annotations

from rankcollapse.errors import RankCollapseError
from rankcollapse.masks.base import AndMask, Mask, OrMask
from rankcollapse.masks.families import ALL_FAMILY_NAMES, FAMILIES, FileMask

_OPERATORS = "&|()"


def _allowed_families() -> str:
    return ", ".join(f.usage() for f in FAMILIES.values()) + ", file:PATH"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str, allowed: str) -> RankCollapseError:
        return RankCollapseError(f"bad mask spec {self.text!r}: {what} at position {self.pos}; {allowed}")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> Mask:
        if not self.text.strip():
            raise RankCollapseError(f"empty mask spec; allowed: {_allowed_families()}, combined with & and |")
        mask = self.expr()
        if self.peek():
            raise self.error(f"unexpected {self.peek()!r}", "expected & or | between masks")
        return mask

    def expr(self) -> Mask:
        parts = [self.term()]
        while self.peek() == "|":
            self.pos += 1
            parts.append(self.term())
        return parts[0] if len(parts) == 1 else OrMask(tuple(parts))

    def term(self) -> Mask:
        parts = [self.factor()]
        while self.peek() == "&":
            self.pos += 1
            parts.append(self.factor())
        return parts[0] if len(parts) == 1 else AndMask(tuple(parts))

    def factor(self) -> Mask:
        c = self.peek()
        if c == "(":
            self.pos += 1
            inner = self.expr()
            if self.peek() != ")":
                got = repr(self.peek()) if self.peek() else "end of spec"
                raise self.error(f"missing ')' (got {got})", "parentheses must balance")
            self.pos += 1
            return inner
        if c in ("", "&", "|", ")"):
            got = repr(c) if c else "end of spec"
            raise self.error(f"expected a mask family, got {got}", f"allowed: {_allowed_families()}")
        return self.atom()

    def atom(self) -> Mask:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _OPERATORS:
            self.pos += 1
        raw = self.text[start : self.pos].strip()
        name, sep, rest = raw.partition(":")
        name = name.strip()
        if name == "file":
            return FileMask(rest)
        family = FAMILIES.get(name)
        if family is None:
            raise RankCollapseError(
                f"unknown mask family {name!r} in {self.text!r}; allowed: {', '.join(ALL_FAMILY_NAMES)}"
            )
        values: dict[str, str] = {}
        if sep:
            if not rest.strip():
                raise RankCollapseError(f"{name!r} has ':' but no parameters; usage: {family.usage()}")
            for item in rest.split(","):
                key, eq, value = item.partition("=")
                key = key.strip()
                if not eq or not key or not value.strip():
                    raise RankCollapseError(
                        f"malformed parameter {item.strip()!r} in {raw!r}; usage: {family.usage()}"
                    )
                if key in values:
                    msg = f"parameter {key!r} given twice in {raw!r}; usage: {family.usage()}"
                    raise RankCollapseError(msg)
                values[key] = value.strip()
        return family(**values)


def parse_mask(spec: str | Mask) -> Mask:
    """Parse a mask spec such as ``"causal&window:w=4"`` (a ``Mask`` passes through).

    Raises ``RankCollapseError`` (one line naming the bad part and what is allowed) on an unknown
    family or parameter, a missing / negative / non-integer parameter, an unreadable ``file:``
    matrix, or malformed ``&`` / ``|`` / parentheses.
    """
    if isinstance(spec, Mask):
        return spec
    if not isinstance(spec, str):
        raise RankCollapseError(f"mask spec must be a string, got {type(spec).__name__}")
    return _Parser(spec).parse()
