"""Every result has a ``to_frame()`` (pandas), whose rows are the result's own numbers."""

from __future__ import annotations

import networkx as nx
import numpy as np

from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.masks import analyze_schedule, parse_mask, parse_schedule


def test_a_mask_analysis_frame_has_one_row_per_token_matching_bfs():
    n = 12
    analysis = parse_mask("causal-window:w=3").analysis(n)
    frame = analysis.to_frame()
    assert list(frame["token"]) == list(range(n)) and frame["is_center"].sum() == len(analysis.center_nodes)
    g = nx.DiGraph()
    dense = parse_mask("causal-window:w=3").dense_numpy(n)
    g.add_edges_from((int(j), int(i)) for i, j in zip(*np.nonzero(dense), strict=True))
    hops = nx.single_source_shortest_path_length(g, analysis.best_center)
    assert list(frame["hop_distance"]) == [hops[v] for v in range(n)]
    assert set(frame["closed_component"]) == {0, -1}  # token 0 alone is closed


def test_a_packed_mask_frame_has_no_center_and_one_closed_component_per_document():
    frame = parse_mask("document:lengths=3,5").analysis(8).to_frame()
    assert not frame["is_center"].any() and frame["hop_distance"].isna().all()
    assert list(frame["closed_component"]) == [0, 0, 0, 1, 1, 1, 1, 1]


def test_a_schedule_frame_has_one_row_per_layer():
    sched = parse_schedule("causal-window:w=2*2;causal", 6)
    result = analyze_schedule(sched, 32)
    frame = result.to_frame()
    assert list(frame["layer"]) == list(range(1, 7)) and list(frame["spec"]) == result.layer_specs
    assert list(frame["radius"]) == result.layer_radii
    assert (frame["window"] >= 0).sum() == sum(b - a for a, b in result.windows)


def test_a_simulation_frame_is_its_rows():
    result = simulate(SimulationConfig(tokens=6, d=4, layers=3, mask="causal", mode="attn",
                                       metrics=("mu_rel",)))
    frame = result.to_frame()
    assert len(frame) == 4 and list(frame["mu_rel"]) == [r["mu_rel"] for r in result.rows]
