"""Fig. 6 in the paper's own setting: a 128-layer randomly initialised BERT-base (paper App. G.1).

Task: :func:`~rankcollapse.experiments.paper_tasks.paper_curves` with ``fresh_layers`` (ours):
128 independently initialised layers, drawn as blocks of BERT-base's 12 (each block a new seed),
as in a 128-layer model; five variants x four masks, float32 and float64 (``float64_variants``
limits the float64 runs of the quick profile). Claim: with LayerNorm, mu shows no decreasing
trend even after 128 layers, judged on raw mu and on mu_rel with the floor. Figures as Fig. 2.
"""

from __future__ import annotations

from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import Claim, Data
from rankcollapse.experiments.paper_tasks import paper_curves
from rankcollapse.experiments.stories.fig2_bert import STATEMENTS as FIG2
from rankcollapse.experiments.stories.fig2_bert import curve_claims, curve_figures

SOURCE = "paper App. G.1, Fig. 6"
STATEMENTS = {
    "ln_stops": ("Random init, 128 layers: with LayerNorm mu shows no decreasing trend even after 128 layers",
                 FIG2["ln_stops"][1]),
}


def claims(data: Data) -> list[Claim]:
    return curve_claims(data, "fig6", SOURCE, "fig6_deep", STATEMENTS, ("ln_stops",), ())


def figures(data: Data) -> list[FigureSpec]:
    return curve_figures(data, "fig6_deep", "Fig. 6 (128 layers, random init)")


STORY = Story(name="fig6_deep", task=paper_curves, claims=claims, figures=figures)
