"""LayerNorm dynamics ``X -> D A(X) X W_V`` on spheres (the theory's sphere normalisation).

The paper's results: its N = d = 2 counterexample (``counterexample_paper``, Lemma 11, Figs. 1 and 5),
Theorem 3's bidiagonal value matrix with every equilibrium of every rank (``theorem3``, checks in
``theorem3_checks``: tangent spectrum, convergence, App. F.2-F.3), App. F.4's complete mask searched over
W_QK (``complete_mask``), Theorem 2 / Corollary 1 runs (``orthogonal``). Ours: the surrogate
counterexample ``[[0.95, 1], [0, 1]]`` with ``W_QK = I`` (``counterexample``), designed stable equilibria
of every rank (``construction``, ``design``), and an equilibrium finder and verifier for any mask and
value matrix (``finder``). See docs/equilibria.md."""

from rankcollapse.equilibria.complete_mask import (
    CompleteMaskSummary,
    PerronGap,
    SearchEnd,
    complete_mask_measurements,
    cone_margin,
    perron_gap,
    search_rank,
)
from rankcollapse.equilibria.construction import Construction, construct_rank_k, constructed_ranks
from rankcollapse.equilibria.counterexample import (
    BasinArc,
    CircleFixedPoint,
    Counterexample,
    FamilyPoint,
    MovingSinkArc,
    angle_map,
    angle_map_derivative,
    antipode_threshold,
    basin_arc,
    basin_arc_moving_sink,
    counterexample_2d,
    dominant_left_eigenvector,
    fixed_points_on_circle,
    scan_value_family,
    simulate_pair,
)
from rankcollapse.equilibria.counterexample_paper import (
    Arc,
    PaperCounterexample,
    arc_limits_by_iteration,
    moving_token1,
    paper_counterexample,
    paper_value_matrix,
)
from rankcollapse.equilibria.design import build_design, designed_cores, optimise_design
from rankcollapse.equilibria.finder import (
    Equilibrium,
    check_value_matrix,
    find_equilibria,
    newton_polish,
    spectral_radius,
    tangent_jacobian,
    verify_equilibrium,
    wilson_interval,
)
from rankcollapse.equilibria.lnmap import (
    attention_map,
    attention_matrix,
    causal_mask,
    iterate,
    ln_attention_map,
    resolve_mask,
)
from rankcollapse.equilibria.orthogonal import (
    LNCollapseRun,
    OrthogonalCollapse,
    causal_advantage,
    ln_collapse_run,
    orthogonal_collapse,
)
from rankcollapse.equilibria.theorem3 import (
    PaperEquilibrium,
    appendix_f1_value,
    bidiagonal_value,
    enumerate_equilibria,
    paper_chain,
)
from rankcollapse.equilibria.theorem3_checks import (
    check_f2,
    convergence_from_nearby,
    direction_counts,
    lemma13,
    srank_bound,
    tangent_moduli,
)

__all__ = [
    "Arc",
    "BasinArc",
    "CircleFixedPoint",
    "CompleteMaskSummary",
    "Construction",
    "Counterexample",
    "Equilibrium",
    "FamilyPoint",
    "LNCollapseRun",
    "MovingSinkArc",
    "OrthogonalCollapse",
    "PaperCounterexample",
    "PaperEquilibrium",
    "PerronGap",
    "SearchEnd",
    "angle_map",
    "angle_map_derivative",
    "antipode_threshold",
    "appendix_f1_value",
    "arc_limits_by_iteration",
    "attention_map",
    "attention_matrix",
    "basin_arc",
    "basin_arc_moving_sink",
    "bidiagonal_value",
    "build_design",
    "causal_advantage",
    "causal_mask",
    "check_f2",
    "check_value_matrix",
    "complete_mask_measurements",
    "cone_margin",
    "construct_rank_k",
    "constructed_ranks",
    "convergence_from_nearby",
    "counterexample_2d",
    "designed_cores",
    "direction_counts",
    "dominant_left_eigenvector",
    "enumerate_equilibria",
    "find_equilibria",
    "fixed_points_on_circle",
    "iterate",
    "lemma13",
    "ln_attention_map",
    "ln_collapse_run",
    "moving_token1",
    "newton_polish",
    "optimise_design",
    "orthogonal_collapse",
    "paper_chain",
    "paper_counterexample",
    "paper_value_matrix",
    "perron_gap",
    "plot_figure1",
    "plot_figure5",
    "plot_paper_figure1",
    "plot_paper_figure5",
    "resolve_mask",
    "scan_value_family",
    "search_rank",
    "simulate_pair",
    "spectral_radius",
    "srank_bound",
    "tangent_jacobian",
    "tangent_moduli",
    "verify_equilibrium",
    "wilson_interval",
    "write_paper_portrait",
    "write_portrait",
]


def __getattr__(name: str):
    # plotting pulls in matplotlib: import lazily
    if name in ("plot_figure1", "plot_figure5", "write_portrait", "portrait_numbers"):
        from rankcollapse.equilibria import plots

        return getattr(plots, name)
    if name in ("plot_paper_figure1", "plot_paper_figure5", "write_paper_portrait"):
        from rankcollapse.equilibria import plots_paper

        return getattr(plots_paper, name)
    raise AttributeError(name)
