"""Every claim rule of every story, as pure functions of curves, estimates or per-run checks.

A rule maps measured data and the story's :class:`~rankcollapse.experiments.kit.thresholds.Thresholds`
to a :class:`~rankcollapse.experiments.kit.judgement.Judgement`: a verdict, the evidence in words, a
cause sentence (``kit.causes``) where it is not plainly reproduced, and the comparisons it turned on.
Each condition (a mask, a dtype, a layer, a run) is judged as a part and the parts are merged only by
``kit.combine.combine_parts`` (the verdict algebra). A rule never reads its own evidence text.

One module per shape of data (what the rule measures, never which paper asked):

- ``curves``: collapse curves judged by their status word (``kit.statuses``): ``san_collapse``,
  ``ln_stops``, ``kept_stable``, ``skip_unstable``, ``full_stable``;
- ``rates``: one rate against another: ``local_slower``, ``dqk`` (``dqk_slows``, ``dqk_global``,
  ``dqk_shallow``, ``dqk_testable``), ``power_law`` (a slope in log t);
- ``layers``: a per-layer mean or share against a threshold: ``full_rank``, ``sigma_ratio``,
  ``cos_grows``, ``dominant_sv``, ``nonnegative_pairs``, ``initial_cos``, ``largest`` (one estimate
  above every other's), ``tanh_like`` (a share of a model's norms whose fit passes two thresholds);
- ``bounds``: an estimate inside ``[low, high]`` in every condition: ``inside``;
- ``growth``: growth laws fitted over depth per unit (``fit_growth``, ``best_growth``, ``flat_growth``)
  and one-sided estimates (``growth.at_least``, ``growth.at_most``: reached through the module, the
  names are ``checks``' too);
- ``profiles``: the shape of an influence profile over positions: ``u_shaped``, ``u_somewhere``,
  ``peaked``, ``scales_as``;
- ``steps``: series over training steps (not layers), one per network: ``moved_from_init``,
  ``onset_found``, ``phases``;
- ``ranks``: a run's rank kept or lost in two notions on the same runs: ``rank_kept`` (one step),
  ``same_limit`` (the limit of mu_rel), ``span_kept``;
- ``heads``: per-head values split by a head property: ``set_apart`` (one kind of head, e.g. the sink heads,
  beyond 0 and beyond the other heads on a statistic);
- ``sweeps``: a measure over a swept parameter: ``crossing`` (where its mean crosses a level, located with
  its interval; ``locate`` the location alone);
- ``equilibria``: the equilibria of a map: ``basin_and_equilibria``, ``ranks_present``,
  ``fixed_points_kept``;
- ``checks``: per-run checks: ``every_run``, ``collapses``, ``bound_holds``,
  ``stable_in_certain_directions``, ``regions_of_attraction`` (§4.4's two halves), ``at_least``,
  ``spearman_order``, ``pairs_ordered``, ``all_cases`` (facts that hold by construction, case by case).

Curve rules take ``Mapping[label, Curve]`` (the label says the condition: ``"causal, float32"``);
the stories call them once on the paper's plotted quantity and once on the mechanism (μ_rel with the
floor, float32 and float64) and put both in one row (``kit.claims``).
"""

from rankcollapse.experiments.kit.combine import RuleFn, combine_parts, per_group
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.rules.bounds import inside
from rankcollapse.experiments.kit.rules.checks import (
    all_cases,
    at_least,
    bound_holds,
    collapses,
    every_run,
    pairs_ordered,
    regions_of_attraction,
    spearman_order,
    stable_in_certain_directions,
)
from rankcollapse.experiments.kit.rules.curves import (
    full_stable,
    kept_stable,
    ln_stops,
    san_collapse,
    skip_unstable,
)
from rankcollapse.experiments.kit.rules.equilibria import (
    basin_and_equilibria,
    fixed_points_kept,
    ranks_present,
)
from rankcollapse.experiments.kit.rules.growth import best_growth, fit_growth, flat_growth
from rankcollapse.experiments.kit.rules.heads import HeadValues, set_apart
from rankcollapse.experiments.kit.rules.layers import (
    cos_grows,
    dominant_sv,
    full_rank,
    initial_cos,
    largest,
    nonnegative_pairs,
    sigma_ratio,
    tanh_like,
)
from rankcollapse.experiments.kit.rules.profiles import peaked, scales_as, u_shaped, u_somewhere
from rankcollapse.experiments.kit.rules.ranks import rank_kept, same_limit, span_kept
from rankcollapse.experiments.kit.rules.rates import (
    dqk,
    dqk_global,
    dqk_shallow,
    dqk_slows,
    dqk_testable,
    local_slower,
    power_law,
)
from rankcollapse.experiments.kit.rules.steps import moved_from_init, onset_found, phases
from rankcollapse.experiments.kit.rules.sweeps import crossing, locate

__all__ = [
    "HeadValues",
    "Judgement",
    "RuleFn",
    "all_cases",
    "at_least",
    "basin_and_equilibria",
    "best_growth",
    "bound_holds",
    "collapses",
    "combine_parts",
    "cos_grows",
    "crossing",
    "dominant_sv",
    "dqk",
    "dqk_global",
    "dqk_shallow",
    "dqk_slows",
    "dqk_testable",
    "every_run",
    "fit_growth",
    "fixed_points_kept",
    "flat_growth",
    "full_rank",
    "full_stable",
    "initial_cos",
    "inside",
    "kept_stable",
    "largest",
    "ln_stops",
    "local_slower",
    "locate",
    "moved_from_init",
    "nonnegative_pairs",
    "onset_found",
    "pairs_ordered",
    "peaked",
    "per_group",
    "phases",
    "power_law",
    "rank_kept",
    "ranks_present",
    "regions_of_attraction",
    "same_limit",
    "san_collapse",
    "scales_as",
    "set_apart",
    "sigma_ratio",
    "skip_unstable",
    "span_kept",
    "spearman_order",
    "stable_in_certain_directions",
    "tanh_like",
    "u_shaped",
    "u_somewhere",
]
