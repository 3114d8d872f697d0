"""Table lookups that work for numpy and torch index arrays (torch is used only if the caller's is)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from rankcollapse.masks.base import Predicate


def _torch_device(*arrays: Any) -> Any:
    """The device of the first torch tensor among ``arrays`` (None if torch is not even imported)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for a in arrays:
        if isinstance(a, torch.Tensor):
            return a.device
    return None


def _lookup(table: np.ndarray, *index: Any) -> Any:
    """``table[index]`` for numpy or torch indices (torch in, torch out on the indices' device)."""
    device = _torch_device(*index)
    if device is None:
        return table[index]
    import torch

    values = torch.from_numpy(table) if table.flags.writeable else torch.tensor(table)
    return values.to(device)[index]


def _table_predicate(table: np.ndarray) -> Predicate:
    """Rule that looks pairs up in a boolean table [n, n] (numpy or torch indices)."""

    def rule(i: Any, j: Any) -> Any:
        return _lookup(table, i, j)

    return rule
