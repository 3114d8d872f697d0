"""Mask spec strings: ``family[:key=value,...]`` combined with ``&`` (and) and ``|`` (or).

Grammar (``&`` binds tighter than ``|``; parentheses group; spaces around operators ignored)::

    expr   := term ('|' term)*
    term   := factor ('&' factor)*
    factor := '(' expr ')' | atom
    atom   := NAME [':' key=value (',' key=value)*]  |  'file:' PATH

A list parameter takes the comma-separated items that follow it (``document:lengths=3,5``).
A ``file:`` path runs up to the next ``&``, ``|`` or ``)``; a path containing any of ``& | ( ) ; * [ ]``
goes in quotes, ``file:'a&b.npy'`` (or ``"..."``), and a canonical spec quotes such a path itself
(``masks.fixed.quoted_path``). A path cut at one of them and not found says so.
Parentheses nest at most ``MAX_NESTING`` deep. ``parse_mask`` returns a ``Mask``
whose ``.spec`` is canonical (parameters in the documented order, ``&`` parts of an ``|``
unparenthesised).

``parse_mask`` remembers the last ``PARSE_MEMO`` spec strings without ``file:``: parsing the same
string again returns the same object, so its per-length cache (dense, sparse, band, analysis) is
shared by every caller. ``file:`` specs are read afresh each time (the file may have changed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.masks.base import AndMask, Mask, OrMask
from rankcollapse.masks.custom import PredicateMask, TensorMask, is_array
from rankcollapse.masks.fixed import QUOTES, FileMask
from rankcollapse.masks.registry import ALL_FAMILY_NAMES, FAMILIES

_OPERATORS = "&|()"
_QUOTE_HINT = "a path containing any of & | ( ) ; * [ ] goes in quotes: file:'PATH'"


def scan(text: str, pos: int, stops: str) -> int:
    """The index of the first character of ``stops`` at or after ``pos`` outside quotes (``'...'``,
    ``"..."``: a quoted ``file:`` path), or ``len(text)``."""
    while pos < len(text) and text[pos] not in stops:
        if text[pos] in QUOTES:
            close = text.find(text[pos], pos + 1)
            if close < 0:
                raise RankCollapseError(f"bad mask spec {quote(text)}: unclosed {text[pos]} at position "
                                        f"{pos}; allowed: file:'PATH' with the quote closed")
            pos = close
        pos += 1
    return pos


def unquoted_path(raw: str) -> tuple[str, bool]:
    """A ``file:`` path without its quotes, and whether it was quoted."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] in QUOTES and raw[-1] == raw[0]:
        return raw[1:-1], True
    return raw, False


def cut_hint(err: RankCollapseError, text: str, end: int) -> RankCollapseError:
    """``err`` with the quoting hint when a ``file:`` path was cut at a special character and not found."""
    if end < len(text) and "not found" in str(err) and _QUOTE_HINT not in str(err):
        return RankCollapseError(f"{err}; {_QUOTE_HINT}")
    return err
MAX_NESTING = 64
PARSE_MEMO = 256
_memo: OrderedDict[str, Mask] = OrderedDict()
_memo_lock = threading.Lock()


def _allowed_families() -> str:
    return ", ".join(f.usage() for f in FAMILIES.values()) + ", file:PATH"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def error(self, what: str, allowed: str) -> RankCollapseError:
        text = quote(self.text)
        return RankCollapseError(f"bad mask spec {text}: {what} at position {self.pos}; {allowed}")

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
            if self.depth >= MAX_NESTING:
                raise self.error(f"parentheses nested deeper than {MAX_NESTING}", "allowed: at most "
                                 f"{MAX_NESTING} levels")
            self.pos += 1
            self.depth += 1
            inner = self.expr()
            if self.peek() != ")":
                got = repr(self.peek()) if self.peek() else "end of spec"
                raise self.error(f"missing ')' (got {got})", "parentheses must balance")
            self.pos += 1
            self.depth -= 1
            return inner
        if c in ("", "&", "|", ")"):
            got = repr(c) if c else "end of spec"
            raise self.error(f"expected a mask family, got {got}", f"allowed: {_allowed_families()}")
        return self.atom()

    def atom(self) -> Mask:
        start = self.pos
        self.pos = scan(self.text, self.pos, _OPERATORS)
        raw = self.text[start : self.pos].strip()
        name, sep, rest = raw.partition(":")
        name = name.strip()
        if name == "file":
            path, was_quoted = unquoted_path(rest)
            try:
                return FileMask(path)
            except RankCollapseError as err:
                raise (err if was_quoted else cut_hint(err, self.text, self.pos)) from None
        family = FAMILIES.get(name)
        if family is None:
            raise RankCollapseError(
                f"unknown mask family {quote(name, 40)} in {quote(self.text)}; "
                f"allowed: {', '.join(ALL_FAMILY_NAMES)}"
            )
        return family(**_parameters(family, name, sep, rest, raw))


def _parameters(family: type, name: str, sep: str, rest: str, raw: str) -> dict[str, str]:
    """``key=value`` items of an atom; bare items extend the list parameter before them."""
    values: dict[str, str] = {}
    if not sep:
        return values
    if not rest.strip():
        raise RankCollapseError(f"{name!r} has ':' but no parameters; usage: {family.usage()}")
    kinds = {p.name: p.kind for p in family.params}
    last = ""
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq and kinds.get(last) == "list" and key:
            values[last] += "," + key
            continue
        if not eq or not key or not value.strip():
            raise RankCollapseError(
                f"malformed parameter {quote(item.strip(), 40)} in {quote(raw)}; usage: {family.usage()}"
            )
        if key in values:
            msg = f"parameter {quote(key, 40)} given twice in {quote(raw)}; usage: {family.usage()}"
            raise RankCollapseError(msg)
        values[key] = value.strip()
        last = key
    return values


def parse_mask(spec: str | Mask | Callable[..., Any] | Any) -> Mask:
    """Parse a mask spec such as ``"causal&window:w=4"`` (a ``Mask`` passes through); a callable
    ``f(i, j)`` becomes a ``PredicateMask``, a boolean ``[N, N]`` tensor or array a ``TensorMask``
    (``masks/custom.py``: validated here, once).

    Raises ``RankCollapseError`` (one line naming the bad part, quoted and cut to 60 characters,
    and what is allowed) on an unknown family or parameter, a missing / negative / non-integer
    parameter, an unreadable ``file:`` matrix, or malformed ``&`` / ``|`` / parentheses.
    """
    if isinstance(spec, Mask):
        return spec
    if is_array(spec):
        return TensorMask(spec)
    if callable(spec) and not isinstance(spec, type):
        return PredicateMask(spec)
    if not isinstance(spec, str):
        raise RankCollapseError(f"mask must be a spec string, a Mask, a predicate f(i, j) or a bool [n, n] "
                                f"tensor, got {type(spec).__name__}")
    if spec.strip().startswith("<"):
        raise RankCollapseError(
            f"mask {quote(spec)} is the label of an in-memory mask (a predicate, a tensor or a matrix), "
            "not a spec; allowed: pass the object itself, or a spec"
        )
    memoise = "file" not in spec
    if memoise:
        with _memo_lock:
            if spec in _memo:
                _memo.move_to_end(spec)
                return _memo[spec]
    mask = _Parser(spec).parse()
    if memoise:
        with _memo_lock:
            mask = _memo.get(mask.spec, mask)  # one object per canonical spec
            _memo[spec] = _memo[mask.spec] = mask
            while len(_memo) > PARSE_MEMO:
                _memo.popitem(last=False)
    return mask
