"""The one output layer every command's folder goes through.

:class:`OutputFolder`: one command's claim on its output folder. A marker file (``.rankcollapse.json``)
says the folder is ours and which command made it; a non-empty folder without it (or another
command's) is refused with one line; one writer at a time (:class:`OutputLock`, an ``flock`` on
``.lock`` opened with ``O_NOFOLLOW``, removed when the writer is done: :func:`lock_file`); the marker
says ``complete: true`` only once everything is written, so a half-written run is never mistaken for a
finished one. :func:`check_output_folder` is the
same check without writing anything (commands call it before loading a model, so a read-only or foreign
``--out`` is found at once).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import stat
import time
import uuid
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any, Literal

from rankcollapse.edge.atomic import (
    LinkRefusedError,
    refuse_link,
    write_json,
)
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import os_error, quote_path
from rankcollapse.edge.validate import quote

LOCK_NAME = ".lock"
MARKER_NAME = ".rankcollapse.json"
#: Entries an output folder may hold that are the layer's own, not a run's results.
SCAFFOLD = frozenset({LOCK_NAME, MARKER_NAME})
#: The marker's format: 2 lists what the run wrote (its manifest, ``files``); before it, every entry.
MARKER_FORMAT = 2
#: A run's staging folder inside its output folder: ``.rankcollapse.staging.<pid>.<hex>.tmp``.
STAGING_NAME = "rankcollapse.staging"
#: What an earlier finished run of the same command in the folder gets: ``refuse`` (the rule: a run
#: never replaces another silently; the CLI's ``--overwrite``, Python's ``overwrite=True``, turns it into
#: ``replace``), ``replace`` or ``resume`` (kept and added to in place: reproduce).
Existing = Literal["refuse", "replace", "resume"]

#: How a caller replaces an earlier finished run, by the option that named the folder: a command's
#: ``--out`` (``--overwrite``), ``write_run``'s ``out_dir`` (``overwrite=True``); none for another.
_REPLACE = {"out_dir": "overwrite=True"}

#: A temporary of this layer: ``.NAME.<pid>.<12 hex>.tmp`` (:func:`temporary_sibling`, a staging folder).
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]{1,10})\.(?P<tag>[0-9a-f]{12})\.tmp")


def temporary_owner(name: str) -> int | None:
    """The pid in the name of one of this layer's temporaries (``.NAME.<pid>.<hex>.tmp``), else None."""
    found = _TEMPORARY.fullmatch(name)
    return int(found["pid"]) if found else None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts; a pid that cannot exist does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, ValueError):
        return False
    except OSError:  # EPERM: alive, someone else's
        return True
    return True


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Remove, anywhere under ``folder``, this layer's temporaries whose process is gone: the
    ``.NAME.<pid>.<hex>.tmp`` files of :func:`atomic_path` and the staging folders of
    :class:`OutputFolder` that a ``kill -9`` left. A live process's temporaries are kept; links are
    never followed (a link with such a name is removed as a link). Returns what was removed.

    :class:`OutputLock` calls it once it holds a folder's lock, so the next writer clears the litter.
    """
    removed: list[Path] = []
    for top, dirs, files in os.walk(folder):
        for name in (*files, *dirs):
            pid = temporary_owner(name)
            if pid is None or pid == os.getpid() or pid_alive(pid):
                continue
            path = Path(top) / name
            try:
                if _is_real_dir(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError:
                continue
            removed.append(path)
        dirs[:] = [d for d in dirs if temporary_owner(d) is None]  # never into a live run's staging
    return removed


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _is_real_dir(path: Path) -> bool:
    """A folder that is not a symbolic link."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_marker(folder: str | Path) -> dict[str, Any] | None:
    """The marker of an output folder (``.rankcollapse.json``), or None if it has none (or a bad one)."""
    path = Path(folder) / MARKER_NAME
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
            return None
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("command"), str) else None


def _entries(value: Any) -> list[str]:
    """The relative paths in a marker's list (read from a file anyone may write): each a plain path
    inside the folder, never absolute, never ``..``, never the layer's own files."""
    found: list[str] = []
    for item in value if isinstance(value, list) else ():
        if not isinstance(item, str) or not item or "\x00" in item or "\\" in item:
            continue
        parts = PurePosixPath(item).parts
        if item.startswith("/") or any(p in ("", ".", "..") for p in parts) or _is_scaffold(parts[0]):
            continue
        found.append(str(PurePosixPath(*parts)))
    return found


#: The keys every run record of a reproduce store has (``experiments.engine.store``): a folder is ours by
#: its content, never by the shape ``runs/<x>/<y>.json`` alone (common in ML projects).
RUN_RECORD_KEYS = frozenset({"run_id", "experiment", "task", "params", "status", "csv_sha256"})


def _first(paths: Any, k: int) -> list[Path]:
    out = []
    for p in paths:
        out.append(p)
        if len(out) >= k:
            break
    return out


def _is_run_record(path: Path) -> bool:
    """Whether ``path`` is a reproduce run record (a small regular JSON file with our record's keys)."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 1 << 20:
            return False
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and RUN_RECORD_KEYS <= set(record)


def _legacy_owner(folder: Path) -> str | None:
    """The command that wrote a folder made before markers existed (its own layout), or None.

    reproduce: a run store (``runs/<experiment>/<run>.json`` holding our run records:
    :data:`RUN_RECORD_KEYS`), or ``runs/`` beside its ``.lock``;
    simulate and analyze: a ``config.json`` holding a RunWriter record (``config``, ``versions``,
    ``command``).
    """
    runs = folder / "runs"
    if _is_dir(runs) and not runs.is_symlink():
        if (folder / LOCK_NAME).is_file() or any(_is_run_record(p) for p in _first(runs.glob("*/*.json"), 8)):
            return "reproduce"
    cfg = folder / "config.json"
    try:
        if cfg.is_file() and not cfg.is_symlink() and cfg.stat().st_size < 1 << 20:
            record = json.loads(cfg.read_bytes())
            if isinstance(record, dict) and {"config", "versions", "command"} <= set(record):
                inner = record["config"]
                if isinstance(inner, dict) and len(inner) >= 1:
                    key = next(iter(inner))
                    return key if key in ("simulate", "analyze") else None
    except (OSError, ValueError):
        return None
    return None


def _is_scaffold(name: str) -> bool:
    """The layer's own entries: the lock, the marker, a marker being written (its temporary, which a
    second process may see while the first holds the lock and has not renamed it yet), and a run's
    staging folder."""
    if name in SCAFFOLD or any(name.startswith(f".{s}.") and name.endswith(".tmp") for s in SCAFFOLD):
        return True
    return name.startswith(f".{STAGING_NAME}.") and temporary_owner(name) is not None


def folder_owner(folder: str | Path) -> str | None:
    """Which rankcollapse command made ``folder`` (its marker, else its legacy layout), or None."""
    marker = read_marker(folder)
    if marker is not None:
        return str(marker["command"])
    return _legacy_owner(Path(folder))


def holds_finished_run(folder: str | Path) -> bool:
    """Whether ``folder`` holds a finished run that a new one would replace: its marker says
    ``complete: true``, or it is a run folder made before markers. An interrupted run's leftovers
    (marker ``complete: false``) are not one."""
    marker = read_marker(folder)
    if marker is not None:
        return marker.get("complete") is True
    return _legacy_owner(Path(folder)) is not None


def _existing_parent(path: Path) -> Path:
    for parent in path.absolute().parents:
        if os.path.lexists(parent):
            return parent
    return Path("/")


def interrupted_rows(folder: str | Path) -> list[str]:
    """The partial files an interrupted run left in ``folder`` with something in them (its marker says
    ``complete: false`` and lists them as ``scratch``): rows measured and never published."""
    marker = read_marker(folder)
    if marker is None or marker.get("complete") is True:
        return []
    out = []
    for name in _entries(marker.get("scratch")):
        path = Path(folder) / name
        try:
            if "/" not in name and path.is_file() and not path.is_symlink() and path.stat().st_size > 0:
                out.append(name)
        except OSError:
            continue
    return out


def in_use_hint(option: str) -> str:
    """What to do about a folder another writer holds, in the words of who named it: a command's option
    (``--out``, ``--wait``), or a Python argument (``out``: a writer of this process not closed holds it)."""
    if not option.isidentifier():  # ``--out``, or the layer's own words: a command's
        return "wait for it (--wait where offered) or choose another --out"
    return (f"wait for it, close() the earlier writer if it is this process's (a Monitor not closed keeps "
            f"its folder), or give {option}= another folder")


def _running_pid(folder: str | Path) -> int | None:
    """The pid of the live writer the folder's marker names (``running``) while the folder's lock file
    exists (it exists only while held: a dead writer's pid reused by another process is not one), else
    None."""
    if not os.path.lexists(Path(folder) / LOCK_NAME):
        return None
    running = (read_marker(folder) or {}).get("running")
    pid = running.get("pid") if isinstance(running, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid_alive(pid) else None


def check_output_folder(
    path: str | Path, command: str, *, option: str = "--out", existing: Existing = "refuse",
    keep_interrupted: bool = False,
) -> Path:
    """Check, writing nothing, that ``command`` may write the folder ``path``; return it as a Path.

    Allowed: a new folder (under an existing, writable folder), an empty one, or one this command
    made (its marker, or its layout before markers), under ``existing``'s rule (``refuse``: an earlier
    finished run there is refused, naming ``--overwrite``; an interrupted one is not, unless
    ``keep_interrupted``: rows that cannot be measured again, a training's telemetry, are never removed
    by the next run, and their folder is refused). Refused with one line: a file, a path under a file,
    an unwritable folder, a non-empty folder rankcollapse did not make, another command's folder, and a
    folder whose entries include a symbolic link.
    """
    text = os.fspath(path) if path is not None else ""
    if not str(text).strip():
        raise RankCollapseError(f"{option} must name a folder, got ''")
    folder = Path(text)
    if "\x00" in str(text):
        msg = f"{option} {quote_path(folder)} contains a NUL character; allowed: a folder path"
        raise RankCollapseError(msg)
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        info = None
    except OSError as err:
        raise os_error(option, folder, err, verb="use") from None
    if info is None:
        if folder.is_symlink():
            msg = f"{option} {quote_path(folder)} is a dangling symbolic link; allowed: a folder"
            raise RankCollapseError(msg)
        parent = _existing_parent(folder)
        try:
            pinfo = os.stat(parent)
        except OSError as err:
            raise os_error(option, folder, err, verb="use") from None
        if not stat.S_ISDIR(pinfo.st_mode):
            raise RankCollapseError(
                f"{option} {quote_path(folder)} lies under a file ({quote_path(parent)}); "
                "allowed: a folder path"
            )
        if not os.access(parent, os.W_OK | os.X_OK):
            raise RankCollapseError(
                f"cannot write {option} {quote_path(folder)}: folder {quote_path(parent)} is not writable"
            )
        return folder
    if not stat.S_ISDIR(info.st_mode):
        raise RankCollapseError(f"{option} {quote_path(folder)} is a file; allowed: a folder (new or empty)")
    try:
        entries = os.listdir(folder)
    except OSError as err:
        raise os_error(option, folder, err, verb="list") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RankCollapseError(f"cannot write {option} {quote_path(folder)}: the folder is not writable")
    links = sorted(e for e in entries if (folder / e).is_symlink())
    if links:
        raise LinkRefusedError(
            f"{option} {quote_path(folder)} holds a symbolic link ({quote_path(links[0], 40)}); rankcollapse "
            "never writes through a link (remove it, or choose another folder)"
        )
    if all(_is_scaffold(e) for e in entries):
        return folder
    owner = folder_owner(folder)
    if owner is None:
        raise RankCollapseError(
            f"{option} {quote_path(folder)} is a non-empty folder that rankcollapse did not make (no "
            f"{MARKER_NAME}); allowed: a new or empty folder, or one an earlier "
            f"'rankcollapse {command}' wrote"
        )
    if owner != command:
        raise RankCollapseError(
            f"{option} {quote_path(folder)} holds the output of {quote(f'rankcollapse {owner}')}; allowed: "
            f"a new or empty folder, or one an earlier 'rankcollapse {command}' wrote"
        )
    left = interrupted_rows(folder) if keep_interrupted else []
    holder = _running_pid(folder) if left else None
    if holder is not None:  # a live writer's rows, not an interrupted run's
        raise RankCollapseError(f"{option} {quote_path(folder)} is in use by process {holder}; "
                                f"{in_use_hint(option)}")
    if left:
        raise RankCollapseError(
            f"{option} {quote_path(folder)} holds the rows of an interrupted {command} run "
            f"({', '.join(left)}); they cannot be measured again: move them away or choose another folder "
            "(nothing was removed)"
        )
    if existing == "refuse" and holds_finished_run(folder):
        how = _REPLACE.get(option, "--overwrite" if option.startswith("--") else "")
        raise RankCollapseError(
            f"{option} {quote_path(folder)} holds an earlier finished {command} run; "
            + (f"pass {how} to replace it" if how else "choose another folder")
            + " (a run never replaces another silently)"
        )
    return folder



#: Tries of :func:`lock_file` before it gives up (each lost only to a holder that removed the file).
_LOCK_TRIES = 1000


def _same_file(path: Path, info: os.stat_result) -> bool:
    """Whether ``path`` (not followed) is still the file ``info`` describes."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def lock_file(path: Path, *, wait: bool = False, what: str = "", hint: str = "") -> int:
    """An exclusive ``flock`` on the file ``path`` (created if missing), its holder's pid written into it;
    the open descriptor (give it back with :func:`unlock_file`).

    The file exists only while someone holds it: :func:`unlock_file` removes it *before* dropping the
    lock. One holder is kept by checking, once the lock is granted, that ``path`` still names the
    locked file: a process that opened the file, then waited while the holder removed it and let go,
    holds a lock on a file nobody else can open any more, so it lets go and tries again on the new one.
    The file is opened with ``O_NOFOLLOW`` and without ``O_TRUNC`` and must be a regular file with no
    other hard link: a planted link or FIFO is refused, never truncated or written. Without ``wait`` a
    lock held by another process is one line naming ``what`` and the holder's pid, then ``hint``."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(_LOCK_TRIES):
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise LinkRefusedError(
                    f"lock file {quote_path(path)} is a symbolic link; rankcollapse never writes through a "
                    "link (remove it)"
                ) from None
            raise os_error("output folder", path.parent, err, verb="write into") from None
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 0:  # removed since we opened it: again
                os.close(fd)
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                kind = "has another hard link" if stat.S_ISREG(info.st_mode) else "is not a regular file"
                raise RankCollapseError(f"lock file {quote_path(path)} {kind}; remove it")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                text = os.pread(fd, 32, 0).decode(errors="replace").strip()
                # a pid, or whatever a stranger wrote there: quoted, so no control byte reaches a terminal
                holder = text if text.isdigit() else quote(text or "unknown")
                then = f"; {hint}" if hint else ""
                who = what or quote_path(path)
                raise RankCollapseError(f"{who} is in use by process {holder}{then}") from None
            if not _same_file(path, info):  # the holder we waited for removed it: lock the new one
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as err:
            os.close(fd)
            raise os_error("lock file", path, err, verb="write") from None
        except BaseException:
            os.close(fd)
            raise
        return fd
    raise RankCollapseError(f"lock file {quote_path(path)} keeps being replaced; try again")


def unlock_file(fd: int, path: Path) -> None:
    """Remove the lock file ``path`` if it is still the one ``fd`` holds, then drop the lock (close)."""
    try:
        if _same_file(path, os.fstat(fd)):
            os.unlink(path)
    except OSError:
        pass  # a folder that went read-only keeps its lock file; the lock itself still goes
    finally:
        os.close(fd)


class OutputLock:
    """One writer per folder: an exclusive ``flock`` on ``DIR/.lock`` held while writing.

    The holder writes its pid into the file; a second process either fails at once with one line
    naming that pid (``RankCollapseError``, exit 2 on the CLI) or, with ``wait=True``, blocks until
    the holder is done. The file exists only while a writer holds it (removed before the lock is
    dropped, :func:`lock_file`): a finished folder holds no ``.lock``. The kernel drops the lock when
    the holder dies (``kill -9`` included), so a stale file never blocks anyone; the new holder then
    removes the temporaries a dead writer left anywhere in the folder
    (:func:`remove_stale_temporaries`). The lock file is opened with ``O_NOFOLLOW`` and without
    ``O_TRUNC``, and must be a regular file with no other hard link: a planted link or FIFO is
    refused, never truncated or written. Folders this lock created are removed
    again if the run failed and left nothing but the layer's own files in them (no empty folders after
    a failure).
    """

    def __init__(self, folder: str | Path, wait: bool = False, option: str = "output folder") -> None:
        self.folder = Path(folder)
        self.wait = wait
        self.option = option
        self._fd: int | None = None
        self._created: list[Path] = []

    def _make_folder(self) -> None:
        missing = []
        for parent in (self.folder, *self.folder.parents):
            if os.path.lexists(parent):
                break
            missing.append(parent)
        if os.path.lexists(self.folder) and not _is_dir(self.folder):
            raise RankCollapseError(f"output folder {quote_path(self.folder)} is a file; choose a folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise os_error("output folder", self.folder, err, verb="create") from None
        self._created = missing  # deepest first

    def acquire(self) -> OutputLock:
        self._make_folder()
        try:
            self._fd = lock_file(self.folder / LOCK_NAME, wait=self.wait, what=f"output folder "
                                 f"{quote_path(self.folder)}", hint=in_use_hint(self.option))
        except BaseException:
            self._remove_empty()
            raise
        remove_stale_temporaries(self.folder)
        return self

    def release(self, failed: bool = False) -> None:
        """Let go of the folder: the lock file is removed while still held (a finished folder holds no
        ``.lock``), then the lock dropped; see :func:`lock_file` for why that keeps one writer."""
        if self._fd is not None:
            if failed:
                self._remove_empty()
            unlock_file(self._fd, self.folder / LOCK_NAME)
            self._fd = None

    def _remove_empty(self) -> None:
        """Remove the folders this lock created if nothing but the layer's own files is in them."""
        for folder in self._created:
            try:
                entries = set(os.listdir(folder))
                if entries <= SCAFFOLD:
                    for name in entries:
                        (folder / name).unlink(missing_ok=True)
                    folder.rmdir()
            except OSError:
                return

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release(failed=kind is not None)


def _files_under(folder: Path) -> list[str]:
    """Every file (or link) under ``folder`` as a relative POSIX path, sorted; links never followed."""
    found = []
    for top, dirs, files in os.walk(folder):
        rel = PurePosixPath(Path(top).relative_to(folder))
        found.extend(str(rel / f) for f in files)
        found.extend(str(rel / d) for d in dirs if os.path.islink(Path(top) / d))
    return sorted(found)


def _real_parents(root: Path, rel: str) -> Path:
    """``root / rel``'s folder, each part a real folder (created where missing; a link or a file in the
    way refused): a file placed there never lands outside ``root`` through a planted link."""
    folder = root
    for part in PurePosixPath(rel).parts[:-1]:
        folder = folder / part
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            os.mkdir(folder)
            continue
        if stat.S_ISLNK(mode):
            raise LinkRefusedError(
                f"{quote_path(folder)} is a symbolic link; rankcollapse never writes through a link "
                "(remove it)"
            )
        if not stat.S_ISDIR(mode):
            raise RankCollapseError(f"{quote_path(folder)} is a file; allowed: a folder")
    return root / rel


def _remove_entry(root: Path, rel: str) -> None:
    """Remove the file (or link) ``root / rel`` of an earlier run, and the folders it leaves empty; never
    through a link or a file in its path, never a folder."""
    parts = PurePosixPath(rel).parts
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        if not _is_real_dir(folder):
            return
    target = folder / parts[-1]
    try:
        if stat.S_ISDIR(os.lstat(target).st_mode):
            return
        os.unlink(target)
    except FileNotFoundError:
        return
    for depth in range(len(parts) - 1, 0, -1):
        try:
            os.rmdir(root.joinpath(*parts[:depth]))
        except OSError:
            return


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class OutputFolder:
    """``with OutputFolder(out, "simulate") as folder: ...``: one command's claim on its output folder.

    On entry: :func:`check_output_folder`, then the folder is created and locked
    (:class:`OutputLock`; temporaries of dead writers removed), checked again under the lock (two
    writers cannot both pass), and a staging folder made inside it (``.rankcollapse.staging.<pid>.
    <hex>.tmp``, :attr:`staging`): :meth:`file` and :meth:`subfolder` give paths there, so everything a
    run writes is written aside, whatever its name. An earlier finished run stays whole, and its marker
    says ``complete: true`` with its files, until the new run **publishes** on a clean exit: each staged
    file renamed into the folder, then the earlier run's files this run did not write removed, then the
    marker rewritten ``complete: true`` with the new manifest (``files``: every file the run wrote,
    ``attention/layer_000.npy`` included), last. A file anyone else put in the folder is never in a
    manifest, so never removed. During the renames the marker says ``complete: false``: a kill there
    never leaves a mix that looks finished. On an exception the staging folder is removed, the earlier
    run is untouched, and a folder this call created is removed if it holds only the layer's own files;
    after a ``kill -9`` the next writer removes the staging folder.

    :meth:`partial` is the one file written in the folder itself while the run goes on (rows as they are
    measured, under a name that says partial), recorded in the marker (``scratch``) so that the next run
    may remove it. ``existing="resume"`` (reproduce) writes in place, without staging; its marker lists
    the folder's entries and nothing is ever removed. ``outputs``: the names this command wrote before
    markers listed a run's files (a folder from then is replaced by those names only).
    """

    def __init__(
        self,
        path: str | Path,
        command: str,
        *,
        option: str = "--out",
        existing: Existing = "refuse",
        wait: bool = False,
        outputs: tuple[str, ...] = (),
        keep_interrupted: bool = False,
    ) -> None:
        self.path = Path(path)
        self.keep_interrupted = keep_interrupted
        self.command = command
        self.option = option
        self.existing = existing
        self.wait = wait
        self.outputs = outputs
        #: Where this run writes: the staging folder (the folder itself with ``existing="resume"``).
        self.staging = self.path
        self._lock: OutputLock | None = None
        self._started = ""
        self._published: dict[str, Any] = {
            "complete": False,
            "files": [],
            "started_at": None,
            "finished_at": None,
        }
        self._old_scratch: list[str] = []
        self._scratch: list[str] = []
        self._finished: dict[str, str] = {}  # a staged file made from a partial one: its partial name
        self._publishing = False

    # the engine's ``OutputLock`` interface (acquire / release), so reproduce can hold one
    def acquire(self) -> OutputFolder:
        keep = self.keep_interrupted
        check_output_folder(self.path, self.command, option=self.option, existing=self.existing,
                            keep_interrupted=keep)
        lock = OutputLock(self.path, wait=self.wait, option=self.option)
        lock.acquire()
        try:
            check_output_folder(self.path, self.command, option=self.option, existing=self.existing,
                                keep_interrupted=keep)
            self._started = _now()
            if self.existing == "resume":
                self._write_resume_marker(complete=False)
            else:
                self._inherit(read_marker(self.path))
                self.staging = self.path / f".{STAGING_NAME}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
                os.mkdir(self.staging)
                self._write_marker(running=True)
        except OSError as err:
            self._drop_staging()
            lock.release(failed=True)
            raise os_error(self.option, self.path, err, verb="write into") from None
        except BaseException:
            self._drop_staging()
            lock.release(failed=True)
            raise
        self._lock = lock
        return self

    def _inherit(self, previous: dict[str, Any] | None) -> None:
        """What the folder holds now: the published run (complete or not, its manifest) and the scratch
        files of an interrupted one. A folder from before manifests (a marker listing every entry, or no
        marker) is taken to hold the command's own ``outputs`` only (a folder among them: its files), so
        a file of the user's that an old marker listed is never taken for the run's."""
        if previous is not None and previous.get("format") == MARKER_FORMAT:
            self._published = {
                "complete": previous.get("complete") is True,
                "files": _entries(previous.get("files")),
                "started_at": previous.get("started_at"),
                "finished_at": previous.get("finished_at"),
            }
            self._old_scratch = [n for n in _entries(previous.get("scratch")) if "/" not in n]
            return
        files: list[str] = []
        for name in _entries(list(self.outputs)):
            path = self.path / name
            if _is_real_dir(path):
                files.extend(f"{name}/{rel}" for rel in _files_under(path))
            elif "/" not in name and os.path.lexists(path):
                files.append(name)
        complete = previous.get("complete") is True if previous is not None else bool(files)
        self._published = {
            "complete": complete,
            "files": sorted(files),
            "started_at": None,
            "finished_at": None,
        }

    def _write_marker(self, *, running: bool) -> None:
        # this run's partial files are listed from before they exist (a kill right after leaves them ours)
        scratch = [
            n
            for n in dict.fromkeys([*self._old_scratch, *self._scratch])
            if (running and n in self._scratch) or os.path.lexists(self.path / n)
        ]
        record = {
            "rankcollapse": "output folder",
            "format": MARKER_FORMAT,
            "command": self.command,
            "complete": self._published["complete"],
            "pid": os.getpid(),
            "started_at": self._published["started_at"],
            "finished_at": self._published["finished_at"],
            "files": self._published["files"],
            "scratch": scratch,
            "running": {"pid": os.getpid(), "started_at": self._started, "staging": self.staging.name}
            if running
            else None,
        }
        try:
            write_json(self.path / MARKER_NAME, record)
        except OSError as err:
            raise os_error(self.option, self.path / MARKER_NAME, err, verb="write") from None

    def _write_resume_marker(self, complete: bool) -> None:
        files = sorted(e for e in os.listdir(self.path) if e not in SCAFFOLD and not e.startswith("."))
        record = {
            "rankcollapse": "output folder",
            "format": MARKER_FORMAT,
            "command": self.command,
            "complete": complete,
            "pid": os.getpid(),
            "started_at": self._started,
            "finished_at": _now() if complete else None,
            "files": files if complete else [],  # resumed in place: the folder's entries, none ever removed
        }
        try:
            write_json(self.path / MARKER_NAME, record)
        except OSError as err:
            raise os_error(self.option, self.path / MARKER_NAME, err, verb="write") from None

    def file(self, name: str) -> Path:
        """Where this run writes ``name`` (in the staging folder), refused if it is a symbolic link."""
        return refuse_link(self.staging / name)

    def subfolder(self, name: str) -> Path:
        """``name`` in the staging folder as a real folder (created if missing; a link or a file there is
        refused); its files are published with the rest."""
        return real_subfolder(self.staging, name)

    def partial(self, name: str) -> Path:
        """``folder / name`` for a file that grows in the folder itself while the run goes on (rows as
        they are measured), under a name that says it is partial: recorded in the marker first
        (``scratch``), so that the next run may remove it, and moved into the staging folder by its
        writer once complete (:class:`RunWriter`). A file there that no run of ours left is refused."""
        target = refuse_link(self.path / name)
        if os.path.lexists(target):
            if name not in self._old_scratch and name not in self._published["files"]:
                raise RankCollapseError(
                    f"{quote_path(target)} is in the way and no rankcollapse run wrote it; remove it, or "
                    f"choose another {self.option}"
                )
            try:
                target.unlink()
            except OSError as err:
                raise os_error(self.option, target, err, verb="replace") from None
        self._scratch.append(name)
        self._write_marker(running=self.existing != "resume")
        return target

    def finish_partial(self, name: str, final: str) -> Path:
        """Stage the partial file ``name`` (:meth:`partial`) as ``final``, published with the rest; if the
        run then fails (a figure, a second file, the publishing itself), the rows go back to ``name`` in
        the folder, never dropped with the staging folder: rows on disk are never removed by a failed
        write. Returns the staged path."""
        target = self.file(final)
        os.replace(self.path / name, target)
        self._finished[final] = name
        return target

    def published(self, obj: Any) -> Any:
        """``obj`` (a path, or a dict / list / tuple of them, as a job returns) with every path in the
        staging folder given as where it is published."""
        if isinstance(obj, dict):
            return {k: self.published(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return type(obj)(self.published(v) for v in obj)
        if isinstance(obj, str | Path) and self.staging != self.path:
            try:
                rel = Path(obj).relative_to(self.staging)
            except ValueError:
                return obj
            return type(obj)(self.path / rel) if isinstance(obj, Path) else str(self.path / rel)
        return obj

    def _publish(self) -> None:
        """Rename every staged file into the folder, remove the earlier run's files this run did not
        write, then mark the folder complete with the new manifest (see the class docstring)."""
        new = _files_under(self.staging)
        old = self._published["files"]
        self._publishing = True
        self._published = {**self._published, "complete": False, "files": sorted(set(old) | set(new))}
        self._write_marker(running=True)
        for rel in new:
            target = _real_parents(self.path, rel)
            refuse_link(target)
            os.replace(self.staging / rel, target)
        for rel in sorted(set(old) - set(new)):
            _remove_entry(self.path, rel)
        for name in self._old_scratch:  # an interrupted run's partial rows this run did not replace
            if name not in self._scratch:
                _remove_entry(self.path, name)
        self._drop_staging()
        self._published = {"complete": True, "files": new, "started_at": self._started, "finished_at": _now()}
        self._write_marker(running=False)

    def _drop_staging(self) -> None:
        if self.staging != self.path and _is_real_dir(self.staging):
            self._restore_partials()
            shutil.rmtree(self.staging, ignore_errors=True)

    def _restore_partials(self) -> None:
        """Move every staged file made from a partial one back to its partial name (a failed run keeps
        its rows where an interrupted one does; the marker lists them as ``scratch``)."""
        for final, name in self._finished.items():
            staged = self.staging / final
            if os.path.lexists(staged) and not os.path.lexists(self.path / name):
                try:
                    os.replace(staged, self.path / name)
                except OSError:
                    continue

    def release(self, failed: bool = False) -> None:
        if self._lock is None:
            return
        ok = False
        try:
            if self.existing == "resume":
                if not failed:
                    self._write_resume_marker(complete=True)
            elif not failed:
                self._publish()
            else:
                self._drop_staging()
                if not self._publishing and os.path.lexists(self.path / MARKER_NAME):
                    self._write_marker(running=False)  # the earlier run as it was
            ok = not failed
        except OSError as err:
            raise os_error(self.option, self.path, err, verb="publish into") from None
        finally:
            if not ok:
                self._drop_staging()
            self._lock.release(failed=not ok)
            self._lock = None

    def __enter__(self) -> OutputFolder:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release(failed=kind is not None)


def write_folder(
    path: str | Path, command: str, job: Any, *, outputs: tuple[str, ...] = (), existing: Existing = "refuse"
) -> Any:
    """``job(staging_folder)`` inside an :class:`OutputFolder` of ``command``: everything the job writes
    there is published when it returns; an ``OSError`` of the job is one line naming the folder. Returns
    what the job returns, its paths as published (:meth:`OutputFolder.published`)."""
    with OutputFolder(path, command, existing=existing, outputs=outputs) as folder:
        try:
            result = job(folder.staging)
        except OSError as err:
            where = folder.published(err.filename) if isinstance(err.filename, str) else folder.path
            raise os_error("output", where, err, verb="write") from None
    return folder.published(result)


def is_complete(folder: str | Path) -> bool:
    """Whether ``folder`` holds a finished run: its marker says ``complete: true``."""
    marker = read_marker(folder)
    return bool(marker and marker.get("complete") is True)


def real_subfolder(folder: str | Path, name: str) -> Path:
    """``folder / name`` as a real folder (created if missing); a symbolic link or a file there is
    refused, so nothing is written outside the output folder through a planted link."""
    path = Path(folder) / name
    if path.is_symlink():
        raise LinkRefusedError(
            f"{quote_path(path)} is a symbolic link; rankcollapse never writes through a link (remove it)"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RankCollapseError(f"{quote_path(path)} is a file; allowed: a folder") from None
    except OSError as err:
        raise os_error("output folder", path, err, verb="create") from None
    return path


