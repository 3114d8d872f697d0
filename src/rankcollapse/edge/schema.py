"""One declaration per file a run writes, used by its writer and by its reader.

A :class:`Table` (a CSV file) says, per column, what its cells hold (:data:`KINDS`); its writer turns each
value into a cell through the declaration and refuses a value the declaration does not allow (a
``ValueError`` naming the file, the column and the value: a bug of the writer, found when it writes, not
when a reader meets the file), and its reader parses each cell through the same declaration (a
:class:`~rankcollapse.edge.errors.RankCollapseError`, one line naming the file, line and column, for a
file that is not one). A column the table does not name takes its ``default`` kind. So a cell that one
writes and the other refuses cannot exist: both read the one declaration.

A :class:`Record` (a JSON file) names the keys a reader reads, each with its kind, at a path of keys
(``config.analyze.mode``); an :class:`Array` (a ``.npy`` file) its dtype and dimensions.

Kinds (a cell's text, the value written, the value read):

======== ===================================== ===================================== ====================
kind     cell                                  written from                          read as
======== ===================================== ===================================== ====================
number   a real number (``nan``, ``inf``)      int, float, bool                      float
count    a whole number >= 0                   int (not bool)                        int
word     any one-line text (may be empty)      str                                   str
counts   whole numbers >= 0, space-separated   a sequence of ints, or that text      tuple of ints
======== ===================================== ===================================== ====================

Every cell of a column declared ``optional`` may also be empty (written from None or ``""``, read as None).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rankcollapse.edge.errors import RankCollapseError

Kind = Literal["number", "count", "word", "counts"]
#: What each kind allows, in the words of a refusal (``...; allowed: a number``).
KINDS: dict[str, str] = {
    "number": "a number",
    "count": "a whole number >= 0",
    "word": "one line of text",
    "counts": "whole numbers >= 0 separated by spaces (or nothing)",
}


@dataclass(frozen=True)
class Column:
    """One column, or a family of them: ``name`` may hold ``{k}`` for an index (``first_token_attention_h{k}``
    is ``first_token_attention_h0``, ``_h1``, ...). ``optional``: a cell may be empty (None)."""

    name: str
    kind: Kind
    meaning: str = ""
    optional: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: kind {self.kind!r} is not one of {tuple(KINDS)}")

    def matches(self, column: str) -> bool:
        if "{k}" not in self.name:
            return column == self.name
        pattern = r"\d+".join(re.escape(p) for p in self.name.split("{k}"))
        return re.fullmatch(pattern, column) is not None


def _is_count_text(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 18


def _number_text(text: str) -> float:
    if not text.isascii():  # float() also reads '١٢' and '１２'
        raise ValueError(text)
    return float(text)


def cell_text(kind: Kind, value: Any) -> str:
    """The cell of ``value`` under ``kind``; ``ValueError`` (its reason: what is allowed) if it has none."""
    if kind == "number":
        if isinstance(value, int | float):  # bool included: 1.0 / 0.0
            return repr(float(value))
        item = getattr(value, "item", None)  # a numpy / torch scalar
        if callable(item) and getattr(value, "ndim", 1) == 0:
            return cell_text(kind, item())
    elif kind == "count":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return str(value)
    elif kind == "word":
        if isinstance(value, str) and "\n" not in value and "\r" not in value:
            return value
    elif kind == "counts":
        if isinstance(value, str):
            parts = value.split()
            if all(_is_count_text(p) for p in parts) and " ".join(parts) == value:
                return value
        elif isinstance(value, Iterable):
            items = list(value)
            if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in items):
                return " ".join(str(v) for v in items)
    raise ValueError(KINDS[kind])


def cell_value(kind: Kind, text: str) -> Any:
    """The value of a cell under ``kind``; ``ValueError`` (its reason) if the cell is not one."""
    if kind == "number":
        return _number_text(text.strip())
    if kind == "count":
        if not _is_count_text(text.strip()):
            raise ValueError(KINDS[kind])
        return int(text)
    if kind == "word":
        return text
    parts = text.split()
    if not all(_is_count_text(p) for p in parts):
        raise ValueError(KINDS[kind])
    return tuple(int(p) for p in parts)


@dataclass(frozen=True)
class Table:
    """A CSV file a run writes: its ``name`` (``metrics.csv``), what a message calls it (``metrics
    table``), its declared ``columns``, the kind of any other column (``default``; None: a column the
    table does not name is refused), the columns every file of it has (``required``) and a size cap
    for its reader (``limit`` bytes; None: the opener's default)."""

    name: str
    what: str
    columns: tuple[Column, ...]
    default: Column | None = None
    required: tuple[str, ...] = ()
    limit: int | None = None

    def column(self, name: str) -> Column:
        """The declaration of column ``name``; ``ValueError`` if the table has none for it."""
        for col in self.columns:
            if col.matches(name):
                return col
        if self.default is not None:
            return self.default
        raise ValueError(f"{self.name} declares no column {name!r}; declare it in its Table")

    def cell(self, name: str, value: Any) -> str:
        """The cell of ``value`` in column ``name``; ``ValueError`` naming the file, column and value if
        the declaration does not allow it (the writer's bug: the reader would refuse the file)."""
        col = self.column(name)
        if col.optional and (value is None or value == ""):
            return ""
        try:
            return cell_text(col.kind, value)
        except ValueError as why:
            shown = repr(value)[:60]
            raise ValueError(f"{self.name}: column {name!r} cannot hold {shown}; allowed: {why}"
                             + ("" if not col.optional else " (or None)")) from None

    def row(self, row: Mapping[str, Any]) -> dict[str, str]:
        """A row as its cells, every column through :meth:`cell`."""
        return {str(k): self.cell(str(k), v) for k, v in row.items()}

    def value(self, name: str, value: Any) -> Any:
        """What :meth:`read` gives back for ``value`` written in column ``name`` (written, then parsed)."""
        col = self.column(name)
        text = self.cell(name, value)
        return None if text == "" and col.optional else cell_value(col.kind, text)

    def parse(self, name: str, text: str) -> Any:
        """The value of one cell of column ``name`` (``ValueError`` with what is allowed, else)."""
        col = self.column(name)
        if col.optional and text.strip() == "":
            return None
        try:
            return cell_value(col.kind, text)
        except ValueError:
            raise ValueError(KINDS[col.kind] + (" (or empty)" if col.optional else "")) from None

    def read(self, path: str | Path, required: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The rows of the file ``path``, each cell parsed through the declaration; one line
        (RankCollapseError) for a file that is not such a table: a structure ``read_table`` refuses, a
        column the table does not declare, a cell its column does not allow (naming line and column).
        ``required``: columns this reader needs besides the table's own."""
        from rankcollapse.edge.inputs import quote_path, read_table

        def parse(name: str) -> Callable[[str], Any]:
            try:
                self.column(name)
            except ValueError:
                raise RankCollapseError(f"{self.what} {quote_path(path)} has a column {name!r} that no "
                                        f"{self.name} has; allowed: the columns of its declaration") from None
            return lambda text: self.parse(name, text)

        need = tuple(dict.fromkeys((*self.required, *required)))
        return read_table(path, self.what, required=need, parse=parse, limit=self.limit)


def write_rows(table: Table, rows: Sequence[Mapping[str, Any]]) -> str:
    """The CSV text of ``rows`` (header from the first row) through ``table``'s declaration."""
    import csv
    import io

    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=[str(k) for k in rows[0]])
        writer.writeheader()
        writer.writerows(table.row(r) for r in rows)
    return buf.getvalue()


#: What a key of a :class:`Record` holds: the Python types its value may have.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "number": (int, float),
    "count": (int,),
    "flag": (bool,),
    "mapping": (dict,),
    "list": (list,),
}


@dataclass(frozen=True)
class Field:
    """A key a reader reads, at a dotted path (``config.analyze.mode``), with what it holds
    (:data:`FIELD_TYPES`); ``optional``: it may be absent or null."""

    path: str
    kind: str
    optional: bool = False

    def __post_init__(self) -> None:
        if self.kind not in FIELD_TYPES:
            raise ValueError(f"field {self.path!r}: kind {self.kind!r} is not one of {tuple(FIELD_TYPES)}")

    def problem(self, record: Any) -> str | None:
        """What is wrong with this field in ``record`` (None: nothing)."""
        value: Any = record
        for key in self.path.split("."):
            if not isinstance(value, dict) or key not in value:
                return None if self.optional else "is missing"
            value = value[key]
        if value is None and self.optional:
            return None
        types = FIELD_TYPES[self.kind]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            return f"is {type(value).__name__}, allowed: {self.kind}"
        return None


@dataclass(frozen=True)
class Record:
    """A JSON file a run writes: its ``name``, what a message calls it, and the fields its readers read.
    ``one_of``: top-level paths of which exactly one must be present (``config.analyze`` or
    ``config.simulate``: whose record it is)."""

    name: str
    what: str
    fields: tuple[Field, ...]
    one_of: tuple[str, ...] = ()

    def problems(self, record: Any) -> list[str]:
        """Each field that is not as declared, as ``<path> <what is wrong>``."""
        if not isinstance(record, dict):
            return [f"the file holds {type(record).__name__}, allowed: an object"]
        out = [f"{f.path} {why}" for f in self.fields if (why := f.problem(record)) is not None]
        if self.one_of:
            given = [p for p in self.one_of if Field(p, "mapping").problem(record) is None]
            if len(given) != 1:
                out.append(f"needs exactly one of {', '.join(self.one_of)} (has {len(given)})")
        return out

    def check(self, record: Any) -> Any:
        """``record`` if it is as declared; ``ValueError`` (the writer's bug) else."""
        problems = self.problems(record)
        if problems:
            raise ValueError(f"{self.name}: {problems[0]}")
        return record

    def read(self, path: str | Path) -> dict[str, Any]:
        """The JSON file ``path``, checked against the declaration (one line naming the first field
        that is not as declared)."""
        from rankcollapse.edge.inputs import quote_path, read_json

        record = read_json(path, self.what)
        problems = self.problems(record)
        if problems:
            raise RankCollapseError(f"{self.what} {quote_path(path)}: {problems[0]}; allowed: a {self.name} "
                                    "as rankcollapse writes it")
        return record


@dataclass(frozen=True)
class Array:
    """A ``.npy`` file a run writes: its name (``{k}`` for an index), what a message calls it, its dtype
    and number of dimensions (``dims``: their letters, ``"b h i j"``)."""

    name: str
    what: str
    dtype: str
    dims: str

    def matches(self, name: str) -> bool:
        return Column(self.name, "word").matches(name)

    def check(self, array: Any) -> Any:
        """``array`` if it is as declared; ``ValueError`` (the writer's bug) else."""
        if str(array.dtype) != self.dtype or array.ndim != len(self.dims.split()):
            raise ValueError(f"{self.name}: {array.dtype} [{array.ndim} dims]; allowed: {self.dtype} "
                             f"[{self.dims}]")
        return array

    def read(self, path: str | Path) -> Any:
        """The array in ``path`` (its header checked before its data is read: dtype and dimensions)."""
        from rankcollapse.edge.inputs import quote_path, read_npy

        def header(shape: tuple[int, ...], dtype: Any) -> None:
            if str(dtype) != self.dtype or len(shape) != len(self.dims.split()):
                raise RankCollapseError(f"{self.what} {quote_path(path)}: {dtype} of shape {shape}; allowed: "
                                        f"{self.dtype} [{self.dims}]")

        return read_npy(path, self.what, check=header)
