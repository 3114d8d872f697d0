"""Every claim rule of every story, as pure functions of curves, estimates or per-run checks.

A rule maps measured data and the story's :class:`~rankcollapse.experiments.kit.thresholds.Thresholds`
to a :class:`~rankcollapse.experiments.kit.judgement.Judgement`: a verdict, the evidence in words, a
cause sentence (``kit.causes``) where it is not plainly reproduced, and the comparisons it turned on.
Each condition (a mask, a dtype, a layer, a run) is judged as a part and the parts are merged only by
``kit.combine.combine_parts`` (the verdict algebra). A rule never reads its own evidence text.

One module per shape of data:

- ``curves``: collapse curves judged by their status word (``kit.statuses``): ``san_collapse``,
  ``ln_stops``, ``kept_stable``, ``skip_unstable``, ``full_stable``;
- ``rates``: one rate against another: ``local_slower``, ``dqk`` (``dqk_slows``, ``dqk_global``,
  ``dqk_shallow``, ``dqk_testable``), ``power_law`` (a slope in log t);
- ``layers``: a per-layer mean or share against a threshold: ``full_rank``, ``sigma_ratio``,
  ``cos_grows``, ``dominant_sv``, ``nonnegative_pairs``, ``initial_cos``, ``largest`` (one estimate
  above every other's);
- ``checks``: per-run checks: ``every_run``, ``collapses``, ``bound_holds``,
  ``stable_in_certain_directions``, ``regions_of_attraction`` (§4.4's two halves), ``at_least``,
  ``spearman_order``, ``pairs_ordered``.

Curve rules take ``Mapping[label, Curve]`` (the label says the condition: ``"causal, float32"``);
the stories call them once on the paper's plotted quantity and once on the mechanism (μ_rel with the
floor, float32 and float64) and put both in one row (``kit.claims``).
"""

from rankcollapse.experiments.kit.combine import RuleFn, combine_parts, per_group
from rankcollapse.experiments.kit.judgement import Judgement
from rankcollapse.experiments.kit.rules.checks import (
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
from rankcollapse.experiments.kit.rules.layers import (
    cos_grows,
    dominant_sv,
    full_rank,
    initial_cos,
    largest,
    nonnegative_pairs,
    sigma_ratio,
)
from rankcollapse.experiments.kit.rules.rates import (
    dqk,
    dqk_global,
    dqk_shallow,
    dqk_slows,
    dqk_testable,
    local_slower,
    power_law,
)

__all__ = [
    "Judgement",
    "RuleFn",
    "at_least",
    "bound_holds",
    "collapses",
    "combine_parts",
    "cos_grows",
    "dominant_sv",
    "dqk",
    "dqk_global",
    "dqk_shallow",
    "dqk_slows",
    "dqk_testable",
    "every_run",
    "full_rank",
    "full_stable",
    "initial_cos",
    "kept_stable",
    "largest",
    "ln_stops",
    "local_slower",
    "nonnegative_pairs",
    "pairs_ordered",
    "per_group",
    "power_law",
    "regions_of_attraction",
    "san_collapse",
    "sigma_ratio",
    "skip_unstable",
    "spearman_order",
    "stable_in_certain_directions",
]
