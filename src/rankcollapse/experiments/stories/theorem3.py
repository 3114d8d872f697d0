"""Theorem 3 (paper §4.3.2, App. F): one bidiagonal W_V with equilibria of every rank; App. F.2-F.4; §4.4.

Arm ``paper`` (task ``theorem3_run``): ``rankcollapse.equilibria.theorem3.enumerate_equilibria`` (every real
branch, the paper's family labelled), each verified (residual, ``metrics.num_rank``), its tangent
spectrum on the product of spheres and convergence from nearby starts (``theorem3_checks``), App. F.2's
bound on the full-rank ones and Lemma 13 with starts inside all of its hypotheses (App. F.3); the paper's
§4.4 is judged in two halves per N = d, "stable in certain directions" on the measured spectra and
directional starts, "small regions of attraction" on the nearby starts with token 1 held. Arm
``complete`` (task ``complete_mask_run``): App. F.4's conjecture searched, the complete mask with the same
W_V and W_QK free (``rankcollapse.equilibria.complete_mask``), judged as three rows: lower ranks (a search),
full rank (a proof, Perron-Frobenius, with the search beside it), attracting ones (a search). Arm
``designed`` (ours, after the paper's rows): one designed W_V per rank with a stable (hyperbolic)
equilibrium of that rank and its measured basin.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import checks_row, claim_row, judged
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.plots import (
    annotated_heatmap,
    empty,
    figure,
    label_axes,
    panel_grid,
    quantity_label,
    reference_line,
)
from rankcollapse.experiments.kit.rules import every_run, regions_of_attraction, stable_in_certain_directions
from rankcollapse.experiments.kit.tasks.equilibria import (
    COMPLETE_MASK_RUN,
    EQUILIBRIUM_RANK,
    THEOREM3_RUN,
    CompleteMaskSummary,
    check_residual_max,
    complete_mask_summaries,
    theorem3_summaries,
)
from rankcollapse.experiments.kit.thresholds import Thresholds

SOURCE = "paper §4.3.2, Thm 3, App. F"
FIGURE, COMPLETE, DESIGNED = "theorem3_equilibria", "theorem3_complete_mask", "ext_theorem3_designed"
#: Where the full-rank row's proof is written.
PROOF = (
    "docs/equilibria.md, section 'App. F.4' (Perron-Frobenius: at a full-rank equilibrium C^-1 A = "
    "X W_V^-1 X^-1, but C^-1 A is entrywise positive, so its dominant eigenvalue is simple, while W_V^-1 "
    "has the eigenvalue 1 N times)"
)


STATEMENTS = (
    Statement(
        "every_rank",
        "The same bidiagonal W_V has equilibria of every rank k = 1..N at once: the first "
        "N - k + 1 tokens at e_d, then the Jordan chain with a free sign per token, 2^k of rank k (w >= N)",
        SOURCE,
        "runs with w >= N: the paper's family has exactly 2^k equilibria of rank k for k = 1..N, "
        "residuals <= residual_max -> reproduced; else not reproduced",
    ),
    Statement(
        "below_w",
        "Below the paper's sufficient condition (w < N), equilibria of every rank still exist",
        "ours (measured)",
        "runs with w < N: some equilibrium (any branch) of every rank k = 1..N -> confirmed",
        ours=True,
    ),
    Statement(
        "srank",
        "App. F.2: every full-rank equilibrium has SRank(X*) <= N / (N - (N - 1) / w^2)",
        "paper App. F.2",
        "every full-rank equilibrium (every run) within the bound -> reproduced",
    ),
    Statement(
        "lemma13",
        "App. F.3, Lemma 13: token 1 at e_d and token 2 inside the lemma's hypotheses (ratios "
        "X_{2,i}/X_{2,1} = r_i w^{i-1}, r_i > 0, X_{2,d-1} <= -1/w, the ratio condition <= sqrt(w^2 - 1)): "
        "X_{2,d-1} stays <= -1/w, the pair never reaches rank one",
        "paper App. F.3",
        "every start (sampled inside all hypotheses) keeps X_{2,d-1} <= -1/w and rank 2 at every layer -> "
        "reproduced; any that leaves -> not reproduced",
    ),
    Statement(
        "complete_lower_rank",
        "App. F.4 (conjecture): no such equilibria for undirected masks such as the complete graph; here "
        "of rank 2..N-1, with the paper's W_V and any W_QK",
        "paper App. F.4 (conjecture), searched by us",
        "complete mask, the paper's W_V, M = W_Q W_K^T / sqrt(d_QK) free: least squares over (Y, M_k) in the "
        "W_V-invariant subspace span{e_(d-k+1..d)} from random starts, every end measured on the full map; "
        "an end with residual <= residual_max, numerical rank exactly k (2 <= k <= N-1) and smallest "
        "attention weight >= attention_min (no saturated softmax) is an equilibrium of rank k, which "
        "contradicts the conjecture -> not reproduced (for that W_QK), with hits per starts; none in any "
        "run -> consistent (none found in the search: a search cannot prove the conjecture)",
        kind="search",
    ),
    Statement(
        "complete_full_rank",
        "App. F.4 (conjecture), full rank: no full-rank equilibrium for the complete mask, the paper's W_V "
        "and any W_QK",
        "paper App. F.4 (conjecture), proven by us",
        f"a proof: {PROOF}; beside it, per run, the full-rank search (no end of rank N with residual <= "
        "residual_max and attention >= attention_min), the Perron gap of C^-1 A > 0 at random (X, M) and no "
        "random invertible Y passing the cone test -> consistent: proven; any of them failing -> not "
        "reproduced (the proof or the code is wrong)",
        kind="proof",
    ),
    Statement(
        "complete_attracting",
        "App. F.4 (conjecture): no attracting equilibria of rank >= 2 for the complete mask (the paper's "
        "W_V, any W_QK)",
        "paper App. F.4 (conjecture), searched by us",
        "every complete-mask equilibrium of rank >= 2 the search found (complete_lower_rank's): its starts "
        "1e-3 away (random tangent directions, every token perturbed) all leave, none back within 1e-3 "
        "after the run's layers -> consistent (none found in the search); one drawing back a start -> "
        "not reproduced; no equilibrium found -> inconclusive (nothing to test)",
        kind="search",
    ),
    Statement(
        "stable_directions",
        "§4.4, first half: these equilibria are 'stable in certain directions' in the authors' simulations",
        "paper §4.4 (observed, not proved)",
        "one row per N = d, on the paper's family in the runs with w >= N: for every rank k = 2..N some "
        "equilibrium has a stable tangent direction (|lambda| < 1 on the product of spheres) and the "
        "directional starts along its stable directions return (half the distance within twice the layers "
        "the eigenvalue needs) -> reproduced, decided by the rank with the fewest such equilibria; some rank "
        "with no stable direction in any equilibrium -> not reproduced, decided by that rank",
    ),
    Statement(
        "small_basins",
        "§4.4, second half: these equilibria have 'small regions of attraction' in the authors' simulations",
        "paper §4.4 (observed, not proved)",
        "one row per N = d, on the paper's family in the runs with w >= N: for every rank k = 2..N some "
        "equilibrium draws back a positive share of its nearby starts (1e-3 away, random tangent "
        "directions, token 1 held at e_d: the paper's §4.3.2 assumption that earlier tokens have "
        "converged) within 1e-3 after the run's layers -> reproduced, decided by the rank whose best share "
        "is smallest; some rank where none does -> not reproduced, decided by that rank. Reported beside "
        "it: the shares with every token perturbed. The regions' size is not judged (one distance)",
    ),
    Statement(
        "attracts_perturbed",
        "With every token perturbed (token 1 too), no equilibrium of rank >= 2 draws back a nearby start at "
        "N = d >= 3: token 1 returns to e_d only algebraically, and its transient drags the later tokens "
        "away",
        "ours (measured; the basin protocol the paper does not use)",
        "one row per N = d: no equilibrium of rank >= 2 (any branch, every w) has a start 1e-3 away (every "
        "token perturbed) back within 1e-3 after the run's layers -> confirmed; some has -> refuted",
        ours=True,
    ),
    Statement(
        "not_hyperbolic",
        "The equilibria are not hyperbolic: every one has neutral directions (token 1's Jordan block)",
        "ours (measured)",
        "every equilibrium has at least one neutral direction (| |lambda| - 1 | <= 1e-9) -> confirmed",
        ours=True,
    ),
    Statement(
        "designed",
        "Ours, one designed W_V per rank (not the paper's single W_V): the LayerNorm dynamics "
        "have stable (hyperbolic) equilibria of every rank 1..min(N, d), each attracting a positive-measure "
        "set of inputs",
        "ours (designed equilibria, one W_V per rank)",
        "every rank k has a construction whose X* has residual <= residual_max, numerical rank k and tangent "
        "spectral radius < 1 -> confirmed; a failed check -> refuted; no construction -> inconclusive",
        ours=True,
    ),
)
ARMS = (
    Arm("paper", THEOREM3_RUN),
    Arm("complete", COMPLETE_MASK_RUN),
    Arm("designed", EQUILIBRIUM_RANK, extension=True),
)


def _paper_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("paper")
    if data is None:
        return []
    ok, table = data.ok, data.rows
    tol = th["residual_max"]
    st = {s.key: s for s in STATEMENTS}
    runs = theorem3_summaries(ok)
    above = [(r, m) for r, m in runs if m.w_at_least_n]
    below = [(r, m) for r, m in runs if not m.w_at_least_n]

    def row(key: str, checks: list[tuple[str, bool | None, str]], which: pd.DataFrame, what: str) -> Claim:
        return checks_row("theorem3", st[key], data, th, checks, runs=which, figure=FIGURE, names=(what, ""))

    out = []
    if above:
        every_rank = [
            (
                f"N = d = {m.n}, w = {r['w']}",
                list(m.paper_ranks) == [2**k for k in range(1, m.n + 1)] and m.max_residual <= tol,
                f"paper family {list(m.paper_ranks)} by rank, {m.equilibria} in all, max residual "
                f"{m.max_residual:.2g}",
            )
            for r, m in above
        ]
        which = ok[[m.w_at_least_n for _, m in runs]]
        out.append(row("every_rank", every_rank, which, "enumerated equilibria"))
    if below:
        below_w = [
            (
                f"N = {m.n}, w = {r['w']}",
                all(p + o > 0 for p, o in zip(m.paper_ranks, m.other_ranks, strict=True)),
                f"paper {list(m.paper_ranks)}, other {list(m.other_ranks)}",
            )
            for r, m in below
        ]
        which = ok[[not m.w_at_least_n for _, m in runs]]
        out.append(row("below_w", below_w, which, "enumerated equilibria"))
    f2 = [
        (
            f"N = {r['tokens']}, w = {r['w']}",
            m.f2_holds,
            f"max SRank {m.f2_max_srank:.5g} against {m.srank_bound:.5g}",
        )
        for r, m in runs
    ]
    out.append(row("srank", f2, ok, "stable rank of the full-rank equilibria"))
    l13 = [
        (
            f"d = {r['tokens']}, w = {r['w']}",
            m.lemma13_share_stays == 1.0 and m.lemma13_share_rank2 == 1.0,
            f"{m.lemma13_samples} starts inside the hypotheses (ratio condition up to "
            f"{m.lemma13_max_condition:.3g} <= {m.lemma13_condition_limit:.3g}); "
            f"X_(2,d-1) <= -1/w kept by {m.lemma13_share_stays:.3f}, rank 2 by {m.lemma13_share_rank2:.3f}",
        )
        for r, m in runs
    ]
    out.append(row("lemma13", l13, ok, "iterated starts"))
    for n, g in table.groupby(table["tokens"].astype(int), sort=True):
        out.append(_directions_row(data, th, st["stable_directions"], int(n), g, ok))
        out.append(_basins_row(data, th, st["small_basins"], int(n), g, ok))
        if int(n) >= 3:  # the statement's scope: at N = d = 2 the full-rank B attracts (Fig. 1)
            out.append(_perturbed_row(data, th, st["attracts_perturbed"], int(n), g, ok))
    neutral = [
        (
            f"rank {int(k)}",
            int(g["neutral"].min()) >= 1,
            f"{len(g)} equilibria, neutral directions >= "
            f"{int(g['neutral'].min())}, {int((g['unstable'] == 0).sum())} without an unstable direction",
        )
        for k, g in table.groupby("rank", sort=True)
    ]
    out.append(
        checks_row(
            "theorem3",
            st["not_hyperbolic"],
            data,
            th,
            neutral,
            runs=ok,
            figure=FIGURE,
            names=("tangent spectra", ""),
        )
    )
    return out


def _rank_words(g: pd.DataFrame, k: int) -> str:
    """The tangent spectra and directional starts of the equilibria of rank ``k`` in ``g``."""
    r = g[g["rank"] == k]
    with_stable = r[r["stable"] > 0]
    along = int(with_stable["stable_returning"].sum())
    return (
        f"{len(r)} equilibria, {len(with_stable)} with a stable direction (directional starts "
        f"returned along {along} of {int(with_stable['stable'].sum())}), {int((r['unstable'] > 0).sum())} "
        f"with an unstable one, {int((r['stable'] == 0).sum())} with none stable"
    )


def _basin_words(g: pd.DataFrame, k: int) -> str:
    """The nearby starts of the equilibria of rank ``k`` in ``g`` back under both protocols, with counts."""
    r = g[g["rank"] == k]
    starts = r["starts"].astype(int)
    held, every = r["share_returning_held"].astype(float), r["share_returning"].astype(float)
    total = int(starts.sum())
    back_held, back_every = int(np.rint((held * starts).sum())), int(np.rint((every * starts).sum()))
    return (
        f"{len(r)} equilibria; token 1 held: {int((held > 0).sum())} draw starts back ({back_held} of "
        f"{total} starts, best share {held.max():.2f}); every token perturbed: {int((every > 0).sum())} "
        f"({back_every} of {total}, best {every.max():.2f})"
    )


def _theirs(g: pd.DataFrame, n: int) -> tuple[pd.DataFrame, str]:
    """The paper's family in the runs with w >= N (the statement's scope), and those w in words."""
    theirs = g[(g["family"] == "paper") & (g["w"].astype(float) >= n)]
    return theirs, ", ".join(f"{w:g}" for w in sorted(set(theirs["w"].astype(float))))


def _directions_row(
    data: Data, th: Thresholds, st: Statement, n: int, g: pd.DataFrame, ok: pd.DataFrame
) -> Claim:
    """§4.4's first half at N = d = ``n``: "stable in certain directions" on the tangent spectra and
    directional starts of the paper's family at w >= N, every rank k >= 2 (every branch beside it)."""
    theirs, ws = _theirs(g, n)
    ranks = {
        k: [(int(r["stable"]), int(r["stable_returning"])) for _, r in theirs[theirs["rank"] == k].iterrows()]
        for k in range(2, n + 1)
    }
    words = {k: _rank_words(theirs, k) for k in range(2, n + 1)}
    all_w = "; over every w and branch: " + "; ".join(
        f"rank {k}: {_rank_words(g, k)}" for k in range(2, n + 1)
    )
    judgement = stable_in_certain_directions(ranks, words).amended(
        before=f"N = d = {n}, paper's family at w = {ws} || ", after=all_w
    )
    return claim_row(
        "theorem3",
        st,
        data,
        th,
        judged(lambda t: judgement, th),
        qualifier=f"N = d = {n}",
        runs=ok[ok["tokens"].astype(int) == n],
        figure=FIGURE,
        names=("tangent spectra and directional starts", ""),
    )


def _basins_row(
    data: Data, th: Thresholds, st: Statement, n: int, g: pd.DataFrame, ok: pd.DataFrame
) -> Claim:
    """§4.4's second half at N = d = ``n``: "small regions of attraction" on the nearby starts of the
    paper's family at w >= N with token 1 held at e_d (every token perturbed beside it), every rank k >= 2."""
    theirs, ws = _theirs(g, n)
    ranks = {
        k: [
            (float(r["share_returning_held"]), float(r["share_returning"]))
            for _, r in theirs[theirs["rank"] == k].iterrows()
        ]
        for k in range(2, n + 1)
    }
    words = {k: _basin_words(theirs, k) for k in range(2, n + 1)}
    judgement = regions_of_attraction(ranks, words).amended(
        before=f"N = d = {n}, paper's family at w = {ws}, starts 1e-3 away || "
    )
    return claim_row(
        "theorem3",
        st,
        data,
        th,
        judged(lambda t: judgement, th),
        qualifier=f"N = d = {n}",
        runs=ok[ok["tokens"].astype(int) == n],
        figure=FIGURE,
        names=("nearby starts, token 1 held at e_d", ""),
    )


def _perturbed_row(
    data: Data, th: Thresholds, st: Statement, n: int, g: pd.DataFrame, ok: pd.DataFrame
) -> Claim:
    """Ours at N = d = ``n``: with every token perturbed, does an equilibrium of rank >= 2 draw a start
    back?"""
    high = g[g["rank"] >= 2]
    share = high["share_returning"].astype(float)
    words = (
        f"{len(high)} equilibria of rank >= 2 over w = "
        f"{', '.join(f'{w:g}' for w in sorted(set(high['w'].astype(float))))}; nearby starts back with every "
        f"token perturbed: {int((share > 0).sum())} draw some back (largest share {share.max():.2f}); with "
        f"token 1 held: {int((high['share_returning_held'].astype(float) > 0).sum())}"
    )
    check = [(f"N = d = {n}", bool((share == 0).all()), words)]
    runs = ok[ok["tokens"].astype(int) == n]
    return checks_row(
        "theorem3",
        st,
        data,
        th,
        check,
        qualifier=f"N = d = {n}",
        runs=runs,
        figure=FIGURE,
        names=("nearby starts, every token perturbed", ""),
    )


def verified(rows: pd.DataFrame, th: Thresholds) -> pd.DataFrame:
    """The search ends that are complete-mask equilibria of the rank searched: residual <= ``residual_max``
    on the full map, numerical rank exactly k, smallest attention weight >= ``attention_min`` (a saturated
    softmax can fake an equilibrium to rounding), and in the W_V-invariant subspace. A ``residual_max``
    above the runs' analysis cut (``complete_mask.ANALYSED_RESIDUAL``) is refused: those ends have no
    tangent spectrum or nearby starts."""
    check_residual_max(th["residual_max"])
    if rows.empty:
        return rows
    keep = (
        (rows["rank"].astype(int) == rows["k"].astype(int))
        & (rows["residual"].astype(float) <= th["residual_max"])
        & (rows["attention_min"].astype(float) >= th["attention_min"])
        & (rows["outside"].astype(float) == 0.0)
    )
    return rows[keep]


def _matrix(text: str, k: int) -> str:
    """M's trailing k x k block (the part that acts), rounded, from its stored JSON."""
    m = np.array(json.loads(text))[-k:, -k:]
    return "[" + "; ".join(", ".join(f"{v:.3g}" for v in row) for row in m) + "]"


def _lower_checks(runs: list[tuple[CompleteMaskSummary, pd.DataFrame]], t: Thresholds) -> Judgement:
    """complete_lower_rank: per (N, w, k < N), no verified equilibrium (holds) or some (fails, with them)."""
    checks: list[tuple[str, bool | None, str]] = []
    for s, rows in runs:
        for k, starts, drawn in zip(s.ranks, s.starts, s.drawn, strict=True):
            if k == s.n:
                continue
            mine = rows[rows["k"].astype(int) == k] if not rows.empty else rows
            hits = verified(mine, t)
            words = (
                f"{len(hits)} of {starts} starts (Y drawn {drawn} for the cone test) end at an equilibrium"
            )
            if len(hits):
                best = hits.loc[hits["attention_min"].astype(float).idxmax()]
                res, att = hits["residual"].astype(float).max(), hits["attention_min"].astype(float).min()
                big = hits["m_max"].astype(float).max()
                words += (
                    f" of rank {k}: one-step residual <= {res:.2g}, smallest attention weight >= {att:.2g}, "
                    f"|M_ab| <= {big:.3g}; e.g. start {int(best['start'])}, M's trailing block "
                    f"{_matrix(best['m'], k)}"
                )
            checks.append((f"N = d = {s.n}, w = {s.w:g}, rank {k}", not len(hits), words))
    return every_run(checks, empty="no rank 2..N-1 searched (N = d >= 3 needed)")


def _full_rank_checks(runs: list[tuple[CompleteMaskSummary, pd.DataFrame]], t: Thresholds) -> Judgement:
    """complete_full_rank: per (N, w), the full-rank search found none and both random checks agree."""
    checks: list[tuple[str, bool | None, str]] = []
    for s, rows in runs:
        mine = rows[rows["k"].astype(int) == s.n] if not rows.empty else rows
        hits = verified(mine, t)
        full = mine[mine["rank"].astype(int) == s.n] if not mine.empty else mine
        slid = (
            int(
                (
                    (mine["rank"].astype(int) < s.n) & (mine["residual"].astype(float) <= t["residual_max"])
                ).sum()
            )
            if not mine.empty
            else 0
        )
        best = f"{full['residual'].astype(float).min():.2g}" if not full.empty else "none kept rank N"
        c = s.checks
        holds = not len(hits) and c.min_gap > 0 and c.max_imag == 0 and c.max_cone <= 0
        checks.append(
            (
                f"N = d = {s.n}, w = {s.w:g}",
                holds,
                f"full-rank search: {len(hits)} of {s.starts[-1]} starts end at a full-rank equilibrium "
                f"(best residual of an end that kept rank {s.n}: {best}; {slid} slid to a lower-rank "
                "equilibrium); "
                f"Perron gap of C^-1 A >= {c.min_gap:.3g} over {c.draws} random (X, M); largest cone margin "
                f"of those X {c.max_cone:.3g} (< 0: no positive attention makes them equilibria)",
            )
        )
    return every_run(checks, empty="no complete-mask run")


def _attracting_checks(runs: list[tuple[CompleteMaskSummary, pd.DataFrame]], t: Thresholds) -> Judgement:
    """complete_attracting: per (N, w, k) with equilibria found, none draws back a nearby start."""
    checks: list[tuple[str, bool | None, str]] = []
    for s, rows in runs:
        hits = verified(rows[rows["k"].astype(int) < s.n], t) if not rows.empty else rows
        for k, h in hits.groupby(hits["k"].astype(int), sort=True) if not hits.empty else []:
            nearby = int(h["nearby"].iloc[0])
            back = int(np.rint((h["share_back"].astype(float) * nearby).sum()))
            mods = h["top_modulus"].astype(float)
            checks.append(
                (
                    f"N = d = {s.n}, w = {s.w:g}, rank {k}",
                    back == 0,
                    f"{len(h)} equilibria: {int((h['unstable'].astype(float) > 0).sum())} with an unstable "
                    f"tangent direction (largest modulus {mods.min():.3g} to {mods.max():.3g}); nearby "
                    f"starts back: {back} of {len(h) * nearby} ({int(h['layers'].iloc[0])} layers)",
                )
            )
    if not checks:
        checks.append(("every run", None, "no complete-mask equilibrium of rank >= 2 found, nothing to test"))
    return every_run(checks)


def _complete_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    """App. F.4's three rows: lower ranks (search), full rank (proof, the search beside it), attracting
    ones (search)."""
    data = sd.arm("complete")
    if data is None:
        return []
    runs = complete_mask_summaries(data)
    st = {s.key: s for s in STATEMENTS}
    out = []
    for key, rule, names in (
        ("complete_lower_rank", _lower_checks, "complete-mask search"),
        ("complete_full_rank", _full_rank_checks, "full rank"),
        ("complete_attracting", _attracting_checks, "found equilibria, nearby starts"),
    ):
        j = judged(lambda t, rule=rule: rule(runs, t), th)
        if key == "complete_full_rank":
            j = type(j)(j.judgement.amended(before=f"proof: {PROOF} || "), j.used, j.flips)
        out.append(
            claim_row("theorem3", st[key], data, th, j, runs=data.ok, figure=COMPLETE, names=(names, ""))
        )
    return out


def _designed_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("designed")
    if data is None:
        return []
    rows = data.rows.sort_values("k")
    tol = th["residual_max"]
    checks = []
    for _, r in rows.iterrows():
        k = int(r["k"])
        if not bool(r["constructed"]):
            checks.append((f"k={k}", None, "no construction"))
            continue
        good = float(r["residual"]) <= tol and int(r["rank"]) == k and bool(r["stable"])
        checks.append(
            (
                f"k={k}",
                good,
                f"rank {int(r['rank'])}, residual {float(r['residual']):.2g}, spectral radius "
                f"{float(r['spectral_radius']):.3g}, basin share within {float(r['basin_radius']):.0e}: "
                f"{float(r['basin_fraction']):.2f} [{float(r['basin_ci_low']):.2f}, "
                f"{float(r['basin_ci_high']):.2f}]",
            )
        )
    st = next(s for s in STATEMENTS if s.key == "designed")
    return [checks_row("theorem3", st, data, th, checks, figure=DESIGNED, names=("designed equilibria", ""))]


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("theorem3", sd.verdict, sd.ranges)
    return _paper_rows(sd, th) + _complete_rows(sd, th) + _designed_rows(sd, th)


def _search_table(runs: list[tuple[CompleteMaskSummary, pd.DataFrame]], th: Thresholds) -> pd.DataFrame:
    """Per (N, w, rank searched): starts, Y drawn, verified equilibria (hits), the largest residual and
    tangent modulus among them, and their nearby starts back of all."""
    out = []
    for s, rows in runs:
        for k, starts, drawn in zip(s.ranks, s.starts, s.drawn, strict=True):
            mine = rows[rows["k"].astype(int) == k] if not rows.empty else rows
            hits = verified(mine, th)
            nearby = int(hits["nearby"].iloc[0]) if len(hits) else 0
            out.append(
                {
                    "tokens": s.n,
                    "w": s.w,
                    "k": k,
                    "starts": starts,
                    "drawn": drawn,
                    "hits": len(hits),
                    "max_residual": float(hits["residual"].astype(float).max()) if len(hits) else np.nan,
                    "min_top_modulus": float(hits["top_modulus"].astype(float).min())
                    if len(hits)
                    else np.nan,
                    "max_top_modulus": float(hits["top_modulus"].astype(float).max())
                    if len(hits)
                    else np.nan,
                    "unstable": int((hits["unstable"].astype(float) > 0).sum()) if len(hits) else 0,
                    "nearby_back": int(np.rint((hits["share_back"].astype(float) * nearby).sum()))
                    if len(hits)
                    else 0,
                    "nearby_starts": len(hits) * nearby,
                }
            )
    return pd.DataFrame(out)


def _example(runs: list[tuple[CompleteMaskSummary, pd.DataFrame]], th: Thresholds) -> pd.Series | None:
    """The equilibrium the figure draws: N = d = 3, rank 2 (the smallest w first), the least saturated."""
    for s, rows in runs:
        if s.n != 3 or rows.empty:
            continue
        hits = verified(rows[rows["k"].astype(int) == 2], th)
        if len(hits):
            return hits.loc[hits["attention_min"].astype(float).idxmax()]
    return None


def _complete_figure(sd: StoryData) -> FigureSpec | None:
    """App. F.4's finding: an N = d = 3 rank-2 complete-mask equilibrium's tokens and attention matrix, and
    the hits per starts of every search."""
    data = sd.arm("complete")
    if data is None:
        return None
    th = Thresholds.of("theorem3", sd.verdict, sd.ranges)
    runs = complete_mask_summaries(data)
    table = _search_table(runs, th)
    ex = _example(runs, th)
    caption = (
        "App. F.4 (the paper conjectures no such equilibria for the complete mask), searched with the "
        "paper's W_V (1 on the diagonal, w above) and W_QK = M free. Left: the tokens of one exact "
        "complete-mask equilibrium of rank 2 at N = d = 3 (x_1 = 0 for every token: they lie in the "
        "W_V-invariant plane (x_2, x_3), on the unit circle); middle: its attention matrix "
        "A = softmax(X M X^T) (every weight positive); right: the share of least-squares starts that end "
        "at a verified equilibrium (residual <= residual_max on the full map, exact rank, attention not "
        "saturated), per N = d, w and rank; full rank (hatched) is impossible for every W_QK "
        "(Perron-Frobenius) and the search finds none."
    )
    if ex is None:
        return empty(COMPLETE, caption, "no complete-mask equilibrium of rank 2 at N = d = 3 found")
    x, m = np.array(json.loads(ex["x"])), np.array(json.loads(ex["m"]))
    logits = x @ m @ x.T
    a = np.exp(logits - logits.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    fig = figure(12, 3.8, layout="constrained")
    ax, hx, bx = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.6]})
    t = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(t), np.sin(t), color="0.8", lw=0.8)
    ax.plot([0], [1], marker="*", color="0.5", ms=10, ls="none", label="e_3 (where rank one collapses)")
    for i, (x2, x3) in enumerate(x[:, 1:]):
        ax.annotate("", (x2, x3), (0, 0), arrowprops={"arrowstyle": "->", "color": f"C{i}", "lw": 1.6})
        ax.text(1.15 * x2, 1.15 * x3, f"token {i + 1}", color=f"C{i}", ha="center", va="center", fontsize=8)
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)
    ax.set_aspect("equal")
    ax.set_xlabel("x_2")
    ax.set_ylabel("x_3")
    ax.legend(fontsize=6, loc="lower left")
    ax.set_title(
        f"N = d = 3, w = {float(ex['w']):g}: rank-2 equilibrium (x_1 = 0)\n"
        f"one-step residual {float(ex['residual']):.1g}",
        fontsize=8,
    )
    im = annotated_heatmap(hx, a, [f"key {j + 1}" for j in range(3)], [f"query {i + 1}" for i in range(3)],
                           vmin=0.0, vmax=1.0, fmt="{:.2f}", fontsize=8)
    hx.set_aspect("equal")
    hx.tick_params(labelsize=7)
    mk = m[1:, 1:]
    hx.set_title(
        f"its attention A = softmax(X M X^T)\nM's acting block [[{mk[0, 0]:.2f}, {mk[0, 1]:.2f}], "
        f"[{mk[1, 0]:.2f}, {mk[1, 1]:.2f}]]",
        fontsize=8,
    )
    fig.colorbar(im, ax=hx, shrink=0.8)
    groups = list(dict.fromkeys(zip(table["tokens"].astype(int), table["w"].astype(float), strict=True)))
    width = 0.8 / max(int(table["tokens"].max()) - 1, 1)
    drawn_labels: set[str] = set()
    for gi, (n, w) in enumerate(groups):
        g = table[(table["tokens"] == n) & (table["w"] == w)]
        for j, r in enumerate(g.itertuples()):
            full_rank = int(r.k) == n
            label = "full rank (impossible: Perron)" if full_rank else f"rank {int(r.k)}"
            pos, share = gi + (j - (len(g) - 1) / 2) * width, r.hits / max(int(r.starts), 1)
            bx.bar(
                pos,
                max(share, 0.01) if full_rank else share,
                width * 0.9,
                color="0.85" if full_rank else f"C{int(r.k) - 2}",
                hatch="//" if full_rank else None,
                edgecolor="0.4" if full_rank else None,
                label=None if label in drawn_labels else label,
            )
            drawn_labels.add(label)
            bx.text(pos, share + 0.02, f"{int(r.hits)}/{int(r.starts)}", ha="center", va="bottom", fontsize=7)
    bx.set_xticks(range(len(groups)), [f"N = d = {n}, w = {w:g}" for n, w in groups], fontsize=7)
    handles, names = bx.get_legend_handles_labels()
    order = sorted(range(len(names)), key=lambda i: (names[i].startswith("full"), names[i]))
    bx.legend([handles[i] for i in order], [names[i] for i in order], fontsize=7, loc="upper right")
    bx.set_ylim(0, 1.05)
    bx.set_ylabel("share of starts at an equilibrium")
    bx.set_title("least-squares starts that end at a verified equilibrium (hits / starts)", fontsize=8)
    fig.suptitle(
        "App. F.4: for some W_QK the complete mask has exact equilibria of rank >= 2 (none of full rank)",
        fontsize=10,
    )
    data_out = table.assign(example_x="", example_m="")
    at = (data_out["tokens"] == 3) & (data_out["k"] == 2) & (data_out["w"] == float(ex["w"]))
    data_out.loc[at, "example_x"], data_out.loc[at, "example_m"] = ex["x"], ex["m"]
    return FigureSpec(COMPLETE, fig, data_out, caption)


def figures(sd: StoryData) -> list[FigureSpec]:
    out = []
    data = sd.arm("paper")
    if data is not None:
        table = data.rows
        ns = sorted(set(table["tokens"].astype(int)))
        ws = sorted(set(table["w"].astype(float)))
        # one row per N = d; per w two panels: the equilibria by rank, and how many nearby starts come back
        fig = figure(2.6 * 2 * len(ws), 2.6 * len(ns), layout="constrained")
        axes = fig.subplots(len(ns), 2 * len(ws), squeeze=False)
        for row, n in enumerate(ns):
            for col, w in enumerate(ws):
                ax, bx = axes[row][2 * col], axes[row][2 * col + 1]
                sub = table[(table["tokens"].astype(int) == n) & (table["w"].astype(float) == w)]
                ranks = np.arange(1, n + 1)
                paper = [int(((sub["rank"] == k) & (sub["family"] == "paper")).sum()) for k in ranks]
                other = [int(((sub["rank"] == k) & (sub["family"] == "other")).sum()) for k in ranks]
                ax.bar(ranks, paper, color="C0", label="paper's family")
                ax.bar(ranks, other, bottom=paper, color="C1", label="other branches")
                jitter = (np.arange(len(sub)) % 7 - 3) * 0.04
                ax2 = ax.twinx()
                x = sub["rank"].astype(float) + jitter
                ax2.plot(x, sub["unstable"], "k.", ms=3, label="unstable directions")
                ax2.plot(x + 0.02, sub["stable"], "g+", ms=4, label="stable directions")
                ax2.tick_params(labelsize=7)
                ax.set_title(f"N = d = {n}, w = {w:g}: equilibria", fontsize=8)
                bx.set_title(f"N = d = {n}, w = {w:g}: starts back", fontsize=8)
                bx.plot(
                    x - 0.1,
                    sub["share_returning_held"].astype(float),
                    "o",
                    color="C2",
                    ms=4,
                    label="token 1 held at e_d",
                )
                bx.plot(
                    x + 0.1,
                    sub["share_returning"].astype(float),
                    "s",
                    color="C3",
                    ms=4,
                    mfc="none",
                    label="every token perturbed",
                )
                bx.set_ylim(-0.05, 1.05)
                for a_ in (ax, bx):
                    a_.set_xticks(ranks)
                    a_.set_xlabel(quantity_label("equilibrium_rank"), fontsize=8)
                if col == len(ws) - 1:
                    ax2.set_ylabel("directions (markers)", fontsize=7)
                if row == 0 and col == 0:
                    h1, l1 = ax.get_legend_handles_labels()
                    h2, l2 = ax2.get_legend_handles_labels()
                    ax.legend(h1 + h2, l1 + l2, fontsize=6, loc="upper left")
                    bx.legend(fontsize=6, loc="center left")
            axes[row][0].set_ylabel("equilibria")
            axes[row][1].set_ylabel("share of 8 starts back")
        fig.suptitle(
            "Theorem 3 (paper's construction): equilibria of every rank for one bidiagonal W_V, and how "
            "stable",
            fontsize=10,
        )
        caption = (
            "Theorem 3, the paper's construction (bidiagonal W_V, W_Q = W_K = 0, causal). Top: equilibria "
            "per "
            "rank (paper's family vs other branches) for each (N = d, w), with each equilibrium's unstable "
            "(dots) and stable (crosses) tangent directions on the product of spheres. Bottom: the share of "
            "8 "
            "starts 1e-3 away that come back within 1e-3, under two protocols: token 1 held at e_d (filled: "
            "the paper's §4.3.2 assumption that earlier tokens have converged) and every token perturbed "
            "(open)."
        )
        out.append(FigureSpec(FIGURE, fig, table, caption))
    complete = _complete_figure(sd)
    if complete is not None:
        out.append(complete)
    data = sd.arm("designed")
    if data is not None:
        rows = data.rows.sort_values("k").reset_index(drop=True)
        fig, axes = panel_grid(3, ncols=3, w=3.7, h=3.2)
        built = rows[rows["constructed"].astype(bool)]
        ks = rows["k"].astype(int).tolist()
        axes[0].bar(built["k"].astype(int), built["rank"].astype(float), color="C0")
        axes[0].plot(ks, ks, "k_", ms=20, label=quantity_label("target_rank"))
        axes[1].bar(built["k"].astype(int), built["spectral_radius"].astype(float), color="C2")
        reference_line(axes[1], 1.0, color="C3", ls="--")
        frac = built["basin_fraction"].astype(float)
        err = [frac - built["basin_ci_low"].astype(float), built["basin_ci_high"].astype(float) - frac]
        axes[2].bar(built["k"].astype(int), frac, yerr=err, color="C1", capsize=3)
        for ax, title in zip(
            axes,
            ("verified rank", "tangent spectral radius", "share of nearby inputs converging"),
            strict=True,
        ):
            ax.set_xticks(ks)
            label_axes(ax, "target_rank", title=title)
        axes[0].legend(fontsize=7)
        fig.suptitle(
            "Ours: designed stable equilibria, one W_V per rank (not the paper's construction)", fontsize=10
        )
        caption = (
            "Ours, beyond the paper: for each rank k a designed W_V whose equilibrium of rank k is "
            "hyperbolic "
            "and stable; verified rank, tangent spectral radius (stable below 1) and the share of nearby "
            "inputs "
            "converging to it (Wilson 95% interval; the sampling radius shrinks with k, see the rows)."
        )
        out.append(FigureSpec(DESIGNED, fig, rows, caption))
    return out


def _complete_headlines(sd: StoryData) -> list[str]:
    """App. F.4's finding, with the numbers of the search: the lower ranks found (hits per starts), how
    unstable they are, and the full rank's proof beside the full-rank search."""
    data = sd.arm("complete")
    if data is None:
        return []
    th = Thresholds.of("theorem3", sd.verdict, sd.ranges)
    t = _search_table(complete_mask_summaries(data), th)
    if t.empty:
        return []
    lower, full = t[t["k"] < t["tokens"]], t[t["k"] == t["tokens"]]
    found = lower[lower["hits"] > 0]
    full_words = (
        f"full rank is impossible for every W_QK (Perron-Frobenius, docs/equilibria.md), and the full-rank "
        f"search found {int(full['hits'].sum())} in {int(full['starts'].sum())} starts"
    )
    if found.empty:
        return [
            "App. F.4 searched (complete mask, the paper's W_V, W_QK free): no equilibrium of rank 2..N-1 "
            f"in {int(lower['starts'].sum())} starts; {full_words}."
        ]
    per_n = []
    for n, g in found.groupby("tokens", sort=True):
        ranks = sorted({int(k) for k in g["k"]})
        counts = "; ".join(
            f"rank {int(r.k)}, w = {r.w:g}: {int(r.hits)} of {int(r.starts)} starts" for r in g.itertuples()
        )
        rank_words = " and ".join(str(k) for k in ranks)
        per_n.append(f"of rank{'s' if len(ranks) > 1 else ''} {rank_words} at N = d = {int(n)} ({counts})")
    back, tried = int(found["nearby_back"].sum()), int(found["nearby_starts"].sum())
    attract = "none attracts" if back == 0 else f"some attract ({back} of {tried} nearby starts come back)"
    unstable, hits = int(found["unstable"].sum()), int(found["hits"].sum())
    lo, hi = found["min_top_modulus"].min(), found["max_top_modulus"].max()
    return [
        "App. F.4's conjecture does not hold for lower ranks: with the paper's W_V and a free W_QK the "
        f"complete mask has exact equilibria {', and '.join(per_n)}, one-step residual <= "
        f"{found['max_residual'].max():.2g} on the full map; {attract}: {unstable} of {hits} have an "
        f"unstable tangent direction (largest modulus {lo:.3g} to {hi:.3g}), {back} of {tried} nearby "
        f"starts come back; {full_words}."
    ]


def headlines(sd: StoryData) -> list[str]:
    """App. F.4's finding (:func:`_complete_headlines`), then how stable the paper's equilibria are, in its
    true scope: per N = d the full-rank equilibria with and without an unstable direction (and those with
    no stable one), and both basin protocols."""
    out = _complete_headlines(sd)
    data = sd.arm("paper")
    if data is None:
        return out
    t = data.rows
    for n, g in t.groupby(t["tokens"].astype(int), sort=True):
        full = g[g["rank"] == n]
        ws = ", ".join(f"{w:g}" for w in sorted(set(g["w"].astype(float))))
        per_w = len(full) // max(g["w"].nunique(), 1)
        unstable, no_stable = int((full["unstable"] > 0).sum()), int((full["stable"] == 0).sum())
        attract = full[(full["unstable"] == 0) & (full["stable"] > 0)]
        out.append(
            f"N = d = {n} (w = {ws}, {per_w} full-rank equilibria per w): {unstable} of {len(full)} "
            f"full-rank equilibria have an unstable tangent direction, {no_stable} have no stable one (so "
            f"'saddle' is not exact for those), {len(attract)} have no unstable direction"
            + (
                f"; with token 1 held at e_d those draw back up to "
                f"{attract['share_returning_held'].astype(float).max():.2f} of nearby starts"
                if not attract.empty
                else ""
            )
            + "."
        )
    high = t[(t["rank"] >= 2) & (t["tokens"].astype(int) >= 3)]
    if not high.empty:
        held = high["share_returning_held"].astype(float)
        out.append(
            "Basin protocol, N = d >= 3, rank >= 2: with token 1 held at e_d (the paper's §4.3.2 "
            f"assumption) {int((held > 0).sum())} of {len(high)} equilibria draw back nearby starts (up to "
            f"{held.max():.2f}); with every token perturbed "
            f"{int((high['share_returning'].astype(float) > 0).sum())} do: token 1 "
            "returns to e_d only algebraically, and its transient drags the later tokens away."
        )
    return out


STORY = story_here(__name__)
