"""Thin task adapter over ``rankcollapse.masks``: where the composed flow of each mask and schedule ends up
(``masks.hasse``), as rows; and the masks' closed forms a story compares its data with (:func:`window_depth`,
:func:`first_token_prediction`, :func:`decay_critical_distance`, :func:`decay_uniform_context`,
:func:`parse_mask`).

:func:`mask_flows` takes ``tokens`` (N, the YAML's ``n``), ``masks`` (mask specs), ``schedules``
(schedule specs, each period repeated without end), ``documents`` (a list of document lengths, tiled to
N into one ``document:lengths=...`` spec, the last document cut to fit) and ``tree_arity`` (the complete
tree of that arity over N tokens, parent of ``i`` = ``(i - 1) // arity``, as ``tree:parents=...``), and calls
``masks.hasse.check_hasse`` on each (nothing here measures). Rows, with the spec on each:

- ``kind = order``: the limit's facts against the plain reference (``depth``, ``reference_depth``,
  ``longest_shortest_path`` (NaN for a schedule), ``limit_is_closure``, ``depth_matches``,
  ``condensation_is_dag`` (networkx), ``is_dag`` (ours), ``reduction_matches``, ``components``,
  ``hasse_edges``, ``partial_order_on_tokens``, ``limit_pairs``, ``family``, ``schedule``, ``period``);
- ``kind = depth``: per layer ``L = 0 .. depth`` the share of pairs ``|P_L| / n^2`` (the flow growing to
  its limit);
- ``kind = flow``: for the two masks of Li & Guo (``block-two-stream``, ``butterfly``: ``masks.two_stream``,
  ``masks.butterfly``), per layer ``L = 1 .. depth + 2`` and designed flow, whether the composed flow
  ``P_L`` has it (``holds``);
- ``kind = hasse``: the covering pairs of each mask's Hasse diagram (``component_a``, ``component_b``)
  where the diagram has at most :data:`DRAWN_EDGES` of them, and each token's ``component``, for the figure.
"""

from __future__ import annotations

import math
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_param, quote
from rankcollapse.experiments.engine.tasks import OnLayer, RunOutput, Task
from rankcollapse.masks import (
    decay_critical_distance,
    decay_uniform_context,
    first_token_prediction,
    parse_mask,
)
from rankcollapse.masks.hasse import window_depth

__all__ = [
    "MASK_FLOWS",
    "decay_critical_distance",
    "decay_uniform_context",
    "first_token_prediction",
    "mask_flows",
    "parse_mask",
    "window_depth",
]

#: Largest Hasse diagram (covering pairs) whose edges a run stores for the figure.
DRAWN_EDGES = 400
#: Seconds of one ``check_hasse`` per n^3 / 1e6 (dense reference products and networkx), for estimates.
CHECK_S_PER_MEGA_CUBE = 0.6


def documents_spec(pattern: list[int], n: int) -> str:
    """``document:lengths=...``: ``pattern`` repeated until the lengths reach ``n``, the last one cut."""
    if not pattern or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in pattern):
        raise RankCollapseError(f"documents {quote(pattern)} is invalid; allowed: a list of integers >= 1")
    lengths: list[int] = []
    k = 0
    while sum(lengths) < n:
        lengths.append(min(pattern[k % len(pattern)], n - sum(lengths)))
        k += 1
    return "document:lengths=" + ",".join(map(str, lengths))


def tree_spec(arity: int, n: int) -> str:
    """``tree:parents=...`` of the complete ``arity``-ary tree over ``n`` tokens in breadth-first order."""
    if isinstance(arity, bool) or not isinstance(arity, int) or arity < 1:
        raise RankCollapseError(f"tree_arity {quote(arity)} is invalid; allowed: an integer >= 1")
    return "tree:parents=" + ",".join(str((i - 1) // arity if i else -1) for i in range(n))


def _specs(params: dict[str, Any], n: int) -> list[tuple[str, bool]]:
    specs = [(str(s), False) for s in params.get("masks") or []]
    if params.get("documents"):
        specs.append((documents_spec(list(params["documents"]), n), False))
    if params.get("tree_arity"):
        specs.append((tree_spec(int(params["tree_arity"]), n), False))
    specs += [(str(s), True) for s in params.get("schedules") or []]
    if not specs:
        raise RankCollapseError("mask_flows needs masks, schedules, documents or tree_arity; got none")
    return specs


def _family(spec: str, schedule: bool) -> str:
    return "schedule" if schedule else spec.split(":", 1)[0].split("&", 1)[0]


def _designed(spec: str, limit: Any) -> dict[str, bool] | None:
    """The designed flows of Li & Guo's two masks on ``limit`` (bool [n, n]); None for any other mask."""
    from rankcollapse.masks.butterfly import Butterfly, butterfly_flow
    from rankcollapse.masks.two_stream import BlockTwoStream, two_stream_flow

    m = parse_mask(spec)
    if isinstance(m, BlockTwoStream):
        return two_stream_flow(limit, int(m.values["size"]))
    if isinstance(m, Butterfly):
        return butterfly_flow(limit)
    return None


def mask_flows(params: dict[str, Any], on_layer: OnLayer) -> RunOutput:
    """The rows of the module docstring for every spec of ``params`` at ``tokens`` tokens (YAML: ``n``)."""
    from rankcollapse.masks.hasse import check_hasse, composed_flows

    known = {"tokens", "masks", "schedules", "documents", "tree_arity", "seed"}
    unknown = sorted(set(params) - known)
    if unknown:
        allowed = ", ".join(sorted(known))
        raise RankCollapseError(f"unknown mask_flows setting(s) {unknown}; allowed: {allowed}")
    n = int(check_param(params, "tokens"))
    rows: list[dict[str, Any]] = []
    specs = _specs(params, n)
    agree = 0
    for k, (spec, schedule) in enumerate(specs):
        c = check_hasse(spec, n)
        a = c.analysis
        agree += c.holds
        # the rows keep the run files' column n (stored; the store reads it as tokens)
        base = {"spec": spec, "family": _family(spec, schedule), "schedule": schedule, "n": n}
        rows.append({
            "kind": "order", **base, "period": a.period, "depth": a.depth,
            "reference_depth": c.reference_depth,
            "longest_shortest_path": (math.nan if c.longest_shortest_path is None
                                      else float(c.longest_shortest_path)),
            "limit_is_closure": c.limit_is_closure, "depth_matches": c.depth_matches,
            "condensation_is_dag": c.condensation_is_dag, "is_dag": a.is_dag,
            "reduction_matches": c.reduction_matches, "components": a.components,
            "hasse_edges": len(a.hasse_edges), "partial_order_on_tokens": a.partial_order_on_tokens,
            "limit_pairs": a.limit_pairs, "method": a.method,
        })
        rows += [{"kind": "depth", **base, "layer": t, "pairs_share": v / (n * n)}
                 for t, v in enumerate(a.pairs_by_depth)]
        if len(a.hasse_edges) <= DRAWN_EDGES:
            rows += [{"kind": "hasse", **base, "component_a": int(x), "component_b": int(y)}
                     for x, y in a.hasse_edges.tolist()]
            rows += [{"kind": "component", **base, "token": t, "component": int(v)}
                     for t, v in enumerate(a.component_of.tolist())]
        if not schedule and _designed(spec, a.limit.to_numpy()) is not None:
            for t, flow in enumerate(composed_flows(spec, n, max(a.depth, 1) + 2), start=1):
                for check, holds in (_designed(spec, flow) or {}).items():
                    rows.append({"kind": "flow", **base, "layer": t, "check": check, "holds": bool(holds)})
        on_layer(k)
    return RunOutput(rows, {"specs": len(specs), "agree": int(agree), "n": n})


def mask_flows_cost(params: dict[str, Any]) -> float:
    """Estimated seconds of one :func:`mask_flows` run: ``CHECK_S_PER_MEGA_CUBE n^3 / 1e6`` per spec."""
    n = int(check_param(params, "tokens"))
    count = (len(params.get("masks") or []) + len(params.get("schedules") or [])
             + bool(params.get("documents")) + bool(params.get("tree_arity")))
    return CHECK_S_PER_MEGA_CUBE * count * n**3 / 1e6 + 0.2


MASK_FLOWS = Task(mask_flows, cost_s=mask_flows_cost)
