"""Entry point: registers the sub-commands and maps user errors to one line and exit code 2."""

from __future__ import annotations

import sys

import click

from rankcollapse.cli.app import app
from rankcollapse.errors import RankCollapseError
from rankcollapse.runtime import raise_mmap_threshold


def _click_modules() -> tuple:
    """Click's exception classes: typer >= 0.29 vendors its own copy (``typer._click``)."""
    modules = [click.exceptions]
    try:
        from typer._click import exceptions as vendored

        modules.append(vendored)
    except ImportError:
        pass
    return tuple(modules)


def _classes(name: str) -> tuple[type[BaseException], ...]:
    return tuple(getattr(m, name) for m in _click_modules() if hasattr(m, name))


def _register_commands() -> None:
    # Importing a module registers its commands on ``app``.
    from rankcollapse.cli import (  # noqa: F401
        analyze,
        equilibria,
        mask,
        reproduce,
        simulate,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 2 bad input, 130 interrupted)."""
    raise_mmap_threshold()
    _register_commands()
    try:
        result = app(args=argv, standalone_mode=False, prog_name="rankcollapse")
    except RankCollapseError as err:
        print(f"rankcollapse: error: {err}", file=sys.stderr)
        return 2
    except _classes("NoArgsIsHelpError"):
        return 0
    except _classes("UsageError") as err:
        hint = f" (see 'rankcollapse {err.ctx.command_path.split(' ', 1)[-1]} --help')" if (
            err.ctx is not None and " " in err.ctx.command_path) else " (see 'rankcollapse --help')"
        print(f"rankcollapse: error: {err.format_message()}{hint}", file=sys.stderr)
        return 2
    except _classes("Exit") as err:
        return int(getattr(err, "exit_code", 0))
    except _classes("Abort"):
        print("rankcollapse: interrupted; results already written are kept", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("rankcollapse: interrupted; results already written are kept", file=sys.stderr)
        return 130
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
