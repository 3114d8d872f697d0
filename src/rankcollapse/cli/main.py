"""Entry point: loads the sub-command being run, maps user errors to one line and exit code 2.

Exit codes: 0 ok, 2 bad input or a file-system error (one line on stderr: an ``OSError`` a command
did not catch, e.g. a full disk, EFBIG under ``ulimit -f``, EIO, names the path and the errno),
130 interrupted (Ctrl-C at any moment: one line on stderr), 143 terminated (SIGTERM: the same one
line, ``terminated; ...``). Only light modules are imported here; each command imports what it needs.
"""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
import threading
from types import FrameType

from rankcollapse.edge.messages import printable, printable_stdout

_INTERRUPTED = "results already written are kept"
_SIGNALLED: list[int] = []  # the SIGINT / SIGTERM that arrived (set by the process's handler)


#: Seconds after which a signal that landed inside an import is delivered again.
RETRY_S = 0.05


def _in_import(frame: FrameType | None) -> bool:
    """The main thread is executing a module's body (a frame of importlib's bootstrap is on the stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C (or SIGTERM) while the command runs: remember it, then interrupt as Python does for
    Ctrl-C, so every command's clean-up runs (the output layer's marker stays ``complete: false``).

    Inside an import the exception is not raised but the signal sent again ``RETRY_S`` later: raised
    in a module body that a C extension runs (torch's pybind11 initialisation), a KeyboardInterrupt
    aborts the process ("terminate called after throwing ..."); raised once the import is done, it is
    the usual one line and exit 130. Remembering matters when a half-imported library then fails in
    another way (e.g. a RecursionError in torch's lazy attribute loader)."""
    _SIGNALLED.append(signum)
    if _in_import(frame):
        timer = threading.Timer(RETRY_S, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
        return
    raise KeyboardInterrupt


def _stopped(message: str) -> int:
    """The one line of an interrupted command, and its exit code (130 Ctrl-C, 143 SIGTERM)."""
    if signal.SIGTERM in _SIGNALLED:
        _say(f"terminated; {message}")
        return 128 + signal.SIGTERM
    _say(f"interrupted; {message}")
    return 130


def os_error_line(err: OSError) -> str:
    """One line for an ``OSError`` no command caught: the path(s) and the errno text."""
    from rankcollapse.edge.inputs import os_reason, quote_path

    names = [n for n in (err.filename, err.filename2) if n is not None]
    where = " -> ".join(quote_path(n) for n in names)
    return f"{where}: {os_reason(err)}" if where else os_reason(err)


#: True when the process started with stderr closed and no terminal: error lines go to stdout.
_ERRORS_TO_STDOUT: list[bool] = []


def reopen_stderr() -> str | None:
    """A process started with stderr closed (``2>&-``: Python sets ``sys.stderr`` to None, and
    ``print(file=None)`` writes to stdout, mixing error lines into the command's output): fd 2 is
    reopened on the controlling terminal (``/dev/tty``) when there is one, so every line meant for stderr
    (errors, warnings, the pre-sweep estimate) reaches the user and stdout stays the command's output;
    with no terminal on ``/dev/null``, so that no file the command opens becomes fd 2 (a library writing
    to fd 2 would write into it), and the error line alone goes to stdout, the one stream left (exit 2
    either way). Returns ``"tty"``, ``"stdout"``, or None where stderr is open."""
    if sys.stderr is not None:
        return None
    try:
        fd, where = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY), "tty"
    except OSError:  # no controlling terminal (a daemon, cron, a CI job)
        fd, where = os.open(os.devnull, os.O_WRONLY), "stdout"
    if fd != 2:
        os.dup2(fd, 2)
        os.close(fd)
    os.set_inheritable(2, True)  # worker processes get the same fd 2
    sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)
    _ERRORS_TO_STDOUT[:] = [where == "stdout"]
    return where


def _say(message: str) -> None:
    """``rankcollapse: <message>`` on stderr (an error line on stdout where :func:`reopen_stderr` found
    no terminal; a warning is not)."""
    to_stdout = bool(_ERRORS_TO_STDOUT and _ERRORS_TO_STDOUT[0]) and not message.startswith("warning:")
    try:
        print(f"rankcollapse: {printable(message)}", file=sys.stdout if to_stdout else sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # the stream closed under us
        pass


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _on_late_sigint(signum: int, frame: object) -> None:
    """Ctrl-C (or SIGTERM) after the command finished (flushing, joining workers, the exit hooks): one
    line and 130 (143), never a death by the signal."""
    _flush()
    _say(f"{'terminated' if signum == signal.SIGTERM else 'interrupted'}; {_FINISHED}")
    os._exit(128 + signum)


#: What an interrupt that came once the command had finished keeps: everything.
_FINISHED = "the command had finished: its results are complete"


def _leave(code: int) -> None:
    """The end of a process run (``python -m rankcollapse``, the console script): the interpreter's own
    clean-up, done here while our late handlers hold SIGINT and SIGTERM, then ``os._exit(code)``.

    Python's shutdown restores the signals' default actions before it tears the modules down (with torch
    loaded, tens of milliseconds), so a signal then killed a finished command with -2 / -15 and no
    line. Here the non-daemon threads are joined and the exit hooks run (``atexit``: multiprocessing,
    logging, ...) as the interpreter would; the module teardown, which writes nothing, is skipped.
    """
    shutdown = getattr(threading, "_shutdown", None)
    try:
        if shutdown is not None:
            shutdown()  # join the non-daemon threads, as Py_FinalizeEx does first
        import atexit

        atexit._run_exitfuncs()
    finally:
        _flush()
        os._exit(code)


def command_name(args: list[str]) -> str | None:
    """The sub-command named on the command line (the first word that is not an option)."""
    for arg in args:
        if not arg.startswith("-"):
            return arg
    return None


def load_commands(args: list[str]) -> None:
    """Import the module of the command being run, or every command module (help, unknown name)."""
    from rankcollapse.cli.app import COMMAND_MODULES

    name = command_name(args)
    every = list(dict.fromkeys(COMMAND_MODULES.values()))
    wanted = [COMMAND_MODULES[name]] if name in COMMAND_MODULES else every
    for module in wanted:
        importlib.import_module(module)


def _click_modules() -> tuple:
    """Click's exception classes: typer >= 0.29 vendors its own copy (``typer._click``)."""
    import click

    modules = [click.exceptions]
    for name in ("typer._click.exceptions", "typer.exceptions"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            pass
    return tuple(modules)


def _classes(name: str) -> tuple[type[BaseException], ...]:
    return tuple(dict.fromkeys(getattr(m, name) for m in _click_modules() if hasattr(m, name)))


def _option_value(args: list[str], opts: list[str]) -> str | None:
    """The text the user gave for an option (``--layers 2.5`` or ``--layers=2.5``)."""
    for k, arg in enumerate(args):
        for opt in opts:
            if arg == opt and k + 1 < len(args):
                return args[k + 1]
            if arg.startswith(opt + "="):
                return arg[len(opt) + 1 :]
    return None


_KINDS = {"int": "integer", "float": "number", "bool": "true/false value", "Path": "path"}


def _kind(param: object) -> str:
    """``integer``, ``number``...: what the option takes, for the error line."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:
        annotation = getattr(getattr(param, "type", None), "name", None)
    name = getattr(annotation, "__name__", str(annotation))
    return _KINDS.get(name, "value")


_FIELD = re.compile(r"^([a-z][a-z0-9_]*)\b")


def flag_named(text: str, command: object, args: list[str]) -> str:
    """An error line that opens with a config field the user set by a flag names the flag instead.

    ``d_qk must be > 0, got 0`` under ``simulate --d-qk 0`` reads ``--d-qk must be > 0, got 0``: the
    configs validate under their field names (the Python API's words); the command line's are its flags.
    Only a flag the user typed is named, so a field set by a profile or a file keeps its own name.
    """
    match = _FIELD.match(text)
    sub = getattr(command, "commands", {}).get(args[0]) if args else None
    if match is None or sub is None:
        return text
    for param in getattr(sub, "params", ()):
        opts = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        if param.name == match.group(1) and opts and _option_value(args, opts) is not None:
            return opts[0] + text[match.end():]
    return text


def usage_message(err: object, args: list[str]) -> str:
    """One line for a click usage error; a bad option value is quoted (truncated) with its type."""
    param = getattr(err, "param", None)
    opts = list(getattr(param, "opts", None) or [])
    value = _option_value(args, opts) if opts and isinstance(err, _classes("BadParameter")) else None
    if value is not None:
        kind = _kind(param)
        shown = value if len(value) <= 60 else value[:57] + "..."
        text = f"{opts[-1]} {shown!r} is not a valid {kind}"
    else:
        text = " ".join(err.format_message().split())
        text = text if len(text) <= 300 else text[:297] + "..."
    ctx = getattr(err, "ctx", None)
    path = getattr(ctx, "command_path", "") or ""
    sub = f"{path.split(' ', 1)[-1]} " if " " in path else ""
    hint = f" (see 'rankcollapse {sub}--help')"
    return text + hint


def _run(args: list[str]) -> int:
    from rankcollapse.edge.errors import Interrupted, RankCollapseError
    from rankcollapse.edge.runtime import raise_mmap_threshold

    raise_mmap_threshold()
    load_commands(args)
    import typer

    from rankcollapse.cli.app import app

    command = typer.main.get_command(app)
    try:
        with printable_stdout(), command.make_context("rankcollapse", list(args)) as ctx:
            result = command.invoke(ctx)
    except Interrupted as err:
        return _stopped(err.message)
    except RankCollapseError as err:
        if _SIGNALLED:
            raise KeyboardInterrupt from None
        text = flag_named(" ".join(str(err).split()), command, args)
        _say(f"error: {text if len(text) <= 400 else text[:397] + '...'}")
        return 2
    except _classes("NoArgsIsHelpError") as err:
        print(err.format_message() if hasattr(err, "format_message") else "", end="")
        return 0
    except _classes("UsageError") as err:
        _say(f"error: {usage_message(err, args)}")
        return 2
    except _classes("Exit") as err:
        return int(getattr(err, "exit_code", 0))
    except _classes("Abort"):
        return _stopped(_INTERRUPTED)
    except BrokenPipeError:
        raise
    except OSError as err:  # full disk, EFBIG, EIO, EROFS...: one line naming the path, never a traceback
        if _SIGNALLED:
            raise KeyboardInterrupt from None
        _say(f"error: {os_error_line(err)}")
        return 2
    except RecursionError:
        if _SIGNALLED:
            raise KeyboardInterrupt from None
        _say("error: the input is nested too deeply; allowed: simpler input")
        return 2
    return int(result) if isinstance(result, int) else 0


def _command(args: list[str]) -> int:
    """:func:`_run`, its interrupts and broken pipes turned into exit codes."""
    try:
        code = _run(args)
    except KeyboardInterrupt as err:
        return _stopped(getattr(err, "message", _INTERRUPTED))
    except BrokenPipeError:  # the reader of stdout went away (``rankcollapse --help | head``)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except BaseException:
        if not _SIGNALLED:
            raise
        return _stopped(_INTERRUPTED)
    if _SIGNALLED and code == 0:
        # a signal deferred through imports (``_on_sigint``) that the command outran: said, never lost
        return _stopped(_FINISHED)
    return code


def _hand_over(code: int) -> None:
    """After the command: SIGINT / SIGTERM to the late handler (ignored once the stop line is out)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) in (signal.default_int_handler, _on_sigint, _on_late_sigint):
            signal.signal(signum, signal.SIG_IGN if code in (130, 143) else _on_late_sigint)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit code (0, 2 or 130).

    Called as a process (``argv`` None), a Ctrl-C or SIGTERM at any moment prints one line and exits 130
    (143): in the start-up imports (deferred, never lost: said when the command outran it), during the
    command, and after it, while the process joins its threads and runs its exit hooks (:func:`_leave`).
    """
    args = sys.argv[1:] if argv is None else list(argv)
    reopen_stderr()
    if argv is None and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    if argv is None and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigint)
    try:
        code = _command(args)
        if argv is None:
            _hand_over(code)
    except KeyboardInterrupt:  # landed between the command's return and the hand-over
        if argv is None:
            _hand_over(130)
        code = _stopped(_INTERRUPTED)
    if argv is None and code in (130, 143):
        # interrupted: every result is already on disk; leave now, so that no shutdown step (a
        # library's atexit hook, a half-imported module) can turn the exit into a death by SIGINT
        _flush()
        os._exit(code)
    if argv is None:
        _leave(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
