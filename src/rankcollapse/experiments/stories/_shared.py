"""Claim helpers shared by several stories (a ``_`` module: discovery skips it)."""

from __future__ import annotations

import pandas as pd

from rankcollapse.experiments.analysis import classify_curve
from rankcollapse.experiments.engine.verdicts import Data


def classified(data: Data, runs: pd.DataFrame, dtype_col: str = "dtype") -> list[tuple[str, float | None]]:
    """(class, tail slope) of each run's mu_rel curve, with the experiment's ``rate_tol``/``keep_min``."""
    return [
        classify_curve(
            data.curve(run["run_id"]), str(run[dtype_col]), data.v("rate_tol", 5e-3), data.v("keep_min", 1e-2)
        )
        for _, run in runs.iterrows()
    ]


def family(mask: str) -> str:
    """``window:w=4`` -> ``window``."""
    return mask.split(":", 1)[0]
