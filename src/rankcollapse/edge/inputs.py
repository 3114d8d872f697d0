"""The one way the tool reads a user's file: regular files only, bounded, one line on any failure.

A path can name anything: a FIFO (an ``open`` blocks until a writer comes, forever), ``/dev/zero``
(a read never ends), a directory, a socket, a name over 255 bytes, a path under a regular file, a
disk that answers EIO. Every file the tool reads (``--text-file``, experiment YAML, ``mask file:``,
``--hf-config``, ``equilibria --value``, a model folder's ``config.json``) goes through
:func:`open_input`, which

- opens without blocking (``O_NONBLOCK``) and accepts only a regular file (links are followed:
  the file a link names must be regular), so a FIFO, a device, a directory or a socket is one line;
- refuses a file larger than the cap of its kind (:data:`LIMITS`, the number is in the message)
  and never reads more than the cap, whatever the file claims (``/proc`` files say size 0);
- turns every ``OSError`` into a :class:`~rankcollapse.edge.errors.RankCollapseError` naming the path
  and the errno text (``File name too long (ENAMETOOLONG)``).

On top: :func:`read_text`, :func:`read_json`, :func:`read_yaml` (a safe loader whose alias
expansion is bounded: a 500-byte "billion laughs" config is refused, not expanded),
:func:`read_table` (a CSV table whose header, row lengths and numeric cells are checked: a missing
column, a word in a number column or binary junk is one line naming the row and column) and
:func:`read_npy` (the header is checked, shape and dtype, before a byte of data is allocated; no
pickled object arrays).
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from rankcollapse.edge.errors import RankCollapseError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

#: Largest file read, per kind (bytes). A kind not listed gets ``DEFAULT_LIMIT``.
LIMITS: dict[str, int] = {
    "text file": 256 * MiB,  # analyze --text-file: far more text than any run samples
    "experiment config": 1 * MiB,  # reproduce --config-dir *.yaml
    "model config": 16 * MiB,  # config.json of a model folder, mask --hf-config
    "value file": 1 * MiB,  # equilibria --value: a d x d matrix, d <= 64
    "mask file": 64 * GiB,  # mask file:PATH.npy: n x n booleans; the memory check is the real bound
    "run file": 4 * GiB,  # reproduce's own per-run CSV / JSON files
    "run record": 16 * MiB,
}
DEFAULT_LIMIT = 64 * MiB
#: Most nodes a YAML document may expand to once its aliases are resolved.
YAML_MAX_NODES = 100_000
_CHUNK = 1 << 20


def quote_path(path: str | os.PathLike[str], limit: int = 80) -> str:
    """A path for an error line: quoted; a longer one is cut in the middle to ``limit`` characters
    (its start and its file name kept, the full length said)."""
    text = os.fsdecode(path)
    if len(text) <= limit:
        return repr(text)
    head = limit // 2
    tail = limit - head - 3
    return f"{text[:head] + '...' + text[-tail:]!r} ({len(text)} characters)"


def os_reason(err: OSError) -> str:
    """``File name too long (ENAMETOOLONG)``: the errno text and its symbolic name."""
    code = err.errno
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    text = err.strerror or (str(err).splitlines()[0][:120] if str(err) else type(err).__name__)
    return f"{text} ({name})" if name else text


def os_error(what: str, path: str | os.PathLike[str], err: OSError, verb: str = "read") -> RankCollapseError:
    """The one line for an ``OSError`` on ``path``:
    ``cannot read text file 'x': Permission denied (EACCES)``; a file written into a folder that does
    not exist: ``cannot write plot 'x/a.png': its folder does not exist (ENOENT)``."""
    if isinstance(err, FileNotFoundError):
        if verb == "write":
            return RankCollapseError(
                f"cannot write {what} {quote_path(path)}: its folder does not exist (ENOENT)"
            )
        return RankCollapseError(f"{what} {quote_path(path)} not found")
    if isinstance(err, NotADirectoryError):
        return RankCollapseError(
            f"cannot {verb} {what} {quote_path(path)}: a part of the path is a file, not a folder (ENOTDIR)"
        )
    return RankCollapseError(f"cannot {verb} {what} {quote_path(path)}: {os_reason(err)}")


_KINDS_OF_FILE = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """``a regular file``, ``a directory``, ``a FIFO (named pipe)``, ... for an ``st_mode``."""
    if stat.S_ISREG(mode):
        return "a regular file"
    for test, words in _KINDS_OF_FILE:
        if test(mode):
            return words
    return "not a regular file"


def limit_of(what: str, limit: int | None = None) -> int:
    return limit if limit is not None else LIMITS.get(what, DEFAULT_LIMIT)


def human_size(nbytes: float) -> str:
    """``256 MiB``, ``74.5 GiB``, ``512 B``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} B"


def _too_large(what: str, path: str | os.PathLike[str], size: str, cap: int) -> RankCollapseError:
    return RankCollapseError(
        f"{what} {quote_path(path)} is {size}; allowed: at most {human_size(cap)} ({cap} bytes) for a {what}"
    )


def open_input(path: str | os.PathLike[str], what: str, limit: int | None = None) -> IO[bytes]:
    """Open ``path`` for reading as a regular file of at most ``limit`` bytes (default: its kind's cap).

    Never blocks (the name is classified by ``stat`` before the open, which is ``O_NONBLOCK``, and the
    opened file checked again: a special file that would block a read says EAGAIN); refuses a directory, a
    device, a socket, a file over the cap; every ``OSError`` is one line naming the path and the
    errno. The returned binary file is positioned at 0; read it with :func:`read_bounded`.
    """
    cap = limit_of(what, limit)
    try:
        fspath = os.fspath(path)
    except TypeError:
        raise RankCollapseError(f"{what} must be a path, got {type(path).__name__}") from None
    if not str(fspath).strip():
        raise RankCollapseError(f"{what} must name a file, got ''")
    if "\x00" in str(fspath):
        raise RankCollapseError(f"{what} {quote_path(fspath)} contains a NUL character; allowed: a file path")
    try:
        before = os.stat(fspath)  # follows links; never blocks
    except OSError as err:
        raise os_error(what, fspath, err) from None
    if not stat.S_ISREG(before.st_mode):
        kind = file_kind(before.st_mode)
        raise RankCollapseError(f"{what} {quote_path(fspath)} is {kind}; allowed: a regular file")
    try:
        fd = os.open(fspath, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as err:
        raise os_error(what, fspath, err) from None
    try:
        info = os.fstat(fd)  # what was opened, not what the name pointed to a moment ago
        if not stat.S_ISREG(info.st_mode):
            raise RankCollapseError(
                f"{what} {quote_path(fspath)} is {file_kind(info.st_mode)}; allowed: a regular file"
            )
        if info.st_size > cap:
            raise _too_large(what, fspath, f"{human_size(info.st_size)} ({info.st_size} bytes)", cap)
    except BaseException:
        os.close(fd)
        raise
    fh = os.fdopen(fd, "rb", buffering=0)
    return _Bounded(fh, fspath, what, cap)


class _Bounded(io.RawIOBase):
    """A raw binary reader that raises (one line) once more than ``cap`` bytes have been read, and
    turns the ``OSError`` of a read (EIO, ...) into one line naming the path."""

    def __init__(self, raw: IO[bytes], path: str | os.PathLike[str], what: str, cap: int) -> None:
        super().__init__()
        self._raw, self.path, self.what, self.cap, self.count = raw, path, what, cap, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._raw.fileno()

    def tell(self) -> int:
        return self._raw.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def readinto(self, buffer: Any) -> int:
        try:
            n = self._raw.readinto(buffer)
        except OSError as err:
            raise os_error(self.what, self.path, err) from None
        n = n or 0
        self.count += n
        if self.tell() > self.cap:
            raise _too_large(self.what, self.path, "larger than its cap (it grew, or does not end)", self.cap)
        return n

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def read_bounded(fh: IO[bytes]) -> bytes:
    """Everything left in ``fh`` (an :func:`open_input` file): at most its cap, else one line."""
    chunks = []
    while True:
        chunk = fh.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def read_bytes(path: str | os.PathLike[str], what: str, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (see :func:`open_input`)."""
    with open_input(path, what, limit) as fh:
        return read_bounded(fh)


def read_text(path: str | os.PathLike[str], what: str, limit: int | None = None) -> str:
    """A UTF-8 text file (see :func:`open_input`); undecodable bytes are one line naming the offset."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RankCollapseError(
            f"{what} {quote_path(path)} is not UTF-8 text (byte {err.start} is 0x{data[err.start]:02x}); "
            "allowed: a UTF-8 text file"
        ) from None


def read_json(path: str | os.PathLike[str], what: str, limit: int | None = None) -> Any:
    """A JSON file (see :func:`read_text`); bad JSON and nesting too deep are one line."""
    text = read_text(path, what, limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise RankCollapseError(
            f"{what} {quote_path(path)} is not valid JSON ({err.msg} at line {err.lineno}, "
            f"column {err.colno})"
        ) from None
    except RecursionError:
        msg = f"{what} {quote_path(path)} is nested too deeply; allowed: plain JSON"
        raise RankCollapseError(msg) from None


def _yaml_loader() -> type:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def expanded_nodes(root: Any, limit: int) -> int:
    """How many nodes the YAML node graph ``root`` stands for once every alias is expanded (a node
    reached k times counts k times); stops counting past ``limit``. ``-1`` for a recursive alias."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1
            for child in _children(node, yaml):
                total += sizes[id(child)]
                if total > limit:
                    total = limit + 1
                    break
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_path:
            return -1
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node, yaml):
            if id(child) in on_path:
                return -1
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: Any, yaml: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def parse_yaml(text: str, where: str, max_nodes: int = YAML_MAX_NODES) -> Any:
    """YAML through the safe loader (no tags run), refusing a document whose aliases expand to more
    than ``max_nodes`` nodes, or refer to themselves. ``where`` names the source in messages."""
    import yaml

    loader = _yaml_loader()(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as err:
            reason = " ".join(str(err).split())[:160]
            raise RankCollapseError(f"{where} is not valid YAML ({reason})") from None
        except RecursionError:
            raise RankCollapseError(f"{where} is nested too deeply; allowed: plain YAML") from None
        if node is None:
            return None
        size = expanded_nodes(node, max_nodes)
        if size < 0:
            raise RankCollapseError(f"{where} has an alias that refers to itself; allowed: plain YAML")
        if size > max_nodes:
            raise RankCollapseError(
                f"{where} expands to more than {max_nodes} nodes through its aliases (&name / *name); "
                "allowed: a config that expands to fewer"
            )
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as err:
            reason = " ".join(str(err).split())[:160]
            raise RankCollapseError(f"{where} is not valid YAML ({reason})") from None
        except RecursionError:
            raise RankCollapseError(f"{where} is nested too deeply; allowed: plain YAML") from None
    finally:
        loader.dispose()


def read_yaml(path: str | os.PathLike[str], what: str = "experiment config", limit: int | None = None,
              max_nodes: int = YAML_MAX_NODES) -> Any:
    """A YAML file read through :func:`read_text` and :func:`parse_yaml` (bounded, safe)."""
    return parse_yaml(read_text(path, what, limit), f"{what} {quote_path(path)}", max_nodes)


def _cell(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def read_table(path: str | os.PathLike[str], what: str, *, required: Sequence[str] = (),
               integer: Sequence[str] = (), numeric: Callable[[str], bool] | None = None,
               limit: int | None = None,
               parse: Callable[[str], Callable[[str], Any]] | None = None) -> list[dict[str, Any]]:
    """A CSV table (header row, then ``k >= 1`` rows) read through :func:`read_text`, checked before any
    cell is used: every ``required`` column present, no column named twice, every row as many cells as
    the header, the cells of ``integer`` columns whole numbers ``>= 0`` (``0``, ``12``), the cells of a
    column ``numeric(name)`` accepts real numbers (``1.5e-3``, ``nan``, ``inf``) or empty (not measured).

    Returns the rows as ``{column: cell}`` (strings, as ``csv.DictReader`` gives them), or, with
    ``parse``, as ``{column: parse(column)(cell)}``: ``parse(column)`` is the column's parser (it may
    raise a one-line RankCollapseError for a column it does not know), raising ``ValueError(allowed)``
    for a cell it refuses (:class:`rankcollapse.edge.schema.Table` reads its files so). A file that is
    not one is one line naming the file and, for a bad cell, its line, column and text:
    ``metrics table 'run/metrics.csv': line 3, column 'mu' is 'abc'; allowed: a number``.
    """
    text = read_text(path, what, limit)
    shown = f"{what} {quote_path(path)}"
    try:
        lines = csv.reader(io.StringIO(text, newline=""))
        header = next(lines, None)
        if header is None:
            raise RankCollapseError(f"{shown} is empty; allowed: a CSV table with a header row and rows")
        body = [(lines.line_num, row) for row in lines if row]
    except csv.Error as err:
        where = f"line {lines.line_num}"
        why = (f"a cell longer than {csv.field_size_limit()} characters" if "field limit" in str(err)
               else "a quote that does not close" if "EOF" in str(err) else "malformed CSV")
        raise RankCollapseError(f"{shown} is not a CSV table ({where}: {why})") from None
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise RankCollapseError(f"{shown} names column {_cell(twice[0])} twice; allowed: each column once")
    missing = [c for c in required if c not in header]
    if missing:
        got = ", ".join(_cell(c) for c in header[:6]) + (", ..." if len(header) > 6 else "")
        raise RankCollapseError(
            f"{shown} has no column {', '.join(missing)} (its header: {got or 'empty'}); "
            f"allowed: a table with columns {', '.join(required)}"
        )
    if not body:
        raise RankCollapseError(f"{shown} has a header but no rows; allowed: at least one row")
    ints = [k for k, c in enumerate(header) if c in integer]
    reals = [k for k, c in enumerate(header) if c not in integer and numeric is not None and numeric(c)]
    parsers = [parse(c) for c in header] if parse is not None else None
    rows = []
    for line, row in body:
        if len(row) != len(header):
            raise RankCollapseError(
                f"{shown}: line {line} has {len(row)} cells, its header {len(header)}; "
                "allowed: one cell per column"
            )
        for k in ints:
            cell = row[k].strip()
            if not (cell.isascii() and cell.isdigit() and len(cell) <= 18):
                raise RankCollapseError(
                    f"{shown}: line {line}, column {_cell(header[k])} is {_cell(row[k])}; "
                    "allowed: a whole number >= 0"
                )
        for k in reals:
            cell = row[k].strip()
            if cell and not _is_number(cell):
                raise RankCollapseError(
                    f"{shown}: line {line}, column {_cell(header[k])} is {_cell(row[k])}; "
                    "allowed: a number (or empty)"
                )
        if parsers is not None:
            values = []
            for k, cell in enumerate(row):
                try:
                    values.append(parsers[k](cell))
                except ValueError as why:
                    raise RankCollapseError(
                        f"{shown}: line {line}, column {_cell(header[k])} is {_cell(cell)}; allowed: {why}"
                    ) from None
            rows.append(dict(zip(header, values, strict=True)))
            continue
        rows.append(dict(zip(header, row, strict=True)))
    return rows


def _is_number(cell: str) -> bool:
    if not cell.isascii():  # float() also reads '١٢' and '１２'
        return False
    try:
        float(cell)
    except ValueError:
        return False
    return True


#: ``check(shape, dtype)`` called on a .npy header before its data is read; raises to refuse.
HeaderCheck = Callable[[tuple[int, ...], Any], None]


def npy_header(fh: IO[bytes], path: str | os.PathLike[str], what: str) -> tuple[tuple[int, ...], bool, Any]:
    """(shape, fortran_order, dtype) of the .npy file ``fh`` (positioned at 0); one line if it is none."""
    import numpy as np

    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except RankCollapseError:
        raise
    except (ValueError, EOFError, SyntaxError, TypeError) as err:
        reason = " ".join(str(err).split())[:100] or type(err).__name__
        raise RankCollapseError(
            f"{what} {quote_path(path)} is not a .npy array ({reason}); allowed: numpy.save output"
        ) from None
    if any(int(s) < 0 for s in shape):
        raise RankCollapseError(f"{what} {quote_path(path)} claims a negative shape {tuple(shape)}")
    return tuple(int(s) for s in shape), bool(fortran), dtype


def read_npy(path: str | os.PathLike[str], what: str, check: HeaderCheck | None = None,
             max_bytes: int | None = None,
             reserve: Callable[[tuple[int, ...], int], None] | None = None) -> Any:
    """A .npy array whose header is checked before any data is allocated.

    Refused with one line: a non-regular file, object (pickled) arrays, whatever
    ``check(shape, dtype)`` raises for, a header claiming more than ``max_bytes`` of data (default:
    the kind's cap) or more data than the file holds, and whatever ``reserve(shape, nbytes)`` (a
    memory check, called last, just before the allocation) raises for. Pickles are never loaded. The
    array comes back in the machine's byte order (torch reads no other: a big-endian file was a
    ValueError traceback).
    """
    import numpy as np

    with open_input(path, what, None if max_bytes is None else max_bytes + 4096) as fh:
        shape, fortran, dtype = npy_header(fh, path, what)
        if dtype.hasobject:
            raise RankCollapseError(
                f"{what} {quote_path(path)} holds Python objects (a pickle); allowed: a numeric array"
            )
        if check is not None:
            check(shape, dtype)
        count = math.prod(shape)
        need = count * dtype.itemsize
        cap = limit_of(what, max_bytes)
        if need > cap:
            raise RankCollapseError(
                f"{what} {quote_path(path)} claims shape {shape} of {dtype} ({human_size(need)}); "
                f"allowed: at most {human_size(cap)}"
            )
        have = os.fstat(fh.fileno()).st_size - fh.tell()
        if have < need:
            raise RankCollapseError(
                f"{what} {quote_path(path)} claims shape {shape} ({human_size(need)}) but holds "
                f"{human_size(max(have, 0))} of data; allowed: an intact numpy.save file"
            )
        if reserve is not None:
            reserve(shape, need)
        array = np.empty(count, dtype=dtype)
        view, got = memoryview(array.view(np.uint8)), 0
        while got < need:
            n = fh.readinto(view[got:])
            if not n:
                raise RankCollapseError(
                    f"{what} {quote_path(path)} ended early; allowed: an intact numpy.save file"
                )
            got += n
    if not dtype.isnative:  # a big-endian file on a little-endian machine: the values, in native order
        array = array.astype(dtype.newbyteorder("="))
    if fortran:
        return array.reshape(shape[::-1]).transpose().copy()
    return array.reshape(shape)


def check_folder(path: str | os.PathLike[str], what: str) -> Path:
    """An existing folder to list (``--config-dir``): one line if it is missing, a file, or unreadable."""
    if "\x00" in os.fspath(path):
        raise RankCollapseError(f"{what} {quote_path(path)} contains a NUL character; allowed: a folder path")
    try:
        info = os.stat(path)
    except OSError as err:
        raise os_error(what, path, err) from None
    if not stat.S_ISDIR(info.st_mode):
        raise RankCollapseError(f"{what} {quote_path(path)} is {file_kind(info.st_mode)}; allowed: a folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise RankCollapseError(f"cannot read {what} {quote_path(path)}: Permission denied (EACCES)")
    return Path(path)


def error_line(err: BaseException) -> str:
    """One line for an error: a RankCollapseError's message; an OSError's errno text and name and its path
    (:func:`os_reason`, :func:`quote_path`); else ``Type: first line`` (cut at 200). A library's
    multi-line text (transformers' load tables, Dask's and torch's reports, notes added to an exception)
    never gets past its first line."""
    text = (str(err).strip().splitlines() or [""])[0][:200]
    if isinstance(err, RankCollapseError):
        return text
    if isinstance(err, OSError) and err.strerror:
        where = f" {quote_path(err.filename)}" if err.filename else ""
        return f"{type(err).__name__}: {os_reason(err)}{where}"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
