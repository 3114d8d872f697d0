"""Masks as Hasse diagrams (Li & Guo, arXiv 2606.09951): a follow-up without experiments, judged apart.

The abstract proves that "with sufficient depth, the information flow of a multi-layer Transformer converges
to a Hasse diagram — a directed acyclic graph representing a partial order", and designs two masks from
that view: "Block Two-Stream Attention" (a block-generation mask ensuring training–inference consistency)
and "Butterfly Attention" (a fully supervised bidirectional mask). Known from the abstract only
(FOLLOWUPS.md: [abstract]); the paper has no experiments, so each statement is mathematical and each row is
a proof-like check: a fact that holds by construction, computed by our code and by an independent plain
reference (dense products, networkx), case by case; the row reads "consistent: proven" when every case
agrees (``Statement(kind="proof")``) and "not reproduced" if one does not (a bug, or a misreading).

What holds by construction: with a self-loop at every token of every layer the composed reachability
``P_L = M_{L-1} ... M_0`` only grows with ``L`` and is bounded by the reflexive transitive closure of the
union of the layers' graphs, which it reaches (a path of the union graph is followed one edge per period,
waiting on self-loops); a transitive relation condenses (its strongly connected parts) to a strict
partial order, a DAG, drawn by its covering pairs (the Hasse diagram). The limit is a partial order on the
tokens themselves only when no two tokens hear each other, which the data name mask by mask.

The two masks are our reconstructions (``masks.two_stream``, ``masks.butterfly``: the paper's text was not
found); both are transitive (``M M = M``), so their composed flow is the mask itself at every depth, which
is what "training-inference consistency" (a query block hears exactly the clean blocks before it and its own
block) and "fully supervised bidirectional" (the query of position p hears every position but p, never p)
require of a flow that does not drift with depth. Task: ``kit.tasks.masks.mask_flows`` (``masks.hasse``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged
from rankcollapse.experiments.kit.data import rows_of
from rankcollapse.experiments.kit.plots import MARKERS, label_axes, line, panel_grid, quantity_label
from rankcollapse.experiments.kit.rules.checks import all_cases
from rankcollapse.experiments.kit.tasks.masks import MASK_FLOWS
from rankcollapse.experiments.kit.thresholds import Thresholds

#: The follow-up's arXiv id (``contract.verdicts.FOLLOWUPS``).
PAPER = "2606.09951"
SOURCE = "Li & Guo 2026 (arXiv 2606.09951), [abstract; the paper has no experiments]"
MASK_SOURCE = (f"{SOURCE}; the mask's definition is ours, built from the abstract's one-line description "
               "(the paper's text was not found: masks/two_stream.py, masks/butterfly.py)")
FIGURE = "hasse_flows"
TWO_STREAM, BUTTERFLY = "block-two-stream", "butterfly"
STATEMENTS = (
    Statement(
        "flow_converges",
        "With sufficient depth, the information flow of a multi-layer Transformer [under an attention mask] "
        "converges",
        SOURCE,
        "holds by construction (self-loops in every layer make P_L = M_{L-1} ... M_0 grow with L, bounded by "
        "the reflexive transitive closure of the union of the layers' graphs, which it reaches): per mask "
        "family and schedule and per n, our limit (masks.hasse: whole periods composed until one adds "
        "nothing) is reached at a finite depth and equals networkx's transitive_closure of the union graph "
        "-> consistent: proven; one case that disagrees -> not reproduced (a bug in our code or the "
        "reference; kit.rules.checks.all_cases)",
        kind="proof",
    ),
    Statement(
        "hasse_limit",
        "The limit is a Hasse diagram: a directed acyclic graph representing a partial order (after "
        "condensing the strongly connected parts, FOLLOWUPS.md's reading)",
        SOURCE,
        "holds by construction (a transitive relation condenses to a strict partial order): per case, the "
        "relation between the limit's strongly connected parts is antisymmetric and transitive (ours), "
        "networkx's condensation of the union graph is a DAG, and our transitive reduction (R = H and not "
        "H H) equals networkx's transitive_reduction of it -> consistent: proven; one disagreement -> not "
        "reproduced (kit.rules.checks.all_cases); which masks order the tokens themselves (no part "
        "of two tokens "
        "or more) is reported beside it",
        kind="proof",
    ),
    Statement(
        "depth_closed_form",
        "The depth at which the composed flow stops changing is, for one mask, the longest shortest path of "
        "its graph (window:w and causal-window:w: ceil((n - 1) / w); causal, complete, block, prefix and "
        "the two Li & Guo masks: 1), and for a schedule the fewest layers whose product is the limit",
        "ours (the composed graph: P_L[i, j] iff a path j -> i of at most L edges, waiting on self-loops)",
        "per case: our depth equals the dense products' depth (P_{L+1} = M_t P_L, a reference of its own) "
        "and, for one mask, networkx's largest finite shortest-path distance; for window:w and "
        "causal-window:w also ceil((n - 1) / w) -> consistent: proven; a disagreement -> refuted "
        "(kit.rules.checks.all_cases)",
        kind="proof",
        ours=True,
    ),
    Statement(
        "two_stream_consistent",
        "Block Two-Stream Attention: a block-generation attention mask that ensures training-inference "
        "consistency",
        MASK_SOURCE,
        "our reading: the composed flow at every depth L = 1 .. (its depth to the limit) + 2 has the flows "
        "block generation needs: each query token of block k hears exactly the clean content of blocks < k "
        "(what inference sees) and the query tokens of its own block, no query block hears another, the "
        "content stream is block-causal and never hears a query (masks.two_stream.two_stream_flow); it holds "
        "by construction (the mask is transitive: M M = M) -> consistent: proven; a check that fails at some "
        "depth -> not reproduced (kit.rules.checks.all_cases)",
        kind="proof",
    ),
    Statement(
        "butterfly_supervised",
        "Butterfly Attention: a fully supervised bidirectional attention mask",
        MASK_SOURCE,
        "our reading: at every depth L = 1 .. (its depth to the limit) + 2 the query token of each position "
        "p hears every other position (through the forward stream before p or the backward stream after "
        "it) and never position p itself, the query stream is sealed and the two streams directed "
        "(masks.butterfly.butterfly_flow); it holds by construction (the mask is transitive) -> consistent: "
        "proven; a check that fails at some depth -> not reproduced (kit.rules.checks.all_cases)",
        kind="proof",
    ),
)
ARMS = (Arm("paper", MASK_FLOWS),)
NAMES = ("our limit against the plain reference (networkx, dense products)", "")
FLOW_NAMES = ("the composed flow of our reconstruction against the flows it is designed for", "")


Cases = list[tuple[str, dict[str, bool | None]]]


def _cases(frame: pd.DataFrame, checks: dict[str, str]) -> Cases:
    """One case per (spec, n) of ``kind = order`` rows: label -> {check words: the row's column (``depth``:
    a finite depth was reached)}."""
    out = []
    for _, r in frame.sort_values(["tokens", "schedule"], kind="stable").iterrows():
        got = {words: (bool(np.isfinite(float(r[col])) and float(r[col]) >= 0) if col == "depth"
                       else bool(r[col])) for words, col in checks.items()}
        out.append((f"{r['spec']}, n = {int(r['tokens'])}", got))
    return out


def _window_w(spec: str) -> int | None:
    m = re.fullmatch(r"(?:causal-)?window:w=(\d+)", spec)
    return int(m.group(1)) if m else None


def _depth_cases(frame: pd.DataFrame) -> Cases:
    from rankcollapse.experiments.kit.tasks.masks import window_depth

    out = []
    for label, checks in _cases(frame, {"depth = the references' (dense products; networkx's longest "
                                        "shortest path for one mask)": "depth_matches"}):
        spec, n = label.rsplit(", n = ", 1)
        w = _window_w(spec)
        if w:
            row = frame[(frame["spec"] == spec) & (frame["tokens"] == int(n))].iloc[0]
            checks["depth = ceil((n - 1) / w)"] = int(row["depth"]) == window_depth(int(n), w)
        out.append((label, checks))
    return out


def _flow_cases(frame: pd.DataFrame, family: str) -> Cases:
    sub = frame[frame["family"] == family]
    out: Cases = []
    for (spec, n, t), g in sub.groupby(["spec", "tokens", "layer"], sort=True):
        checks = {str(c): bool(h) for c, h in zip(g["check"], g["holds"], strict=True)}
        out.append((f"{spec}, n = {int(n)}, L = {int(t)}", checks))
    return out


def _row(data: Data, th: Thresholds, k: int, cases: Cases, what: str, frame: pd.DataFrame,
         names: tuple[str, str] = NAMES) -> Claim:
    return claim_row("hasse", STATEMENTS[k], data, th, judged(lambda t: all_cases(cases, what), th),
                     axes_frame=frame, runs=data.ok, figure=FIGURE, names=names,
                     sample_note=f"{len(cases)} {what} (exact: nothing is sampled)")


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of("hasse", sd.verdict, sd.ranges)
    data = sd.arm("paper")
    if data is None:
        return []
    order = rows_of(data, "order")
    flows = rows_of(data, "flow")
    out = []
    if not order.empty:
        out.append(_row(data, th, 0, _cases(order, {
            "finite depth": "depth", "limit = networkx's transitive closure": "limit_is_closure"}),
            "masks and schedules at their n", order))
        out.append(_row(data, th, 1, _cases(order, {
            "condensation a DAG (networkx)": "condensation_is_dag", "parts strictly ordered (ours)": "is_dag",
            "transitive reduction = networkx's": "reduction_matches"}),
            "masks and schedules at their n", order))
        out.append(_row(data, th, 2, _depth_cases(order), "masks and schedules at their n", order))
    for k, family in ((3, TWO_STREAM), (4, BUTTERFLY)):
        if not flows.empty and (flows["family"] == family).any():
            out.append(_row(data, th, k, _flow_cases(flows, family), "depths of the composed flow",
                            flows[flows["family"] == family], FLOW_NAMES))
    return out


def _draw_hasse(ax: Any, data: Data, spec: str, n: int) -> None:
    """The Hasse diagram of a stream mask: each part at (its first position in its stream, its stream), an
    arrow per covering pair (information flows from the tail's part to the head's, nothing between)."""
    comp = rows_of(data, "component")
    comp = comp[(comp["spec"] == spec) & (comp["tokens"] == n)].sort_values("token")
    edges = rows_of(data, "hasse")
    edges = edges[(edges["spec"] == spec) & (edges["tokens"] == n)]
    if comp.empty:
        ax.set_axis_off()
        return
    of = comp["component"].to_numpy(dtype=int)
    k = int(of.max()) + 1
    pairs = list(zip(edges["component_a"].astype(int), edges["component_b"].astype(int), strict=True))
    streams = 2 if spec.startswith(TWO_STREAM) else 3
    big = n // streams
    first = np.array([np.flatnonzero(of == c)[0] for c in range(k)])
    last = np.array([np.flatnonzero(of == c)[-1] for c in range(k)])
    stream = first // big
    x = (first % big + last % big) / 2
    y = stream.astype(float)
    for a, b in pairs:
        bend = 0.25 if stream[a] == stream[b] else 0.0
        ax.annotate("", xy=(x[b], y[b]), xytext=(x[a], y[a]),
                    arrowprops={"arrowstyle": "->", "color": "0.5", "lw": 0.6, "shrinkA": 4, "shrinkB": 4,
                                "connectionstyle": f"arc3,rad={bend}"})
    names = ["content c", "query q"] if streams == 2 else ["forward f", "backward b", "query g"]
    for s in range(streams):
        idx = np.flatnonzero(stream == s)
        ax.scatter(x[idx], y[idx], s=30, color=f"C{s}", marker=MARKERS[s], zorder=3, label=names[s])
    ax.set_yticks(range(streams), names)
    ax.set_ylim(-0.6, streams - 0.4)
    ax.set_xlabel("position in the stream (a part of several positions: drawn at their middle)")
    ax.set_title(f"{spec}, n = {n}: {k} parts, {len(pairs)} covering pairs", fontsize=8)


def figures(sd: StoryData) -> list[FigureSpec]:
    data = sd.arm("paper")
    if data is None:
        return []
    order = rows_of(data, "order")
    depth = rows_of(data, "depth")
    if order.empty:
        return []
    ns = sorted(order["tokens"].unique())
    fig, (ax1, ax2, ax3, ax4) = panel_grid(4, ncols=2, w=5.5, h=4)
    specs = list(dict.fromkeys(order["spec"]))
    shown = [s for s in specs if not s.startswith(("document", "tree"))]
    for i, s in enumerate(shown):
        g = order[order["spec"] == s].sort_values("tokens")
        line(ax1, g["tokens"], g["depth"], i, s, style=int(bool(g["schedule"].iloc[0])), every=0, lw=0.9)
    ax1.set_xticks([int(v) for v in ns])
    label_axes(ax1, "tokens", f"{quantity_label('limit_depth')}: layers until P_L stops changing", logy=True)
    ax1.legend(fontsize=5, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    last, scheduled = depth[depth["tokens"] == ns[-1]], set(order.loc[order["schedule"], "spec"])
    for i, s in enumerate(shown):
        g = last[last["spec"] == s].sort_values("layer")
        if not g.empty:
            line(ax2, g["layer"], g["pairs_share"], i, style=int(s in scheduled), every=0, ms=2, lw=0.8)
    ax2.set_xscale("symlog", linthresh=1)
    label_axes(ax2, f"{quantity_label('layer')} (N = {int(ns[-1])})", "pairs_share")
    _draw_hasse(ax3, data, "block-two-stream:size=2", int(ns[0]))
    _draw_hasse(ax4, data, "butterfly", int(ns[0]))
    caption = (
        "Li & Guo 2026's limit of the composed flow, for every mask family and four schedules (dashed), "
        f"n = {', '.join(str(int(v)) for v in ns)}. Top left: the depth L* after which "
        "P_L = M_(L-1) ... M_0 stops changing (all agree with the dense products and networkx). Top right "
        f"(colours as on the left): the share of pairs reached after L layers at n = {ns[-1]}, growing to "
        "the limit (the transitive closure). Bottom: the Hasse diagrams (covering pairs of the condensed "
        f"limit) of our Block Two-Stream and Butterfly masks at n = {ns[0]} (our reconstructions from the "
        "abstract), each part at its position in its stream. Both masks are transitive: their flow is the "
        "mask at every depth."
    )
    table = pd.concat([order.assign(kind="order"), depth.assign(kind="depth")], ignore_index=True)
    return [FigureSpec(FIGURE, fig, table, caption)]


def _family_names(specs: pd.Series) -> str:
    return ", ".join(dict.fromkeys(s.split(":")[0] for s in specs))


def headlines(sd: StoryData) -> list[str]:
    data = sd.arm("paper")
    if data is None:
        return []
    order = rows_of(data, "order")
    if order.empty:
        return []
    out = []
    n = int(order["tokens"].max())
    top = order[order["tokens"] == n]
    agree = int((top["limit_is_closure"] & top["depth_matches"] & top["reduction_matches"]
                 & top["condensation_is_dag"]).sum())
    single = top[~top["schedule"].astype(bool)]
    deep = single.sort_values("depth", ascending=False).head(3)
    ones = single.loc[single["depth"] == 1, "spec"]
    deepest = ", ".join(f"{r.spec}: {int(r.depth)}" for r in deep.itertuples())
    out.append(
        f"At n = {n}, {agree} of {len(top)} masks and schedules agree with networkx and the dense products "
        f"on every fact of the limit; the depth to the limit ranges from 1 ({_family_names(ones)}) to "
        f"{int(deep['depth'].iloc[0])} ({deepest})."
    )
    tokens = single.loc[single["partial_order_on_tokens"].astype(bool), "spec"]
    pre = single.loc[~single["partial_order_on_tokens"].astype(bool), "spec"]
    out.append(
        f"The limit orders the tokens themselves (no two tokens hear each other) only under "
        f"{_family_names(tokens)}; under {_family_names(pre)} it is a preorder whose strongly connected "
        f"parts must be condensed first (window and complete: one part of all {n} tokens, a Hasse diagram "
        "of one node), so the abstract's 'Hasse diagram' is a diagram of those parts."
    )
    flows = rows_of(data, "flow")
    if not flows.empty:
        bits = []
        for family in (TWO_STREAM, BUTTERFLY):
            f = flows[flows["family"] == family]
            if not f.empty:
                bits.append(f"{family}: {int(f['holds'].sum())} of {len(f)} flow checks hold over depths "
                            f"1-{int(f['layer'].max())}")
        out.append("Our Block Two-Stream and Butterfly masks are transitive (their depth to the limit is 1), "
                   "so the flow each is designed for holds at every depth: " + "; ".join(bits) + ".")
    return out


STORY = story_here(__name__)
