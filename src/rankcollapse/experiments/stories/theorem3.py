"""Theorem 3 (paper §4.3.2, App. F): one bidiagonal W_V with equilibria of every rank; App. F.2-F.4; §4.4.

Arm ``paper`` (task ``theorem3_run``): ``rankcollapse.equilibria.theorem3.enumerate_equilibria`` (every real
branch, the paper's family labelled), each verified (residual, ``metrics.num_rank``), its tangent
spectrum on the product of spheres and convergence from nearby starts (``theorem3_checks``), App. F.2's
bound on the full-rank ones, Lemma 13 with starts inside all of its hypotheses (App. F.3) and the
complete-mask search (App. F.4); the paper's §4.4 stability language is judged per rank against the
measured spectra and returns. Arm ``designed`` (ours, after the paper's rows): one designed W_V per
rank with a stable (hyperbolic) equilibrium of that rank and its measured basin.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.edge.validate import param_float, param_int
from rankcollapse.equilibria.theorem3_checks import Theorem3Summary
from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.engine.store import run_summary
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task
from rankcollapse.experiments.kit.claims import checks_row, claim_row, judged
from rankcollapse.experiments.kit.plots import figure
from rankcollapse.experiments.kit.rules import stable_in_certain_directions
from rankcollapse.experiments.kit.thresholds import Thresholds

SOURCE = "paper §4.3.2, Thm 3, App. F"
FIGURE, DESIGNED = "theorem3_equilibria", "ext_theorem3_designed"


def theorem3_run(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """``equilibria.theorem3_checks.theorem3_measurements`` on a run's params: n (= d), w, starts, steps,
    lemma13_samples/_steps, f4_starts/_steps/_newton, seed. Rows: one per equilibrium; summary: counts
    per rank and family, max residual, F.2, Lemma 13, F.4."""
    from rankcollapse.equilibria.theorem3_checks import theorem3_measurements

    keys = (
        "starts",
        "steps",
        "lemma13_samples",
        "lemma13_steps",
        "f4_starts",
        "f4_steps",
        "f4_newton",
        "seed",
    )
    rows, summary = theorem3_measurements(
        param_int(params, "n"),
        param_float(params, "w"),
        **{k: param_int(params, k, low=0 if k == "seed" else 1) for k in keys},
    )
    on_layer(param_int(params, "steps"))
    return RunOutput(rows, summary.to_summary())


def equilibrium_rank(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """Ours: ``equilibria.construction.designed_measurement`` on a run's params (n, d, k, samples, radius,
    steps, seed): a stable equilibrium of rank ``k`` for its own designed W_V."""
    from rankcollapse.equilibria.construction import designed_measurement

    rows, summary = designed_measurement(
        param_int(params, "n"),
        param_int(params, "d"),
        param_int(params, "k"),
        samples=param_int(params, "samples"),
        radius=params["radius"],
        steps=param_int(params, "steps"),
        seed=param_int(params, "seed", low=0),
    )
    on_layer(param_int(params, "steps"))
    return RunOutput(rows, summary)


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
        "complete",
        "App. F.4 (conjecture): no such equilibria for the complete mask",
        "paper App. F.4 (conjecture), searched by us",
        "complete mask, same W_V, W_QK in {0, -I, I}: every equilibrium found (random starts + Newton) has "
        "rank 1 -> consistent (none found in the search: a search cannot prove the conjecture); a higher "
        "rank -> not reproduced",
        kind="search",
    ),
    Statement(
        "attracts",
        "§4.4: these equilibria are 'stable in certain directions', with small regions of "
        "attraction, in the authors' simulations",
        "paper §4.4 (observed, not proved)",
        "one row per N = d, on the paper's family in the runs with w >= N: for every rank k = 2..N some "
        "equilibrium has a stable tangent direction (|lambda| < 1 on the product of spheres) and the "
        "directional starts along its stable directions return (half the distance within twice the layers "
        "the eigenvalue needs) -> reproduced; some rank with no stable direction in any equilibrium -> not "
        "reproduced. Reported beside it: the basin share of starts 1e-3 away with token 1 held at e_d (the "
        "paper's §4.3.2 assumption that earlier tokens have converged) and with every token perturbed",
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
ARMS = (Arm("paper", Task(theorem3_run)), Arm("designed", Task(equilibrium_rank), extension=True))


def _measured(ok: pd.DataFrame) -> list[tuple[pd.Series, Theorem3Summary]]:
    """Each finished run's index row (its parameters, as the labels print them) with its summary read
    back as the typed record (the measurements)."""
    return [(r, Theorem3Summary.from_summary(r["n"], r["w"], run_summary(r))) for _, r in ok.iterrows()]


def _paper_rows(sd: StoryData, th: Thresholds) -> list[Claim]:
    data = sd.arm("paper")
    if data is None:
        return []
    ok, table = data.ok, data.rows
    tol = th["residual_max"]
    st = {s.key: s for s in STATEMENTS}
    runs = _measured(ok)
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
            f"N = {r['n']}, w = {r['w']}",
            m.f2_holds,
            f"max SRank {m.f2_max_srank:.5g} against {m.srank_bound:.5g}",
        )
        for r, m in runs
    ]
    out.append(row("srank", f2, ok, "stable rank of the full-rank equilibria"))
    l13 = [
        (
            f"d = {r['n']}, w = {r['w']}",
            m.lemma13_share_stays == 1.0 and m.lemma13_share_rank2 == 1.0,
            f"{m.lemma13_samples} starts inside the hypotheses (ratio condition up to "
            f"{m.lemma13_max_condition:.3g} <= {m.lemma13_condition_limit:.3g}); "
            f"X_(2,d-1) <= -1/w kept by {m.lemma13_share_stays:.3f}, rank 2 by {m.lemma13_share_rank2:.3f}",
        )
        for r, m in runs
    ]
    out.append(row("lemma13", l13, ok, "iterated starts"))
    f4 = [
        (
            f"N = {r['n']}, w = {r['w']}",
            m.f4_max_rank <= 1,
            f"{m.f4_found} equilibria found, highest rank {m.f4_max_rank}",
        )
        for r, m in runs
    ]
    out.append(row("complete", f4, ok, "complete-mask search"))
    for n, g in table.groupby(table["n"].astype(int), sort=True):
        out.append(_attracts_row(data, th, st["attracts"], int(n), g, ok))
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
    """What the equilibria of rank ``k`` in ``g`` do: spectra, directional starts, both basin protocols."""
    r = g[g["rank"] == k]
    with_stable = r[r["stable"] > 0]
    along = int(with_stable["stable_returning"].sum())
    held = r["share_returning_held"].astype(float)
    return (
        f"{len(r)} equilibria, {len(with_stable)} with a stable direction (directional starts "
        f"returned along {along} of {int(with_stable['stable'].sum())}), {int((r['unstable'] > 0).sum())} "
        f"with an unstable one, {int((r['stable'] == 0).sum())} with none stable; nearby starts back, token "
        f"1 held: up to {held.max():.2f} ({int((held > 0).sum())}"
        f" draw some back); every token perturbed: up to {r['share_returning'].astype(float).max():.2f}"
    )


def _attracts_row(
    data: Data, th: Thresholds, st: Statement, n: int, g: pd.DataFrame, ok: pd.DataFrame
) -> Claim:
    """§4.4 at N = d = ``n``: "stable in certain directions" on the tangent spectra and directional starts
    of the paper's family at w >= N, every rank k >= 2 (the basin shares of both protocols beside it)."""
    theirs = g[(g["family"] == "paper") & (g["w"].astype(float) >= n)]
    ranks = {
        k: [(int(r["stable"]), int(r["stable_returning"])) for _, r in theirs[theirs["rank"] == k].iterrows()]
        for k in range(2, n + 1)
    }
    words = {k: _rank_words(theirs, k) for k in range(2, n + 1)}
    ws = ", ".join(f"{w:g}" for w in sorted(set(theirs["w"].astype(float))))
    all_w = "; over every w and branch: " + "; ".join(
        f"rank {k}: {_rank_words(g, k)}" for k in range(2, n + 1)
    )
    judgement = stable_in_certain_directions(ranks, words).amended(
        before=f"N = d = {n}, paper's family at w = {ws} || ", after=all_w
    )
    runs = ok[ok["n"].astype(int) == n]
    return claim_row(
        "theorem3",
        st,
        data,
        th,
        judged(lambda t: judgement, th),
        qualifier=f"N = d = {n}",
        runs=runs,
        figure=FIGURE,
        names=("tangent spectra and directional starts", ""),
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
    runs = ok[ok["n"].astype(int) == n]
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
    return _paper_rows(sd, th) + _designed_rows(sd, th)


def figures(sd: StoryData) -> list[FigureSpec]:
    out = []
    data = sd.arm("paper")
    if data is not None:
        table = data.rows
        ns = sorted(set(table["n"].astype(int)))
        ws = sorted(set(table["w"].astype(float)))
        # one row per N = d; per w two panels: the equilibria by rank, and how many nearby starts come back
        fig = figure(2.6 * 2 * len(ws), 2.6 * len(ns), layout="constrained")
        axes = fig.subplots(len(ns), 2 * len(ws), squeeze=False)
        for row, n in enumerate(ns):
            for col, w in enumerate(ws):
                ax, bx = axes[row][2 * col], axes[row][2 * col + 1]
                sub = table[(table["n"].astype(int) == n) & (table["w"].astype(float) == w)]
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
                    a_.set_xlabel("rank", fontsize=8)
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
    data = sd.arm("designed")
    if data is not None:
        rows = data.rows.sort_values("k").reset_index(drop=True)
        fig = figure(11, 3.2, layout="constrained")
        axes = fig.subplots(1, 3)
        built = rows[rows["constructed"].astype(bool)]
        ks = rows["k"].astype(int).tolist()
        axes[0].bar(built["k"].astype(int), built["rank"].astype(float), color="C0")
        axes[0].plot(ks, ks, "k_", ms=20, label="target rank k")
        axes[1].bar(built["k"].astype(int), built["spectral_radius"].astype(float), color="C2")
        axes[1].axhline(1.0, color="C3", ls="--", lw=0.8)
        frac = built["basin_fraction"].astype(float)
        err = [frac - built["basin_ci_low"].astype(float), built["basin_ci_high"].astype(float) - frac]
        axes[2].bar(built["k"].astype(int), frac, yerr=err, color="C1", capsize=3)
        for ax, title in zip(
            axes,
            ("verified rank", "tangent spectral radius", "share of nearby inputs converging"),
            strict=True,
        ):
            ax.set_xticks(ks)
            ax.set_xlabel("target rank k")
            ax.set_title(title, fontsize=9)
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


def headlines(sd: StoryData) -> list[str]:
    """How stable the paper's equilibria are, in its true scope: per N = d the full-rank equilibria with
    and without an unstable direction (and those with no stable one), and both basin protocols."""
    data = sd.arm("paper")
    if data is None:
        return []
    t = data.rows
    out = []
    for n, g in t.groupby(t["n"].astype(int), sort=True):
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
    high = t[(t["rank"] >= 2) & (t["n"].astype(int) >= 3)]
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
