"""LayerNorm dynamics ``X -> D A(X) X W_V`` on spheres: the N = d = 2 counterexample (Figs. 1 and 5),
an equilibrium finder and verifier for any mask and value matrix, constructions of stable equilibria
of every rank (designed: the equilibrium first, then W_V), and the orthogonal-W_V collapse check.
See docs/equilibria.md."""

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
from rankcollapse.equilibria.orthogonal import OrthogonalCollapse, orthogonal_collapse

__all__ = [
    "BasinArc",
    "CircleFixedPoint",
    "Construction",
    "Counterexample",
    "Equilibrium",
    "FamilyPoint",
    "MovingSinkArc",
    "OrthogonalCollapse",
    "angle_map",
    "angle_map_derivative",
    "antipode_threshold",
    "attention_map",
    "attention_matrix",
    "basin_arc",
    "basin_arc_moving_sink",
    "build_design",
    "causal_mask",
    "check_value_matrix",
    "construct_rank_k",
    "constructed_ranks",
    "counterexample_2d",
    "designed_cores",
    "dominant_left_eigenvector",
    "find_equilibria",
    "fixed_points_on_circle",
    "iterate",
    "ln_attention_map",
    "newton_polish",
    "optimise_design",
    "orthogonal_collapse",
    "plot_figure1",
    "plot_figure5",
    "resolve_mask",
    "scan_value_family",
    "simulate_pair",
    "spectral_radius",
    "tangent_jacobian",
    "verify_equilibrium",
    "wilson_interval",
    "write_portrait",
]


def __getattr__(name: str):
    # plotting pulls in matplotlib: import lazily
    if name in ("plot_figure1", "plot_figure5", "write_portrait", "portrait_numbers"):
        from rankcollapse.equilibria import plots

        return getattr(plots, name)
    raise AttributeError(name)
