"""Claims and verdicts: what a claim rule returns, and the one rule that combines verdicts.

A *claim rule* is a function ``rule(data: Data) -> list[Claim]`` of one experiment's slice of the
run tables. Every verdict is computed from those tables; nothing is hard-coded. Verdicts:

- ``reproduced``: the measured data satisfy the rule printed with the claim;
- ``not reproduced``: the data contradict it;
- ``inconclusive``: no data, failed runs in the experiment, too few points above the precision
  floor, or evidence pointing both ways.

:func:`combine_verdicts` is the only way to merge several partial verdicts (one per mask, per
model, per rank ...) into one: any ``not reproduced`` wins; otherwise ``reproduced`` needs at least
one part and every part reproduced; anything else (an empty list included) is ``inconclusive``.
No evidence never yields ``reproduced``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments.engine.config import Experiment

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
#: The evidence of a claim judged on nothing.
NO_RUNS = "no runs"


def combine_verdicts(verdicts: Iterable[str]) -> str:
    """One verdict from several partial ones (see the module docstring for the rule).

    >>> combine_verdicts([])
    'inconclusive'
    >>> combine_verdicts(["reproduced", "inconclusive"])
    'inconclusive'
    >>> combine_verdicts(["reproduced", "not reproduced", "inconclusive"])
    'not reproduced'
    """
    parts = list(verdicts)
    unknown = [v for v in parts if v not in VERDICTS]
    if unknown:
        raise RankCollapseError(f"unknown verdict {unknown[0]!r}; allowed: {', '.join(VERDICTS)}")
    if NOT_REPRODUCED in parts:
        return NOT_REPRODUCED
    if parts and all(v == REPRODUCED for v in parts):
        return REPRODUCED
    return INCONCLUSIVE


@dataclass
class Claim:
    """One line of the claims table.

    ``source``: where the claim comes from (``"paper §4, Thm 1"``, ``"paper §5, Fig. 2"``) or
    ``"ours"``. ``conditions``: the settings it was checked under (config file and profile).
    ``rule``: the rule that turned the evidence into the verdict, in words. ``figure``: the figure
    that shows it (file stem, "" if none). ``disagreement``: plain words where the data contradict
    what the paper reports.
    """

    id: str
    experiment: str
    statement: str
    source: str
    evidence: str
    verdict: str
    rule: str
    conditions: str = ""
    seeds: list[int] = field(default_factory=list)
    figure: str = ""
    disagreement: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id}: unknown verdict {self.verdict!r}; allowed: {VERDICTS}")
        if self.verdict == REPRODUCED and not self.evidence.strip():
            raise ValueError(f"claim {self.id}: 'reproduced' needs evidence")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fmt(x: Any, digits: int = 2) -> str:
    """A number for evidence text: ``digits`` significant digits, ``n/a`` for None/NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float | np.floating):
        return f"{x:.{digits}g}" if abs(x) < 1e4 else f"{x:.{digits}e}"
    return str(x)


def column(frame: pd.DataFrame, name: str) -> pd.Series:
    """``frame[name]``, or a column of None when the table has no such column."""
    return frame[name] if name in frame else pd.Series([None] * len(frame), index=frame.index, dtype=object)


@dataclass
class Data:
    """One experiment's slice of the run tables, as given to its claim rules and figures.

    ``table``: the long rows of finished runs (``runs.csv``: run_id, params, row columns).
    ``index``: one row per run, finished and failed (``index.csv``: status, error, summary.*).
    """

    exp: Experiment
    table: pd.DataFrame
    index: pd.DataFrame

    @property
    def ok(self) -> pd.DataFrame:
        """Index rows of the finished runs."""
        if self.index.empty:
            return self.index
        return self.index[self.index["status"] == "ok"]

    def failures(self) -> str:
        """``"no runs"``, ``""`` (none failed) or ``"N run(s) failed, e.g. <error>"``."""
        if self.index.empty:
            return NO_RUNS
        bad = self.index[self.index["status"] != "ok"]
        if bad.empty:
            return ""
        return f"{len(bad)} run(s) failed, e.g. {bad['error'].iloc[0]}"

    def curve(self, run_id: str, column: str = "mu_rel") -> list[float]:
        """One run's ``column`` in layer order."""
        rows = self.table[self.table["run_id"] == run_id].sort_values("layer")
        return [float(v) for v in rows[column]]

    def seeds(self, runs: pd.DataFrame | None = None) -> list[int]:
        runs = self.ok if runs is None else runs
        if runs.empty or "seed" not in runs:
            return []
        return sorted({int(s) for s in runs["seed"].dropna()})

    def conditions(self) -> str:
        return f"{self.exp.source} (profile {self.exp.profile})"

    def v(self, key: str, default: float) -> float:
        """A threshold from the experiment's ``verdict:`` section."""
        return float(self.exp.verdict.get(key, default))

    def groups(self, frame: pd.DataFrame, key: str) -> list[tuple[Any, pd.DataFrame]]:
        """``frame.groupby(key)`` in the order of the grid axis ``key`` (rows follow the config)."""
        order = {v: i for i, v in enumerate(self.exp.grid.get(key, []))}
        groups = list(frame.groupby(key, sort=False))
        return sorted(groups, key=lambda g: order.get(g[0], len(order)))

    def claim(
        self,
        cid: str,
        statement: str,
        source: str,
        rule: str,
        evidence: str,
        verdict: str,
        runs: pd.DataFrame | None = None,
        figure: str = "",
        disagreement: str = "",
    ) -> Claim:
        """A claim of this experiment; a ``not reproduced`` one gets a default disagreement note."""
        if verdict == NOT_REPRODUCED and not disagreement:
            disagreement = f"The paper states: {statement}. We measured: {evidence}."
        return Claim(
            id=cid,
            experiment=self.exp.name,
            statement=statement,
            source=source,
            evidence=evidence,
            verdict=verdict,
            rule=rule,
            conditions=self.conditions(),
            seeds=self.seeds(runs),
            figure=figure,
            disagreement=disagreement,
        )

    def no_data(self, cid: str, statement: str, source: str, rule: str, figure: str = "") -> Claim:
        """The ``inconclusive`` claim of an experiment without finished runs."""
        why = self.failures() or "no finished runs"
        return self.claim(cid, statement, source, rule, f"no data: {why}", INCONCLUSIVE, figure=figure)


ClaimRule = Callable[[Data], list[Claim]]


def judge(rule: ClaimRule, data: Data) -> list[Claim]:
    """Apply ``rule``; failed runs in the experiment turn every ``reproduced`` into ``inconclusive``
    (part of the grid is missing) and are quoted in the evidence."""
    claims = rule(data)
    failed = data.failures()
    if failed and not data.ok.empty:
        for claim in claims:
            claim.evidence += f"; {failed}"
            if claim.verdict == REPRODUCED:
                claim.verdict = INCONCLUSIVE
    return claims


def slice_data(exp: Experiment, table: pd.DataFrame, index: pd.DataFrame) -> Data:
    """The rows of ``exp`` in the whole-output tables."""
    t = table[table["experiment"] == exp.name] if not table.empty else table
    i = index[index["experiment"] == exp.name] if not index.empty else index
    return Data(exp, t, i)
