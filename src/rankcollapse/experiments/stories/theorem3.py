"""Theorem 3 (paper §4.3.2, App. F): one bidiagonal W_V with equilibria of every rank; App. F.2-F.4.

Task ``theorem3_run``: ``rankcollapse.equilibria.theorem3.enumerate_equilibria`` (every real branch, the
paper's family labelled), each verified (residual, ``metrics.num_rank``), its tangent spectrum on the product
of spheres and convergence from nearby starts (``theorem3_checks``), App. F.2's bound on the full-rank ones,
Lemma 13's invariant set (App. F.3) and the complete-mask search (App. F.4). Figure: equilibria per rank and
family, and their unstable-direction counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Data,
    column,
    fmt,
)
from rankcollapse.experiments.plotting import empty, panel_grid

SOURCE = "paper §4.3.2, Thm 3, App. F"
FIGURE = "theorem3_equilibria"


def theorem3_run(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """Params: n (= d), w, starts, steps, lemma13_samples/_steps, f4_starts/_steps/_newton, seed.
    Rows: one per equilibrium. Summary: counts per rank and family, max residual, F.2, Lemma 13, F.4."""
    from rankcollapse.equilibria.finder import residual
    from rankcollapse.equilibria.lnmap import causal_mask
    from rankcollapse.equilibria.theorem3 import bidiagonal_value, enumerate_equilibria, zero_qk
    from rankcollapse.equilibria.theorem3_checks import (
        check_f2,
        check_f4,
        convergence_from_nearby,
        direction_counts,
        lemma13,
        srank_bound,
        tangent_moduli,
    )
    from rankcollapse.metrics import stable_rank

    n, w, seed = int(params["n"]), float(params["w"]), int(params["seed"])
    w_v = bidiagonal_value(n, w)
    eqs = enumerate_equilibria(w_v, n)
    conv = convergence_from_nearby(
        eqs, w_v, starts=int(params["starts"]), steps=int(params["steps"]), seed=seed
    )
    mask, qk = causal_mask(n), zero_qk(n)
    rows = []
    for e, c in zip(eqs, conv, strict=True):
        counts = direction_counts(tangent_moduli(e.x, w_v, mask, qk, block_triangular=True))
        rows.append(
            {
                "rank": e.rank,
                "family": e.family,
                "signs": str(e.signs),
                "residual": residual(e.x, w_v, mask, qk),
                **counts,
                "convergence": c["kind"],
                "share_returning": c["share_returning"],
                "exponent": c.get("exponent", np.nan),
                "stable_rank": float(stable_rank(e.x)),
            }
        )
    on_layer(int(params["steps"]))
    f2 = check_f2(eqs, w)
    l13 = lemma13(n, w, samples=int(params["lemma13_samples"]), steps=int(params["lemma13_steps"]), seed=seed)
    f4 = check_f4(
        w_v,
        n,
        starts=int(params["f4_starts"]),
        steps=int(params["f4_steps"]),
        newton_starts=int(params["f4_newton"]),
        seed=seed,
    )
    summary: dict[str, Any] = {
        "w_at_least_n": w >= n,
        "equilibria": len(eqs),
        "max_residual": max(r["residual"] for r in rows),
        "srank_bound": srank_bound(n, w),
        "f2_holds": all(r["holds"] for r in f2) if f2 else None,
        "f2_max_srank": max((r["stable_rank"] for r in f2), default=np.nan),
        "lemma13_share_stays": l13["share_stays"],
        "lemma13_share_rank2": l13["share_rank2"],
        "lemma13_samples": l13["samples"],
        "f4_max_rank": max(r["max_rank"] for r in f4),
        "f4_found": sum(r["found"] for r in f4),
        "min_neutral": min(r["neutral"] for r in rows),
        "source": "paper (bidiagonal W_V, W_Q = W_K = 0, causal)",
    }
    for k in range(1, n + 1):
        summary[f"paper_rank{k}"] = sum(r["rank"] == k and r["family"] == "paper" for r in rows)
        summary[f"other_rank{k}"] = sum(r["rank"] == k and r["family"] == "other" for r in rows)
    return RunOutput(rows, summary)


S_EVERY = (
    "The same bidiagonal W_V has equilibria of every rank k = 1..N at once: the first N - k + 1 tokens "
    "at e_d, then the Jordan chain with a free sign per token, 2^k of rank k (w >= N)"
)
S_BELOW = (
    "Below the paper's sufficient condition (w < N), equilibria of every rank still exist (ours, "
    "measured: the paper's family thins, other branches fill in)"
)
S_F2 = "App. F.2: every full-rank equilibrium has SRank(X*) <= N / (N - (N - 1) / w^2)"
S_F3 = (
    "App. F.3, Lemma 13: token 1 at e_d, token 2 with negative leading coordinates and X_{2,d-1} <= -1/w: "
    "the pair never reaches rank one"
)
S_F4 = "App. F.4 (conjecture): no such equilibria for the complete mask"
S_STAB = (
    "The equilibria are not hyperbolic (ours, measured): every one has neutral directions (token 1's "
    "Jordan block), so at best 'stable in certain directions' (§4.4)"
)


def _runs(data: Data, above: bool) -> pd.DataFrame:
    ok = data.ok
    return ok[column(ok, "summary.w_at_least_n").fillna(False).astype(bool) == above]


def every_rank_claim(data: Data) -> Claim:
    tol = data.v("residual_max", 1e-12)
    rule = (
        f"runs with w >= N: the paper's family has exactly 2^k equilibria of rank k for k = 1..N, residuals "
        f"<= {tol} -> reproduced; else not reproduced; no such run -> inconclusive"
    )
    runs = _runs(data, True)
    if runs.empty:
        return data.claim(
            "thm3.every_rank", S_EVERY, SOURCE, rule, "no run with w >= N", INCONCLUSIVE, figure=FIGURE
        )
    parts, good = [], True
    for _, r in runs.iterrows():
        n = int(r["n"])
        counts = [int(r[f"summary.paper_rank{k}"]) for k in range(1, n + 1)]
        good &= counts == [2**k for k in range(1, n + 1)] and float(r["summary.max_residual"]) <= tol
        parts.append(
            f"N = d = {n}, w = {r['w']}: paper family {counts} by rank, {int(r['summary.equilibria'])} "
            f"equilibria in all, max residual {fmt(r['summary.max_residual'])}"
        )
    return data.claim(
        "thm3.every_rank",
        S_EVERY,
        SOURCE,
        rule,
        "; ".join(parts),
        REPRODUCED if good else NOT_REPRODUCED,
        runs,
        FIGURE,
    )


def below_claim(data: Data) -> Claim:
    rule = "runs with w < N: some equilibrium (any branch) of every rank k = 1..N -> reproduced; else not"
    runs = _runs(data, False)
    if runs.empty:
        return data.claim(
            "thm3.below_w", S_BELOW, "ours (measured)", rule, "no run with w < N", INCONCLUSIVE, figure=FIGURE
        )
    parts, good = [], True
    for _, r in runs.iterrows():
        n = int(r["n"])
        paper = [int(r[f"summary.paper_rank{k}"]) for k in range(1, n + 1)]
        other = [int(r[f"summary.other_rank{k}"]) for k in range(1, n + 1)]
        good &= all(p + o > 0 for p, o in zip(paper, other, strict=True))
        parts.append(f"N = {n}, w = {r['w']}: paper {paper}, other {other}")
    return data.claim(
        "thm3.below_w",
        S_BELOW,
        "ours (measured)",
        rule,
        "; ".join(parts),
        REPRODUCED if good else NOT_REPRODUCED,
        runs,
        FIGURE,
    )


def f2_claim(data: Data) -> Claim:
    rule = (
        "every full-rank equilibrium (every run) within the bound -> reproduced; any above -> not reproduced"
    )
    ok = data.ok
    holds = [bool(v) for v in column(ok, "summary.f2_holds") if v is not None and not pd.isna(v)]
    ev = "; ".join(
        f"N = {r['n']}, w = {r['w']}: max SRank {fmt(r['summary.f2_max_srank'], 5)} <= bound "
        f"{fmt(r['summary.srank_bound'], 5)}"
        for _, r in ok.iterrows()
    )
    verdict = INCONCLUSIVE if not holds else (REPRODUCED if all(holds) else NOT_REPRODUCED)
    return data.claim("f2.srank", S_F2, "paper App. F.2", rule, ev, verdict, ok, FIGURE)


def f3_claim(data: Data) -> Claim:
    rule = (
        "every sampled start keeps rank 2 at every layer -> reproduced (the share that also keeps "
        "X_{2,d-1} <= -1/w is reported: the lemma's condition on ratios is not applied); else not"
    )
    ok = data.ok
    rank2 = column(ok, "summary.lemma13_share_rank2").astype(float)
    ev = "; ".join(
        f"d = {r['n']}, w = {r['w']}: {int(r['summary.lemma13_samples'])} starts, rank 2 kept by "
        f"{r['summary.lemma13_share_rank2']:.3f}, X_(2,d-1) <= -1/w kept by "
        f"{r['summary.lemma13_share_stays']:.3f}"
        for _, r in ok.iterrows()
    )
    verdict = REPRODUCED if bool((rank2 == 1.0).all()) else NOT_REPRODUCED
    return data.claim("f3.lemma13", S_F3, "paper App. F.3", rule, ev, verdict, ok, FIGURE)


def f4_claim(data: Data) -> Claim:
    rule = (
        "complete mask, same W_V, W_QK in {0, -I, I}: every equilibrium found (random starts + Newton) has "
        "rank "
        "1 -> reproduced (consistent with the conjecture); a higher rank -> not reproduced"
    )
    ok = data.ok
    mx = column(ok, "summary.f4_max_rank").astype(float)
    ev = (
        f"{int(column(ok, 'summary.f4_found').astype(float).sum())} equilibria found over the runs, highest "
        f"rank {int(mx.max())} (W_QK = 0: every token is normalize(mean(X) W_V) after one layer: rank 1)"
    )
    return data.claim(
        "f4.complete",
        S_F4,
        "paper App. F.4 (conjecture), searched by us",
        rule,
        ev,
        REPRODUCED if float(mx.max()) <= 1 else NOT_REPRODUCED,
        ok,
        FIGURE,
    )


def stability_claim(data: Data) -> Claim:
    rule = (
        "every equilibrium has at least one neutral direction (| |lambda| - 1 | <= 1e-9 after clustering "
        "Jordan eigenvalues) -> reproduced; else not. Evidence: counts with no unstable direction, and "
        "how nearby starts converge"
    )
    table = data.table.merge(data.ok[["run_id"]], on="run_id")
    neutral = table["neutral"].astype(int)
    no_unstable = table[table["unstable"].astype(int) == 0]
    kinds = table["convergence"].value_counts().to_dict()
    alg = table[table["convergence"] == "algebraic"]["exponent"].astype(float)
    ev = (
        f"{len(table)} equilibria: neutral directions >= {int(neutral.min())}; {len(no_unstable)} without an "
        "unstable "
        f"direction (ranks {sorted(set(no_unstable['rank'].astype(int)))}); nearby starts: {kinds}"
        + (f", algebraic exponent {fmt(alg.min(), 3)}..{fmt(alg.max(), 3)}" if not alg.empty else "")
    )
    verdict = REPRODUCED if int(neutral.min()) >= 1 else NOT_REPRODUCED
    return data.claim(
        "thm3.not_hyperbolic",
        S_STAB,
        "ours (measured; the paper §4.4 only observes it)",
        rule,
        ev,
        verdict,
        data.ok,
        FIGURE,
    )


def claims(data: Data) -> list[Claim]:
    if data.ok.empty:
        return [
            data.no_data(cid, s, SOURCE, "", FIGURE)
            for cid, s in (
                ("thm3.every_rank", S_EVERY),
                ("thm3.below_w", S_BELOW),
                ("f2.srank", S_F2),
                ("f3.lemma13", S_F3),
                ("f4.complete", S_F4),
                ("thm3.not_hyperbolic", S_STAB),
            )
        ]
    return [
        every_rank_claim(data),
        below_claim(data),
        f2_claim(data),
        f3_claim(data),
        f4_claim(data),
        stability_claim(data),
    ]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Theorem 3, the paper's construction (bidiagonal W_V, W_Q = W_K = 0, causal): equilibria per rank "
        "(paper's family vs other branches) for each (N = d, w), and the number of unstable directions of "
        "each (tangent map on the product of spheres)."
    )
    ok = data.ok
    if ok.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    table = data.table.merge(ok[["run_id"]], on="run_id")
    keys = list(dict.fromkeys(zip(table["n"], table["w"], strict=True)))
    fig, axes = panel_grid(len(keys), ncols=3, w=3.4)
    for ax, (n, w) in zip(axes, keys, strict=True):
        sub = table[(table["n"] == n) & (table["w"] == w)]
        ranks = np.arange(1, int(n) + 1)
        paper = [int(((sub["rank"] == k) & (sub["family"] == "paper")).sum()) for k in ranks]
        other = [int(((sub["rank"] == k) & (sub["family"] == "other")).sum()) for k in ranks]
        ax.bar(ranks, paper, color="C0", label="paper's family")
        ax.bar(ranks, other, bottom=paper, color="C1", label="other branches")
        jitter = (np.arange(len(sub)) % 7 - 3) * 0.04
        ax2 = ax.twinx()
        ax2.plot(sub["rank"].astype(float) + jitter, sub["unstable"], "k.", ms=3)
        ax2.set_ylabel("unstable directions", fontsize=7)
        ax.set_title(f"N = d = {n}, w = {w}", fontsize=9)
        ax.set_xlabel("rank")
    axes[0].set_ylabel("equilibria")
    axes[0].legend(fontsize=6)
    fig.suptitle("Theorem 3, the paper's construction: equilibria of every rank", fontsize=10)
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="theorem3", task=theorem3_run, claims=claims, figures=figures)
