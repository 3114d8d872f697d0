"""Claim rules of the paper's experiments (§5, App. G) as pure functions of curves (ours).

Each rule maps measured :class:`~rankcollapse.experiments.paper_curves.Curve` objects (or
per-layer arrays) and :class:`Thresholds` to a :class:`Judgement`: a verdict of
``engine.verdicts`` and the evidence in words. The stories call every rule twice, once on the
paper's quantity (raw ``mu``) and once on ``mu_rel`` with the precision floor, and put both in
one claim row. Partial verdicts (per mask, per dtype, per model) are merged only by
:func:`~rankcollapse.experiments.engine.verdicts.combine_verdicts`.

Curve statuses (all on per-sample log drops with ``Z`` standard errors, see ``paper_curves``):

- collapse: ``collapsing`` if the per-layer log rate over layers 0..L and over the last half
  are both below ``-rate_tol`` for sure (a steady, exponential decay), ``at floor`` if half the
  samples sit at the precision floor (mu_rel only), ``not collapsing`` if the rate over the last
  half is above ``-rate_tol`` for sure (no decay, or an early drop that levels off), else
  ``unclear``;
- level (the last half of the layers): ``kept`` (flat within ``±rate_tol``, and at least
  ``keep_min`` where a keep level applies), ``falling``, ``growing``, ``low``, ``at floor``;
- instability ``I(t) = |mean log drop(t)| + its std``: ``unstable`` if ``I(L) >= unstable_min``
  or a sample turned non-finite, ``stable`` if ``I(L) < unstable_min / 2``.

A condition with fewer than ``min_samples`` samples, or with non-finite values where the rule
needs finite ones, is ``inconclusive``: it is reported, never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    combine_verdicts,
)
from rankcollapse.experiments.paper_curves import Curve, Rate, Z

#: Every term the evidence cells of the paper's stories use, defined once (for the report page).
GLOSSARY: dict[str, str] = {
    "raw mu": "mu(X) = ||X - 1 mean(X)||_F, the paper's quantity, plotted as mean ± std over samples",
    "mu_rel": "mu / ||X||_F: mu without the token norm (1 = no two tokens alike on average, 0 = collapsed)",
    "floor": "32 eps of the dtype (float32 3.8e-6, float64 7.1e-15): mu_rel at or below it is rounding noise",
    "log rate": "mean over samples of (log q(b) - log q(a)) / (b - a): the per-layer change of log q; "
                "x0.3/layer = the curve falls to 30% per layer",
    "±": "2 standard errors of the mean over samples; 'for sure' = the whole ± interval on one side",
    "collapsing": "log rate over all layers and over the last half below -rate_tol for sure (steady decay)",
    "not collapsing": "log rate over the last half above -rate_tol for sure ('levels off': after an "
                      "early drop)",
    "at floor": "at least half of the samples at the precision floor (mu_rel)",
    "kept": "flat over the last half of the layers (log rate within ±rate_tol for sure) and, for mu_rel, "
            "at least keep_min",
    "falling / growing": "log rate over the last half below -rate_tol / above +rate_tol for sure",
    "low": "flat but below keep_min",
    "I(t)": "|mean log change since X(0)| + its std over samples: the typical change of a sample's curve",
    "unstable / stable": "I(L) >= unstable_min or non-finite values / I(L) < unstable_min / 2",
    "underflow": "raw mu rounded to exactly 0 in the dtype (counted at its smallest normal number)",
    "n": "samples per condition (weight seeds x excerpts for random init, excerpts for pretrained)",
}


@dataclass(frozen=True)
class Judgement:
    """A verdict and the evidence behind it, in words."""

    verdict: str
    evidence: str


@dataclass(frozen=True)
class Thresholds:
    """The numbers the rules compare with; every story sets them in its YAML ``verdict:`` section."""

    rate_tol: float = 0.02  # |per-layer log rate| below this is "flat" (2% per layer)
    keep_min: float = 0.05  # mu_rel at least this counts as "well above 0"
    min_samples: int = 4  # fewer samples in a condition: inconclusive
    unstable_min: float = math.log(10.0)  # I(L) of a tenfold change counts as unstable
    initial_layers: int = 3  # the "initial rate" of collapse: layers 0..k
    full_rank_min: float = 0.99  # share of samples with full rank at every layer
    sigma_abs_min: float = 0.1  # absolute sigma_min "well above 0" (hidden-state units)
    ratio_min: float = 1e-3  # sigma_min / sigma_max "well above 0"
    aniso_factor: float = 3.0  # mean |cos| >= this x the isotropic sqrt(2 / (pi d)): narrow region
    dominance_min: float = 2.0  # sigma_1 / sigma_2 at least this: one dominant singular value
    share_min: float = 0.99  # share of samples with phi(0) >= 0

    @classmethod
    def from_verdict(cls, verdict: Mapping[str, Any]) -> Thresholds:
        """From a YAML ``verdict:`` mapping (unknown keys are ignored: other rules may use them)."""
        known = {f.name: f.type for f in fields(cls)}
        kw = {k: (int(v) if k == "min_samples" or k == "initial_layers" else float(v))
              for k, v in verdict.items() if k in known}
        return cls(**kw)


def _few(c: Curve, th: Thresholds) -> bool:
    return c.n < th.min_samples


def underflow_note(c: Curve) -> str:
    """``"; raw mu underflows to 0 in float32 from t=64"`` where some sample's raw mu rounds to 0."""
    if c.quantity != "mu":
        return ""
    t = c.first_at_floor(share=1e-9)
    return "" if t is None else f"; raw mu underflows to 0 in {c.dtype} from t={t} (counted at {c.clamp:.1e})"


def collapse_status(c: Curve, th: Thresholds) -> tuple[str, str]:
    """(status, words) of the collapse of curve ``c`` over all its layers."""
    status, words = _collapse_status(c, th)
    return status, words + underflow_note(c)


def _collapse_status(c: Curve, th: Thresholds) -> tuple[str, str]:
    bad = c.first_nonfinite()
    if bad is not None:
        share = 1 - c.finite[-1]
        return "non-finite", f"{c.nonfinite_cause()} from t={bad} ({share:.0%} of samples at the end)"
    floor = c.first_at_floor()  # mu_rel: the precision floor; raw mu: an underflow to exactly 0
    r = c.rate(0, c.layers)
    if floor is not None:
        until = f" ({c.rate(0, floor).text()} until then)" if floor > 0 else ""
        where = f"at the {c.dtype} floor" if c.quantity == "mu_rel" else f"underflows to 0 in {c.dtype}"
        return "at floor", f"{where} from t={floor}{until}"
    if _few(c, th):
        return "too few samples", f"{r.text()}, too few samples"
    tail = c.rate(c.layers // 2, c.layers) if c.layers >= 2 else r
    if r.hi < -th.rate_tol and tail.hi < -th.rate_tol:
        return "collapsing", f"falls {r.text()}, last half x{tail.factor:.3g}/layer"
    if tail.lo > -th.rate_tol:
        what = "levels off" if r.hi < -th.rate_tol else "no collapse"
        return "not collapsing", f"{what}: {r.text()}, last half {tail.text()}"
    return "unclear", f"unclear: {r.text()}, last half {tail.text()}"


def level_status(c: Curve, th: Thresholds, keep_min: float | None) -> tuple[str, str]:
    """(status, words) of the level of ``c`` over the last half of its layers."""
    bad = c.first_nonfinite()
    if bad is not None:
        return "non-finite", f"non-finite from t={bad}"
    lvl = f"level {c.mean[-1]:.2g} at t={c.layers}"
    if c.floor_share[-1] >= 0.5:
        where = f"at the {c.dtype} floor" if c.quantity == "mu_rel" else f"underflowed to 0 in {c.dtype}"
        return "at floor", f"{where} ({lvl})"
    if c.layers < 2:
        return "unclear", f"{lvl}, too few layers"
    r = c.rate(c.layers // 2, c.layers)
    words = f"{lvl}, last half {r.text()}"
    if _few(c, th):
        return "too few samples", words
    if r.hi < -th.rate_tol:
        return "falling", words
    if r.lo > th.rate_tol:
        return "growing", words
    if r.lo > -th.rate_tol and r.hi < th.rate_tol:
        if keep_min is not None and c.mean[-1] < keep_min:
            return "low", f"{words} (below {keep_min:g})"
        return "kept", words
    return "unclear", words


def instability(c: Curve, t: int) -> float:
    """``I(t) = |mean log drop(t)| + std``: the typical log change of a sample since layer 0."""
    return abs(float(c.drop[t])) + float(c.drop_std[t])


def stability_status(c: Curve, th: Thresholds) -> tuple[str, str]:
    """(status, words): ``unstable``, ``stable`` or ``unclear`` (see the module docstring)."""
    bad = c.first_nonfinite()
    if bad is not None:
        return "unstable", f"non-finite from t={bad}"
    i_end = instability(c, c.layers)
    words = f"I(t={c.layers}) = {i_end:.2g} (x{math.exp(min(i_end, 700)):.3g} change)"
    if _few(c, th):
        return "too few samples", words
    if i_end >= th.unstable_min:
        return "unstable", words
    if i_end < th.unstable_min / 2:
        return "stable", words
    return "unclear", words


def _parts(per_key: Mapping[str, Sequence[Curve]], one: Any) -> Judgement:
    """Apply ``one(curve) -> (verdict, words)`` to every curve, join the evidence, combine verdicts."""
    verdicts, texts = [], []
    for key, curves in per_key.items():
        bits: list[tuple[str, str]] = []
        for c in curves:
            v, w = one(c)
            verdicts.append(v)
            bits.append((c.dtype, w))
        if len(bits) > 1 and len({w for _, w in bits}) == 1:  # the same in every dtype: say it once
            texts.append(f"{key}: {' = '.join(d for d, _ in bits)}: {bits[0][1]}")
        else:
            texts.append(f"{key}: " + "; ".join(f"{d} {w}" for d, w in bits))
    if not verdicts:
        return Judgement(INCONCLUSIVE, "no data")
    return Judgement(combine_verdicts(verdicts), " | ".join(texts))


def rule_san_collapse(san: Mapping[str, Sequence[Curve]], th: Thresholds) -> Judgement:
    """SANs collapse exponentially under every mask: every curve ``collapsing`` or ``at floor``."""

    def one(c: Curve) -> tuple[str, str]:
        s, w = collapse_status(c, th)
        v = {"collapsing": REPRODUCED, "at floor": REPRODUCED, "not collapsing": NOT_REPRODUCED}
        return v.get(s, INCONCLUSIVE), w

    return _parts(san, one)


def _compare(a: Rate, b: Rate) -> tuple[int, float, float]:
    """(+1 if b's rate is above a's for sure, -1 if below for sure, else 0; difference; Z * se)."""
    diff = b.mean - a.mean
    se = Z * math.sqrt(a.se**2 + b.se**2)
    if not (math.isfinite(diff) and math.isfinite(se)):
        return 0, diff, se
    return (1 if diff > se else -1 if diff < -se else 0), diff, se


def rule_local_slower(
    san: Mapping[str, Sequence[Curve]], radius: Mapping[str, float], th: Thresholds
) -> Judgement:
    """More local masks (larger radius) collapse more slowly: for every pair of masks with different
    radii and each dtype, the more local one has the higher (less negative) log rate for sure."""
    masks = sorted(san, key=lambda m: radius[m])
    verdicts, texts = [], []
    for i, a in enumerate(masks):
        for b in masks[i + 1:]:
            if radius[a] == radius[b]:
                continue
            for ca, cb in zip(san[a], san[b], strict=True):
                if min(ca.n, cb.n) < th.min_samples:
                    verdicts.append(INCONCLUSIVE)
                    continue
                sign, diff, se = _compare(ca.rate(0, ca.layers), cb.rate(0, cb.layers))
                verdicts.append({1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE))
                word = {1: "slower", -1: "faster", 0: "not distinguishable"}[sign]
                texts.append(f"{b} vs {a} ({ca.dtype}): {word} (log rate {diff:+.2g} ± {se:.2g})")
    if not verdicts:
        return Judgement(INCONCLUSIVE, "fewer than two masks with different radii")
    rates = "; ".join(f"{m} (r={radius[m]:g}): {san[m][0].rate(0, san[m][0].layers).text()}" for m in masks)
    return Judgement(combine_verdicts(verdicts), f"{rates} || " + "; ".join(texts))


def rule_ln_stops(
    san: Mapping[str, Sequence[Curve]], ln: Mapping[str, Sequence[Curve]], th: Thresholds,
    keep_min: float | None,
) -> Judgement:
    """Adding LN stops mu from converging to 0, at a stable level well above 0: per mask and dtype
    the LN curve is ``kept`` while the curve without LN collapses. ``kept`` with and without LN is
    not reproduced (LN makes no difference)."""
    verdicts, texts = [], []
    for mask, curves in ln.items():
        bits = []
        for c_ln, c_san in zip(curves, san[mask], strict=True):
            s_ln, w_ln = level_status(c_ln, th, keep_min)
            s_san, w_san = collapse_status(c_san, th)
            if s_ln == "kept" and s_san in ("collapsing", "at floor"):
                v = REPRODUCED
            elif s_ln == "kept" and s_san == "not collapsing":
                v = NOT_REPRODUCED
                w_ln += "; without LN it does not collapse either"
            elif s_ln in ("falling", "at floor", "low"):
                v = NOT_REPRODUCED
            else:
                v = INCONCLUSIVE
            verdicts.append(v)
            bits.append(f"{c_ln.dtype} with LN {s_ln} ({w_ln}); without LN {s_san} ({w_san})")
        texts.append(f"{mask}: " + "; ".join(bits))
    if not verdicts:
        return Judgement(INCONCLUSIVE, "no data")
    return Judgement(combine_verdicts(verdicts), " | ".join(texts))


def rule_kept_stable(
    curves: Mapping[str, Sequence[Curve]], th: Thresholds, keep_min: float | None
) -> Judgement:
    """No collapse and a stable level: overall ``not collapsing`` and last half ``kept``."""

    def one(c: Curve) -> tuple[str, str]:
        s_c, w_c = collapse_status(c, th)
        s_l, w_l = level_status(c, th, keep_min)
        if s_c == "not collapsing" and s_l == "kept":
            return REPRODUCED, f"{w_c}; {w_l}"
        if s_c in ("collapsing", "at floor") or s_l in ("falling", "at floor", "low", "growing"):
            return NOT_REPRODUCED, f"{s_c}, {s_l}: {w_c}; {w_l}"
        return INCONCLUSIVE, f"{s_c}, {s_l}: {w_c}; {w_l}"

    return _parts(curves, one)


def rule_skip_unstable(skip: Mapping[str, Sequence[Curve]], th: Thresholds) -> Judgement:
    """Skip alone makes mu unstable, more so deeper: ``unstable`` at the last layer and ``I`` larger
    at the last layer than at the middle one (or non-finite values): reproduced; ``stable``: not."""

    def one(c: Curve) -> tuple[str, str]:
        s, w = stability_status(c, th)
        if s == "unstable":
            mid, end = c.layers // 2, c.layers
            if c.first_nonfinite() is not None:
                return REPRODUCED, w
            grow = instability(c, end) - instability(c, mid)
            se = Z * float(c.drop_std[end]) / math.sqrt(max(c.n_at(end), 1))
            deeper = grow > se
            w += f"; I grows by {grow:.2g} from t={mid} (± {se:.2g})"
            return (REPRODUCED if deeper else INCONCLUSIVE), w
        return {"stable": NOT_REPRODUCED}.get(s, INCONCLUSIVE), f"{s}: {w}"

    return _parts(skip, one)


def rule_full_stable(full: Mapping[str, Sequence[Curve]], th: Thresholds) -> Judgement:
    """The full transformer keeps mu stable: ``stable`` (and, for mu_rel, never at the floor)."""

    def one(c: Curve) -> tuple[str, str]:
        s, w = stability_status(c, th)
        if c.quantity == "mu_rel" and c.first_at_floor() is not None:
            return NOT_REPRODUCED, f"at the {c.dtype} floor from t={c.first_at_floor()}"
        return {"stable": REPRODUCED, "unstable": NOT_REPRODUCED}.get(s, INCONCLUSIVE), f"{s}: {w}"

    return _parts(full, one)


def _effect(curves: Mapping[float, Curve], start: int, end: int) -> Rate:
    """Rate at the smallest d_qk minus rate at the largest d_qk, over layers start..end."""
    lo, hi = curves[min(curves)], curves[max(curves)]
    a, b = lo.rate(start, end), hi.rate(start, end)
    return Rate(a.mean - b.mean, math.sqrt(a.se**2 + b.se**2), min(a.n, b.n))


def rule_dqk_slows(per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """Smaller d_qk slows the initial collapse (layers 0..k): per mask, the rate at the smallest d_qk
    is above the rate at the largest for sure (reproduced) or below it for sure (not)."""
    verdicts, texts = [], []
    for mask, curves in per_mask.items():
        k = min(th.initial_layers, min(c.layers for c in curves.values()))
        rates = {d: c.rate(0, k) for d, c in sorted(curves.items())}
        e = _effect(curves, 0, k)
        if min(c.n for c in curves.values()) < th.min_samples:
            v = INCONCLUSIVE
        else:
            v = REPRODUCED if e.lo > 0 else NOT_REPRODUCED if e.hi < 0 else INCONCLUSIVE
        verdicts.append(v)
        shown = ", ".join(f"d_qk={d:g}: {r.factor:.3g}/layer" for d, r in rates.items())
        texts.append(f"{mask}: {shown}; smallest minus largest d_qk {e.mean:+.2g} ± {Z * e.se:.2g}")
    if not verdicts:
        return Judgement(INCONCLUSIVE, "no data")
    return Judgement(combine_verdicts(verdicts), f"first {th.initial_layers} layers | " + " | ".join(texts))


def rule_dqk_global(
    per_mask: Mapping[str, Mapping[float, Curve]], global_masks: Sequence[str], sparse_masks: Sequence[str],
    th: Thresholds,
) -> Judgement:
    """The d_qk effect (initial rate at the smallest minus the largest d_qk) is larger under global
    attention than under sparse masks, for every (global, sparse) pair."""
    eff = {}
    for mask, curves in per_mask.items():
        k = min(th.initial_layers, min(c.layers for c in curves.values()))
        eff[mask] = _effect(curves, 0, k)
    verdicts, texts = [], []
    for g in global_masks:
        for s in sparse_masks:
            if g not in eff or s not in eff:
                continue
            if min(eff[g].n, eff[s].n) < th.min_samples:
                verdicts.append(INCONCLUSIVE)
                continue
            sign, diff, se = _compare(eff[s], eff[g])
            verdicts.append({1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE))
            texts.append(f"{g} minus {s}: {diff:+.2g} ± {se:.2g}")
    shown = "; ".join(f"{m}: effect {e.mean:+.2g} ± {Z * e.se:.2g}" for m, e in eff.items())
    if not verdicts:
        return Judgement(INCONCLUSIVE, f"{shown} || no (global, sparse) pair measured")
    return Judgement(combine_verdicts(verdicts), f"{shown} || " + "; ".join(texts))


def rule_dqk_shallow(per_mask: Mapping[str, Mapping[float, Curve]], th: Thresholds) -> Judgement:
    """The d_qk effect is larger in the first k layers than in the last k layers, per mask."""
    verdicts, texts = [], []
    for mask, curves in per_mask.items():
        depth = min(c.layers for c in curves.values())
        k = min(th.initial_layers, depth // 2)
        if k < 1 or min(c.n for c in curves.values()) < th.min_samples:
            verdicts.append(INCONCLUSIVE)
            texts.append(f"{mask}: too few layers or samples")
            continue
        sign, diff, se = _compare(_effect(curves, depth - k, depth), _effect(curves, 0, k))
        verdicts.append({1: REPRODUCED, -1: NOT_REPRODUCED}.get(sign, INCONCLUSIVE))
        texts.append(f"{mask}: shallow minus deep effect {diff:+.2g} ± {se:.2g}")
    if not verdicts:
        return Judgement(INCONCLUSIVE, "no data")
    return Judgement(combine_verdicts(verdicts), f"layers 0..k vs L-k..L, k<={th.initial_layers} | "
                     + " | ".join(texts))


def rule_full_rank(share: Sequence[float], n: int, th: Thresholds) -> Judgement:
    """Full rank at every layer: the smallest per-layer share of full-rank samples >= full_rank_min."""
    s = np.asarray(share, dtype=float)
    t = int(np.nanargmin(s))
    words = f"lowest full-rank share {s[t]:.0%} (t={t}) of n={n}"
    if n < th.min_samples or np.isnan(s).all():
        return Judgement(INCONCLUSIVE, words + ", too few samples")
    return Judgement(REPRODUCED if s[t] >= th.full_rank_min else NOT_REPRODUCED, words)


def rule_sigma_min(sigma_min: Sequence[float], ratio: Sequence[float], n: int, th: Thresholds) -> tuple[
        Judgement, Judgement]:
    """sigma_min well above 0: (absolute, >= sigma_abs_min at every layer; relative, sigma_min/sigma_max
    >= ratio_min at every layer). Means over samples per layer."""
    out = []
    for values, limit, label in ((sigma_min, th.sigma_abs_min, "sigma_min"),
                                 (ratio, th.ratio_min, "sigma_min/sigma_max")):
        v = np.asarray(values, dtype=float)
        t = int(np.nanargmin(v))
        words = f"smallest mean {label} {v[t]:.3g} at t={t} (limit {limit:g}, n={n})"
        if n < th.min_samples or not np.isfinite(v).all():
            out.append(Judgement(INCONCLUSIVE, words + (", too few samples" if n < th.min_samples
                                                        else ", non-finite values")))
        else:
            out.append(Judgement(REPRODUCED if v[t] >= limit else NOT_REPRODUCED, words))
    return out[0], out[1]


def rule_cos_grows(mean: Sequence[float], std: Sequence[float], n: int, d: int, th: Thresholds) -> Judgement:
    """Mean |cos| grows with depth into a narrow region: last minus first layer > Z se, and the last
    value >= aniso_factor x sqrt(2/(pi d)) (the mean |cos| of independent isotropic tokens)."""
    m, s = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    diff, se = m[-1] - m[0], Z * (s[-1] + s[0]) / math.sqrt(max(n, 1))
    iso = math.sqrt(2.0 / (math.pi * d))
    words = (f"mean |cos| {m[0]:.3g} at t=0 -> {m[-1]:.3g} at t={len(m) - 1} ({diff:+.2g} ± {se:.2g}); "
             f"isotropic level {iso:.2g}; n={n}")
    if n < th.min_samples or not np.isfinite([diff, se]).all():
        return Judgement(INCONCLUSIVE, words)
    if diff < -se:
        return Judgement(NOT_REPRODUCED, words)
    if diff > se and m[-1] >= th.aniso_factor * iso:
        return Judgement(REPRODUCED, words)
    return Judgement(INCONCLUSIVE, words)


def rule_dominant_sv(dominance: Sequence[float], ratio_min_layer: Sequence[float], n: int,
                     th: Thresholds) -> Judgement:
    """One dominant singular value and the smallest never near 0: mean sigma_1/sigma_2 >= dominance_min
    at every layer and mean sigma_min/sigma_max >= ratio_min at every layer."""
    dom, low = np.asarray(dominance, dtype=float), np.asarray(ratio_min_layer, dtype=float)
    words = (f"smallest mean sigma_1/sigma_2 {np.nanmin(dom):.3g} (t={int(np.nanargmin(dom))}); "
             f"smallest mean sigma_min/sigma_max {np.nanmin(low):.3g} (t={int(np.nanargmin(low))}); n={n}")
    if n < th.min_samples or not (np.isfinite(dom).all() and np.isfinite(low).all()):
        return Judgement(INCONCLUSIVE, words)
    ok = bool(np.min(dom) >= th.dominance_min and np.min(low) >= th.ratio_min)
    return Judgement(REPRODUCED if ok else NOT_REPRODUCED, words)


def rule_initial_cos(min_cos: Sequence[float], th: Thresholds) -> Judgement:
    """Initial cosines >= 0 (phi(0) >= 0): the share of samples whose smallest pairwise cosine of the
    initial embeddings is >= 0 is at least share_min."""
    v = np.asarray(min_cos, dtype=float)
    n = int(v.size)
    share = float((v >= 0).mean()) if n else math.nan
    words = f"phi(0) >= 0 in {share:.0%} of n={n} samples; smallest phi(0) {np.min(v) if n else math.nan:.3g}"
    if n < th.min_samples:
        return Judgement(INCONCLUSIVE, words + ", too few samples")
    return Judgement(REPRODUCED if share >= th.share_min else NOT_REPRODUCED, words)
