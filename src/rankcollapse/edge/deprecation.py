"""The one deprecation path: an old spelling is accepted for one release, with one warning.

Every renamed flag, config field or preset goes through :func:`renamed` (a value under an old and a new
name) or :func:`warn` (an old value that maps to a new one). Both raise a ``FutureWarning`` from the
caller's line (so Python users see where, and can filter it), and the command line prints each such
warning as one line ``rankcollapse: warning: ...`` on stderr once the command succeeded
(:func:`collected`, used by the CLI's ``main``). Giving both names is one line and exit 2, never a
silent choice.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from typing import Any, TypeVar

from rankcollapse.edge.errors import RankCollapseError

T = TypeVar("T")


class RankCollapseDeprecation(FutureWarning):
    """A spelling rankcollapse still accepts for one release."""


def warn(message: str, stacklevel: int = 3) -> None:
    """Warn once, from the caller's caller: ``old is deprecated; use new``."""
    warnings.warn(message, RankCollapseDeprecation, stacklevel=stacklevel)


def renamed(new: str, value: T | None, old: str, old_value: T | None, hint: str = "") -> T | None:
    """The value given under ``new`` or, deprecated, under ``old`` (one warning); both given is refused.

    >>> renamed("d_qk", 4.0, "temperature", None)
    4.0
    """
    if old_value is None:
        return value
    if value is not None:
        raise RankCollapseError(f"give {new} or its old name {old}, not both")
    warn(f"{old} is deprecated; use {new}" + (f" ({hint})" if hint else ""), stacklevel=4)
    return old_value


def renamed_names(module: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` that serves each old name of ``names`` (old -> new) as the module's new
    one, with one warning, for one release; any other missing name is the usual ``AttributeError``.
    Usage, at the end of the module: ``__getattr__ = renamed_names(__name__, {"OLD": "NEW"})``."""

    def module_getattr(name: str) -> Any:
        if name in names:
            warn(f"{module}.{name} is deprecated; use {module}.{names[name]}")
            return getattr(sys.modules[module], names[name])
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return module_getattr


@contextmanager
def collected() -> Iterator[list[str]]:
    """Inside the block, every rankcollapse deprecation is collected (each message once) instead of
    shown; other warnings pass through. The CLI prints them as ``rankcollapse: warning: ...`` lines
    once its command succeeded, so that a refused command stays one line."""
    lines: list[str] = []
    with warnings.catch_warnings():  # restores the filters and showwarning afterwards
        previous = warnings.showwarning

        def show(message: Any, category: type, filename: str, lineno: int, file: Any = None,
                 line: Any = None) -> None:
            if issubclass(category, RankCollapseDeprecation):
                if str(message) not in lines:
                    lines.append(str(message))
                return
            previous(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        warnings.simplefilter("always", RankCollapseDeprecation)
        yield lines


#: Modules that moved, old name -> the modules that now hold its names (one release of aliases).
MOVED_MODULES: dict[str, tuple[str, ...]] = {
    **{f"rankcollapse.{name}": (f"rankcollapse.edge.{name}",)
       for name in ("errors", "inputs", "validate", "runtime", "progress", "deprecation")},
    "rankcollapse.io": ("rankcollapse.edge.atomic", "rankcollapse.edge.folder", "rankcollapse.edge.runs",
                        "rankcollapse.edge.provenance"),
    **{f"rankcollapse.experiments.engine.{name}": (f"rankcollapse.experiments.contract.{name}",)
       for name in ("verdicts", "story")},
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module name (``rankcollapse.io``) as its new home, with one deprecation warning.

    A name that moved whole is the new module itself (``rankcollapse.errors is rankcollapse.edge.errors``);
    a module split in parts is a module holding the public names of every part."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED_MODULES else None

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        homes = [importlib.import_module(name) for name in MOVED_MODULES[spec.name]]
        warn(f"module {spec.name} is deprecated; import from {' / '.join(MOVED_MODULES[spec.name])}",
             stacklevel=3)
        if len(homes) == 1:
            return homes[0]
        names = ", ".join(MOVED_MODULES[spec.name])
        module = types.ModuleType(spec.name, f"Deprecated: the names of {names}")
        for home in homes:
            module.__dict__.update({k: v for k, v in vars(home).items() if not k.startswith("__")})
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_moved_modules() -> None:
    """Let the old module names import for one release (called once by ``rankcollapse/__init__``)."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
