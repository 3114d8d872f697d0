"""Theorem 3's measurements come back from the run index as the typed record they were stored from, and
App. F.4's rows read the words their stored complete-mask runs call for."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from rankcollapse.equilibria.complete_mask import CompleteMaskSummary, FullRankChecks
from rankcollapse.equilibria.theorem3_checks import Theorem3Summary
from rankcollapse.experiments.contract.story import Data, StoryData
from rankcollapse.experiments.engine.config import load_arms
from rankcollapse.experiments.engine.store import SUMMARY_PREFIX, run_summary
from rankcollapse.experiments.stories import all_stories


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


# App. F.4's three rows, judged from stored complete-mask runs (a table row per search end, a summary per
# run), built here by hand: what counts as an equilibrium, and which word each row then reads.


def _end(k: int, rank: int, residual: float, attention_min: float, share_back: float = 0.0) -> dict:
    """One search end as a complete-mask run stores it (x, m: JSON lists; tangent columns where at rest)."""
    x = np.zeros((3, 3))
    x[:, 3 - k :] = np.eye(3)[:, :k] + 0.1
    return {
        "k": k,
        "start": 0,
        "residual": residual,
        "rank": rank,
        "sigma_ratio": 0.5,
        "attention_min": attention_min,
        "m_max": 1.0,
        "outside": 0.0,
        "x": json.dumps(x.tolist()),
        "m": json.dumps(np.eye(3).tolist()),
        "top_modulus": 5.0,
        "unstable": 2,
        "neutral": 1,
        "stable": 3,
        "share_back": share_back,
    }


def _complete_rows(
    ends: list[dict], checks: FullRankChecks = FullRankChecks(8, 0.3, 0.0, -0.1)
) -> dict[str, tuple[str, str, str]]:
    """claim id -> (verdict, as_plotted, decided_by) of the theorem3 story's App. F.4 rows on one run at
    N = d = 3, w = 2 (4 starts at rank 2, 2 at full rank) whose search ended at ``ends``."""
    found = all_stories()["theorem3"]
    exp = next(
        e for e in load_arms(found.config, "tiny", "theorem3", found.story.tasks) if e.arm == "complete"
    )
    params = {"tokens": 3, "w": 2.0, "nearby": 2, "layers": 300, "seed": 0}  # the table's names
    summary = CompleteMaskSummary(3, 2.0, (2, 3), (4, 2), (9, 2), checks).to_summary()
    index = pd.DataFrame(
        [
            {"run_id": "r", "experiment": exp.name, "status": "ok", **params}
            | {f"{SUMMARY_PREFIX}{k}": v for k, v in summary.items()}
        ]
    )
    table = pd.DataFrame([{"run_id": "r", "experiment": exp.name, **params, **e} for e in ends])
    sd = StoryData("theorem3", {"complete": Data(exp, table, index)}, dict(exp.verdict), dict(exp.ranges))
    return {c.id: (c.verdict, c.as_plotted, c.decided_by) for c in found.story.claims(sd)}


def test_a_verified_lower_rank_equilibrium_contradicts_app_f4_and_the_proof_row_stands() -> None:
    rows = _complete_rows([_end(2, 2, 3e-16, 1e-3), _end(2, 1, 1e-16, 0.3), _end(3, 3, 2e-3, 1e-2)])
    verdict, plotted, by = rows["theorem3.complete_lower_rank"]
    assert (verdict, plotted) == ("not reproduced", "not reproduced")
    assert "N = d = 3, w = 2, rank 2: 1 of 4 starts" in by
    assert rows["theorem3.complete_full_rank"][:2] == ("consistent: proven", "consistent")
    assert rows["theorem3.complete_attracting"][:2] == ("consistent: none found in the search", "consistent")


def test_a_saturated_or_collapsed_end_is_no_equilibrium() -> None:
    # at rest to rounding, but with a saturated softmax (smallest weight 1e-20), or collapsed to rank one
    rows = _complete_rows([_end(2, 2, 1e-13, 1e-20), _end(2, 1, 1e-16, 0.3)])
    assert rows["theorem3.complete_lower_rank"][:2] == ("consistent: none found in the search", "consistent")
    assert rows["theorem3.complete_attracting"][0] == "inconclusive"  # nothing found to test
    assert all(p != "reproduced" for _, p, _ in rows.values())


def test_an_equilibrium_that_draws_a_start_back_contradicts_no_attracting_ones() -> None:
    rows = _complete_rows([_end(2, 2, 3e-16, 1e-3, share_back=0.5)])
    verdict, _, by = rows["theorem3.complete_attracting"]
    assert verdict == "not reproduced" and "nearby starts back: 1 of 2" in by


@pytest.mark.parametrize(
    "ends, checks",
    [
        ([_end(3, 3, 3e-16, 1e-3)], FullRankChecks(8, 0.3, 0.0, -0.1)),  # a full-rank equilibrium found
        ([], FullRankChecks(8, 0.0, 0.0, -0.1)),  # a Perron gap of 0
        ([], FullRankChecks(8, 0.3, 0.0, 0.01)),  # an invertible Y passing the cone test
    ],
)
def test_the_proof_row_fails_when_its_search_or_its_random_checks_disagree(ends, checks) -> None:
    assert _complete_rows(ends, checks)["theorem3.complete_full_rank"][:2] == (
        "not reproduced",
        "not reproduced",
    )
