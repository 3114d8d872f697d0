"""The spellings 0.2.0 retired (CHANGELOG.md), each with what replaced it: the command line and the
Python API refuse them (tests/core/test_name_table.py) and no page of the docs teaches them
(tests/test_docs.py). Stored data keeps its keys (``core.names``' ``stored``): that is not a spelling."""

from __future__ import annotations

#: Retired flag -> (its replacement, the commands that took it).
FLAGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "--n": ("--tokens", ("simulate", "equilibria", "mask")),
    "--batch": ("--samples", ("simulate",)),
    "--preset": ("--mode", ("simulate",)),
    "--temperature": ("--d-qk", ("simulate", "analyze", "equilibria")),
    "--steps": ("--layers", ("equilibria",)),
    "--text": ("--text-file", ("analyze",)),
}

#: Retired ``SimulationConfig`` field -> its replacement (the names table's key).
FIELDS: dict[str, str] = {"n": "tokens", "batch": "samples", "preset": "mode", "temperature": "d_qk"}

#: Every retired spelling a page could teach -> its replacement.
SPELLINGS: dict[str, str] = {**{old: new for old, (new, _) in FLAGS.items()}, **FIELDS}
