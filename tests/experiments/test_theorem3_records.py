"""Theorem 3's measurements come back from the run index as the typed record they were stored from."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rankcollapse.equilibria.theorem3_checks import Theorem3Summary
from rankcollapse.experiments.engine.store import SUMMARY_PREFIX, run_summary


def _record(n: int, w: float, f2_holds: bool | None) -> Theorem3Summary:
    return Theorem3Summary(
        n=n,
        w=w,
        equilibria=2 ** (n + 1) - 2 + 3,
        paper_ranks=tuple(2**k for k in range(1, n + 1)),
        other_ranks=tuple(range(n)),
        max_residual=3e-16,
        min_neutral=1,
        srank_bound=n / (n - (n - 1) / w**2),
        f2_holds=f2_holds,
        f2_max_srank=1.25 if f2_holds is not None else math.nan,
        lemma13_share_stays=1.0,
        lemma13_share_rank2=0.9375,
        lemma13_samples=16,
        lemma13_max_condition=1.46,
        lemma13_condition_limit=math.sqrt(w * w - 1),
    )


def test_a_stored_summary_reads_back_as_the_same_record_beside_runs_of_another_n() -> None:
    """Through the store's JSON and the index's flat ``summary.*`` columns (a run of N = 4 beside one of
    N = 3 leaves ``paper_rank4`` NaN in the N = 3 row; a missing App. F.2 check becomes NaN in a table):
    every field comes back with its value and its type."""
    records = [_record(3, 2.0, None), _record(4, 4.0, True)]
    stored = [json.loads(json.dumps(r.to_summary())) for r in records]
    assert stored[0]["w_at_least_n"] is False and stored[1]["w_at_least_n"] is True
    flat = [{f"{SUMMARY_PREFIX}{k}": v for k, v in s.items()} for s in stored]
    index = pd.DataFrame([{"n": r.n, "w": r.w, **f} for r, f in zip(records, flat, strict=True)])
    back = [Theorem3Summary.from_summary(row["n"], row["w"], run_summary(row)) for _, row in index.iterrows()]
    assert back[0].f2_holds is None and math.isnan(back[0].f2_max_srank)
    assert back[1] == records[1]
    assert back[0].paper_ranks == (2, 4, 8) and isinstance(back[0].paper_ranks[0], int)
    assert all(isinstance(b.n, int) and isinstance(b.lemma13_samples, int) for b in back)


def test_a_summary_needs_a_count_for_every_rank() -> None:
    with pytest.raises(ValueError, match=r"ranks 1\.\.3"):
        Theorem3Summary(**{**_record(3, 2.0, True).__dict__, "paper_ranks": (2, 4)})
