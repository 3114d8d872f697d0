"""Synthetic run tables for the claim-rule tests: an experiment, its index rows and its curves."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rankcollapse.experiments.engine.config import Experiment
from rankcollapse.experiments.engine.verdicts import Data


def make_data(
    name: str,
    runs: list[dict[str, Any]],
    curves: dict[str, list[float]] | None = None,
    rows: list[dict[str, Any]] | None = None,
    *,
    verdict: dict[str, Any] | None = None,
    base: dict[str, Any] | None = None,
    grid: dict[str, list[Any]] | None = None,
    task: str = "simulate",
) -> Data:
    """``runs``: index rows (status ok unless given); ``curves``: run_id -> mu_rel per layer;
    ``rows``: extra long rows (each with its run_id)."""
    exp = Experiment(
        name=name,
        title=name,
        task=task,
        base=base or {},
        grid=grid or {},
        verdict=verdict or {},
        source=f"{name}.yaml",
        profile="tiny",
    )
    index = pd.DataFrame([{"status": "ok", "error": "", "experiment": name, **r} for r in runs])
    long = [
        {"run_id": rid, "experiment": name, "layer": t, "mu_rel": v}
        for rid, c in (curves or {}).items()
        for t, v in enumerate(c)
    ]
    long += [{"experiment": name, **r} for r in rows or []]
    table = pd.DataFrame(long) if long else pd.DataFrame(columns=["run_id", "experiment", "layer"])
    return Data(exp, table, index)


def by_id(claims: list) -> dict[str, Any]:
    """claim id -> claim."""
    return {c.id: c for c in claims}


def collapsing(n: int = 60, rate: float = 0.9) -> list[float]:
    """mu_rel falling by ``rate`` per layer, above every floor for n = 60 layers."""
    return [rate**t for t in range(n)]


def kept(n: int = 60, level: float = 0.6) -> list[float]:
    return [level] * n


def unclear(n: int = 60) -> list[float]:
    """Flat but tiny: neither collapsing nor kept."""
    return [1e-3] * n
