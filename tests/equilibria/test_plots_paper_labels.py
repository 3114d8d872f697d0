"""Fig. 5's legend names each arc's own limit (a label must come from the computed arcs, not a guess)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from rankcollapse.equilibria import paper_counterexample, plot_paper_figure5


def test_figure5_legend_names_the_limit_of_every_arc() -> None:
    for w in (2.0, 4.0):
        fig = plot_paper_figure5(w)
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        arcs = paper_counterexample(w).arcs
        assert len(labels) == len(arcs) == 4
        for label, arc in zip(labels, arcs, strict=True):
            expected = "B" if arc.limit_name == "B" else "(0, 1)"
            assert label.endswith(expected if expected == "B" else "(0, 1), token 1"), (label, arc)
        assert sum(label.endswith("B") for label in labels) == 2  # the red segment is two arcs
