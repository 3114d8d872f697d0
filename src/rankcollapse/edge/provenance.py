"""Provenance: the versions of the packages that change numbers, recorded beside every run."""

from __future__ import annotations

import platform
from importlib import metadata

_VERSIONED = ("rankcollapse", "torch", "numpy", "scipy", "transformers", "networkx")


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages that change numbers (absent ones omitted)."""
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


