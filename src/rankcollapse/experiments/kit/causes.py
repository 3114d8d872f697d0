"""Why a row is not plainly reproduced, in one sentence from a small, tested set.

Each kind of cause has one sentence builder; a claim row carries the kind (``cause_kind``) and its
sentence (``cause``). The kinds:

- ``precision floor``: μ_rel sits at the dtype's precision floor: collapsed to rounding noise (or a
  float32 measurement sits at its dtype's precision while float64 resolves it; or a curve reaches the
  floor too early for a rate to be measured above it, :func:`floor_too_early`);
- ``norm effect``: raw μ moves with the token norm ‖X‖_F while μ_rel does not (or the reverse);
- ``stand-in differs``: the weights that stood in behave differently from what the paper describes;
- ``not testable``: the statement's precondition fails in this setting (e.g. the SAN does not collapse);
- ``sample too small``: an interval still straddles its threshold; the n that would decide it;
- ``non-finite``: the curve turned non-finite (overflow, or ‖X‖_F rounded to 0 so μ_rel = 0/0) before
  its rule could decide: more samples do not help, the dtype's range ends the curve;
- ``threshold``: the verdict changes inside the documented range of a threshold the paper never gives;
- ``bound vacuous``: a theorem's bound falls by less than 2x over the run at this radius;
- ``untested``: the paper's weights are not available and no pretrained stand-in exists;
- ``no data`` / ``failed runs``: nothing (or not everything) was measured;
- ``measured otherwise``: the data contradict the statement (the numbers are in the evidence).
"""

from __future__ import annotations

from collections.abc import Sequence

from rankcollapse.core.precision import floor_rel
from rankcollapse.experiments.kit.curves import n_words
from rankcollapse.experiments.kit.judgement import Margin

CAUSES: tuple[str, ...] = (
    "precision floor",
    "norm effect",
    "stand-in differs",
    "not testable",
    "sample too small",
    "non-finite",
    "threshold",
    "bound vacuous",
    "untested",
    "no data",
    "failed runs",
    "measured otherwise",
)


def precision_floor(where: str, dtype: str, t: int | None) -> str:
    at = f" from t = {t}" if t is not None else ""
    return (
        f"{where}: μ_rel sits at the {dtype} precision floor ({floor_rel(dtype):.1e}){at}, so the tokens "
        "have collapsed to rounding noise; a raw μ that stays level there does so only because the token "
        "norm does (in float64 the same curve sits about 9 decades lower)"
    )


def floor_too_early(where: str, dtype: str, t: int | None) -> str:
    """A rate that cannot be measured before the floor (``kit.curves.Curve.rate``): the curve reaches it
    with fewer than 2 layers above it."""
    at = f" at t = {t}" if t is not None else ""
    return (
        f"{where}: reaches the {dtype} precision floor{at} with fewer than 2 layers above it, so no rate can "
        "be measured before the floor (a rate averaged through it would be the floor's own, ln(32 eps) / L); "
        "more samples would not change it"
    )


def dtype_precision(plotted: str, mechanism: str, detail: str) -> str:
    return (
        f"{plotted} sits at the precision of its dtype ({detail}); measured in {mechanism} the statement "
        "holds: the paper's dtype cannot resolve it"
    )


def norm_effect(where: str, norm_factor: str, rel_word: str) -> str:
    return (
        f"{where}: raw μ = μ_rel · ‖X‖_F, and the token norm ‖X‖_F changes by {norm_factor} per layer, "
        f"so raw μ follows the norm while μ_rel (how alike the tokens are) {rel_word}"
    )


def stand_in_differs(stand_in: str, checkpoint: str, how: str) -> str:
    name = stand_in.split(",")[0].replace(" (pretrained)", "")
    how = how.replace("the data contradict the statement: ", "")
    return f"{name}, standing in for {checkpoint}, behaves otherwise: {how}"


def not_testable(why: str) -> str:
    return f"{why}: the statement is not testable there"


def sample_too_small(margins: Sequence[Margin]) -> str:
    """The undecided comparisons and the sample size that would decide the first of them:
    ``undecided at 4 samples: ...; about 9 samples would decide it at the observed spread``."""
    m = margins[0]
    need = m.needed_n()
    tail = f"; about {n_words(need, m.unit)} would decide it at the observed spread" if need else ""
    more = f" (and {len(margins) - 1} more)" if len(margins) > 1 else ""
    lo, hi = m.bounds()  # the interval the row prints (Bonferroni over m.tests, Wilson for a share)
    shown = f"{m.value:.1%} [{lo:.1%}, {hi:.1%}]" if m.share else f"{m.value:+.3g} ± {(hi - lo) / 2:.2g}"
    against = f"{m.threshold:.0%}" if m.share else f"{m.threshold:g}"
    return f"undecided at {n_words(m.n, m.unit)}: {m.what} {shown} against {against}{more}{tail}"


def too_few(n: int, need: int, unit: str = "samples", where: str = "") -> str:
    """The one "too few" sentence: ``causal: 3 samples, fewer than min_samples = 4`` (networks: fewer
    than 2, no spread between networks to judge by)."""
    lead = f"{where}: " if where else ""
    limit = f"min_samples = {need}" if unit == "samples" else f"{need} (no spread between {unit} to judge by)"
    return f"{lead}{n} {unit}, fewer than {limit}"


def non_finite(where: str, detail: str) -> str:
    return (
        f"{where}: {detail}; the values past that layer are not numbers in the run's dtype, so the rule "
        "cannot judge the curve there (more samples would not change it)"
    )


def threshold(name_range: str, alternatives: str) -> str:
    return f"decided by a threshold the paper does not give: {alternatives} within {name_range}"


def bound_vacuous(detail: str) -> str:
    return f"the bound falls by less than 2x over the run ({detail}): it says nothing about the rate there"


def untested(checkpoint: str) -> str:
    return (
        f"the paper's {checkpoint} weights are not in the local Hugging Face cache and no pretrained "
        "stand-in exists offline; a random init cannot stand in for pretrained weights"
    )


def not_testable_here(why: str) -> str:
    return f"not testable on this machine's simulator: {why}"


def no_data(why: str) -> str:
    return f"nothing measured: {why}"


def failed_runs(why: str) -> str:
    return f"part of the grid is missing: {why}"


def measured_otherwise(detail: str) -> str:
    return f"the data contradict the statement: {detail}"
