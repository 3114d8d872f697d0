"""Rules on a run's rank kept or lost, read in two notions of collapse on the same runs (Cirrincione, arXiv
2604.23681, against the NeurIPS 2024 paper): the one-step affine rank and the limit of mu_rel with depth.

``dynamics.notions`` measures both on one simulator run; a story puts both in one row (``kit.claims``'s
two halves, named by the notion). The rules, each pinned by synthetic data in
``tests/experiments/test_kit_ranks.py`` and broken on purpose by ``scripts/break_rules.py``:

- :func:`rank_kept` (one-step notion): per condition, the share of *resolved* (layer, sample) pairs whose
  rank changed (before vs after a normalisation, or X(t) vs X(0)); pairs are counted per network (the
  unit), the share's interval is Wilson's over the pairs joined with the t interval over the networks.
  Below ``change_max`` for sure in every condition -> reproduced; above it for sure in one -> not.
- :func:`same_limit` (limit notion): per condition, the collapse status (``kit.statuses.collapse_status``)
  of mu_rel with and without a part (LayerNorm) on the same networks: the same limit (both collapse, or
  both do not) -> reproduced ("neither contributes nor mitigates"); one collapses and the other does not
  -> not reproduced (the part mitigates or contributes, named); an unclear status -> inconclusive.
- :func:`span_kept`: per condition, each network's largest ``span_residual`` over layers and samples in
  units of the dtype's relative floor: every network within ``span_floor_max`` floors -> reproduced; one
  beyond it -> not reproduced; fewer than ``min_samples`` networks -> inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from rankcollapse.experiments.kit import causes
from rankcollapse.experiments.kit.combine import combine_parts, few_part, sample_part
from rankcollapse.experiments.kit.curves import NETWORK, Curve, conditions, n_words, sample_std
from rankcollapse.experiments.kit.judgement import Judgement, Margin
from rankcollapse.experiments.kit.statuses import COLLAPSED, StatusName, collapse_status
from rankcollapse.experiments.kit.thresholds import Thresholds


def rank_kept(per_network: Mapping[str, Sequence[tuple[int, int]]], th: Thresholds) -> Judgement:
    """The rank is kept: per condition ``label -> [(resolved pairs, changed pairs) per network]``, the pooled
    share ``changed / resolved`` below ``change_max`` for sure (reproduced), above it for sure (not
    reproduced), else inconclusive; a condition with no resolved pair is not testable (inconclusive)."""
    limit = th["change_max"]
    parts: list[tuple[str, Judgement]] = []
    with conditions(len(per_network)):
        for label, counts in per_network.items():
            used = [(r, c) for r, c in counts if r > 0]
            resolved = sum(r for r, _ in used)
            changed = sum(c for _, c in used)
            g = len(used)
            if resolved == 0:
                why = causes.not_testable(f"{label}: every rank sits at the precision floor")
                words = f"no resolved pair in {len(counts)} networks"
                parts.append((label, Judgement(INCONCLUSIVE, words, why, "not testable")))
                continue
            if g < th.count("min_samples"):
                words = f"{changed} of {resolved} resolved pairs changed"
                parts.append((label, few_part(label, g, th, words, NETWORK)))
                continue
            shares = np.array([c / r for r, c in used], dtype=float)
            p = changed / resolved
            se = float(sample_std(shares)) / math.sqrt(g)
            m = Margin("share of resolved pairs whose rank changed", p, se, limit, g, NETWORK, share=True,
                       samples=resolved)
            lo, hi = m.bounds()
            v = REPRODUCED if hi < limit else NOT_REPRODUCED if lo > limit else INCONCLUSIVE
            words = (
                f"rank changed in {changed} of {resolved} resolved pairs ({p:.1%}, [{lo:.1%}, {hi:.1%}] "
                f"against {limit:.1%}; {n_words(g, NETWORK)})"
            )
            if v is NOT_REPRODUCED:
                cause = causes.measured_otherwise(f"{label}: {words}")
                part = Judgement(v, words, cause, "measured otherwise", g, (m,), unit=NETWORK)
            else:
                part = sample_part(v, words, [m], g, NETWORK)
            parts.append((label, part))
    return combine_parts(parts)


def same_limit(
    pairs: Mapping[str, tuple[Curve, Curve]], th: Thresholds, part: str = "LayerNorm"
) -> Judgement:
    """Neither contributes to nor mitigates collapse, in the limit: per condition ``label -> (with the part,
    without it)`` (mu_rel curves of the same networks), both collapse (collapsing or at the floor) or both
    not collapsing (reproduced); one collapses and the other not (not reproduced: the part mitigates, or
    contributes); a status that is unclear or has too few samples: inconclusive."""
    parts: list[tuple[str, Judgement]] = []
    with conditions(len(pairs)):
        for label, (c_with, c_without) in pairs.items():
            s_w, s_o = collapse_status(c_with, th), collapse_status(c_without, th)
            r_w, r_o = c_with.rate(0, c_with.layers), c_without.rate(0, c_without.layers)
            words = (
                f"with {part} {s_w.name} (x{r_w.factor:.3g}/layer), without {s_o.name} "
                f"(x{r_o.factor:.3g}/layer)"
            )
            n = min(c_with.units, c_without.units)
            if StatusName.TOO_FEW in (s_w.name, s_o.name):
                parts.append((label, few_part(label, min(c_with.n, c_without.n), th, words, NETWORK)))
                continue
            w_in, o_in = s_w.name in COLLAPSED, s_o.name in COLLAPSED
            w_out, o_out = s_w.name is StatusName.NOT_COLLAPSING, s_o.name is StatusName.NOT_COLLAPSING
            margins, unit = s_w.margins + s_o.margins, c_with.unit
            if (w_in and o_in) or (w_out and o_out):
                same = f"the same limit: {words}"
                parts.append((label, Judgement(REPRODUCED, same, n=n, unit=unit)))
            elif (w_out and o_in) or (w_in and o_out):
                how = "mitigates" if w_out else "contributes to"
                cause = causes.measured_otherwise(f"{label}: {part} {how} collapse ({words})")
                text = f"{part} {how} collapse: {words}"
                kind = "measured otherwise"
                parts.append((label, Judgement(NOT_REPRODUCED, text, cause, kind, n, margins, unit=unit)))
            else:
                parts.append((label, sample_part(INCONCLUSIVE, words, margins, n, unit)))
    return combine_parts(parts)


def span_kept(per_network: Mapping[str, Sequence[float]], th: Thresholds) -> Judgement:
    """The tokens never leave the span: per condition ``label -> [largest span residual per network, in
    floors]``, every network within ``span_floor_max`` (reproduced), one beyond it (not reproduced), fewer
    than ``min_samples`` networks (inconclusive)."""
    limit = th["span_floor_max"]
    parts: list[tuple[str, Judgement]] = []
    for label, values in per_network.items():
        v = np.asarray(values, dtype=float)
        g = int(v.size)
        worst = float(np.max(v)) if g else math.nan
        words = f"largest span residual {worst:.3g} floors over {n_words(g, NETWORK)} (allowed {limit:g})"
        if g and (not np.isfinite(v).all() or worst > limit):
            bad = int((~(v <= limit)).sum())
            cause = causes.measured_otherwise(f"{label}: the tokens leave the span ({words})")
            text = f"{bad} of {g} networks leave the span: {words}"
            kind = "measured otherwise"
            parts.append((label, Judgement(NOT_REPRODUCED, text, cause, kind, g, unit=NETWORK)))
        elif g < th.count("min_samples"):
            parts.append((label, few_part(label, g, th, words, NETWORK)))
        else:
            parts.append((label, Judgement(REPRODUCED, words, n=g, unit=NETWORK)))
    return combine_parts(parts)
