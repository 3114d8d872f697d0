"""The paper's claims and the rules that turn measured data into a verdict.

Every verdict is computed here from the tidy run table (``runs.csv``) and the run index
(``index.csv``): nothing is hard-coded. Thresholds come from each experiment's ``verdict:``
section (its YAML file). Verdicts: ``reproduced``, ``not reproduced``, ``inconclusive`` (no data,
failed runs in the experiment, too few points above the precision floor, or evidence pointing
both ways). The rules are listed
in ``docs/reproduce.md``.

A curve of mu_rel against depth is classified by :func:`classify_curve`:

- ``at floor``: most samples reach the precision floor ``FLOOR_FACTOR * eps(dtype)``;
- ``collapsing``: the tail slope of log mu_rel (last half of the pre-floor layers) < -rate_tol;
- ``kept``: tail slope >= -rate_tol and final mu_rel >= keep_min;
- ``overflow``: the tokens stopped being finite (a growing network in float32);
- ``unclear``: anything else (e.g. tiny mu_rel that still drifts slowly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.analysis import fitted_log_rate, floor_rel, pre_floor_length, spearman
from rankcollapse.experiments.config import Experiment

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)


@dataclass
class Claim:
    """One line of the claims table."""

    id: str
    experiment: str
    statement: str
    evidence: str
    verdict: str
    rule: str
    config: str = ""
    seeds: list[int] = field(default_factory=list)
    disagreement: str = ""  # plain words where our data contradicts what the paper reports

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float | np.floating):
        return f"{x:.{digits}g}" if abs(x) < 1e4 else f"{x:.{digits}e}"
    return str(x)


def _dtype_name(dtype: str) -> str:
    return {"f32": "float32", "f64": "float64"}.get(dtype, dtype)


def classify_curve(
    mu_rel: list[float], dtype: str, rate_tol: float, keep_min: float
) -> tuple[str, float | None]:
    """(class, tail slope) of one mu_rel curve; see the module docstring."""
    floor = floor_rel(_dtype_name(dtype))
    finite = [v for v in mu_rel if math.isfinite(v)]
    if len(finite) < len(mu_rel):  # the network over/underflowed: neither kept nor collapsed
        return "overflow", None
    if not finite:
        return "unclear", None
    if finite[-1] <= floor:
        return "at floor", None
    end = pre_floor_length(mu_rel, floor)
    start = end // 2
    slope = fitted_log_rate(mu_rel[:end], floor, start=start)
    if end < len(mu_rel):  # reached the last decade above the floor before the end
        return "at floor", slope
    if slope is not None and slope < -rate_tol:
        return "collapsing", slope
    if finite[-1] >= keep_min and (slope is None or slope >= -rate_tol):
        return "kept", slope
    return "unclear", slope


@dataclass
class Data:
    """One experiment's slice of the tables."""

    exp: Experiment
    table: pd.DataFrame  # long rows of finished runs
    index: pd.DataFrame  # one row per run (finished and failed)

    @property
    def ok(self) -> pd.DataFrame:
        if self.index.empty:
            return self.index
        return self.index[self.index["status"] == "ok"]

    def failures(self) -> str:
        if self.index.empty:
            return "no runs"
        bad = self.index[self.index["status"] != "ok"]
        if bad.empty:
            return ""
        return f"{len(bad)} run(s) failed, e.g. {bad['error'].iloc[0]}"

    def curve(self, run_id: str, column: str = "mu_rel") -> list[float]:
        rows = self.table[self.table["run_id"] == run_id].sort_values("layer")
        return [float(v) for v in rows[column]]

    def seeds(self, runs: pd.DataFrame | None = None) -> list[int]:
        runs = self.ok if runs is None else runs
        if runs.empty or "seed" not in runs:
            return []
        return sorted({int(s) for s in runs["seed"].dropna()})

    def config(self) -> str:
        return f"{self.exp.source} (profile {self.exp.profile})"

    def v(self, key: str, default: float) -> float:
        return float(self.exp.verdict.get(key, default))


def _claim(
    data: Data,
    cid: str,
    statement: str,
    rule: str,
    evidence: str,
    verdict: str,
    runs: pd.DataFrame | None = None,
    disagreement: str = "",
) -> Claim:
    if verdict == NOT_REPRODUCED and not disagreement:
        disagreement = f"The paper states: {statement}. We measured: {evidence}."
    return Claim(
        id=cid,
        experiment=data.exp.name,
        statement=statement,
        evidence=evidence,
        verdict=verdict,
        rule=rule,
        config=data.config(),
        seeds=data.seeds(runs),
        disagreement=disagreement,
    )


def _groups(data: Data, frame: pd.DataFrame, key: str) -> list[tuple[Any, pd.DataFrame]]:
    """``frame.groupby(key)`` in the order of the experiment's grid axis (report rows follow the config)."""
    order = {v: i for i, v in enumerate(data.exp.grid.get(key, []))}
    groups = list(frame.groupby(key, sort=False))
    return sorted(groups, key=lambda g: order.get(g[0], len(order)))


def _no_data(data: Data, cid: str, statement: str, rule: str) -> Claim:
    why = data.failures() or "no finished runs"
    return _claim(data, cid, statement, rule, f"no data: {why}", INCONCLUSIVE)


def _col(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series([None] * len(frame), index=frame.index)


# ----------------------------------------------------------------------------- Theorem 1 and radius


def claims_theorem1(data: Data) -> list[Claim]:
    ok = data.ok
    s_collapse = "Pure masked attention collapses exponentially when the mask has a center node (Thm 1)"
    r_collapse = (
        f"every center-mask run reaches the floor or has fitted log-rate < -{data.v('min_log_rate', 1e-3)}"
        " per layer -> reproduced; any run above that and off the floor -> not reproduced"
    )
    s_bound = "mu(X(t)) <= C (1 - eps^r)^{t/(2r)} with eps the smallest edge weight, r the radius (Thm 1)"
    r_bound = (
        "bound holds at every layer for every sample of every run -> reproduced (inconclusive if "
        f"every bound is vacuous: bound(T)/C >= {data.v('informative', 0.5)}); "
        "any violation -> not reproduced"
    )
    s_center = (
        "Without a center node collapse need not happen (two disconnected blocks keep their differences)"
    )
    r_center = (
        f"every center-less run keeps final mu_rel >= {data.v('keep_min', 0.1)} -> reproduced, else not"
    )
    if ok.empty:
        return [
            _no_data(data, "thm1.collapse", s_collapse, r_collapse),
            _no_data(data, "thm1.bound", s_bound, r_bound),
            _no_data(data, "thm1.no_center", s_center, r_center),
        ]
    centered = ok[_col(ok, "summary.radius").notna()]
    centerless = ok[_col(ok, "summary.radius").isna()]
    claims = []
    # collapse
    min_rate = data.v("min_log_rate", 1e-3)
    parts, fails = [], 0
    for mask, grp in _groups(data, centered, "mask"):
        rates = [r for r in _col(grp, "summary.fit_log_rate") if r is not None and not pd.isna(r)]
        hit = _col(grp, "summary.layers_to_floor")
        floor_hits = [int(h) for h in hit if h is not None and not pd.isna(h)]
        collapsed = [
            (not pd.isna(h)) or (r is not None and not pd.isna(r) and r < -min_rate)
            for h, r in zip(hit, _col(grp, "summary.fit_log_rate"), strict=True)
        ]
        fails += sum(1 for c in collapsed if not c)
        rate_txt = f"rate {_fmt(float(np.median(rates)))}/layer" if rates else "rate n/a"
        floor_txt = f", floor by t={max(floor_hits)}" if len(floor_hits) == len(grp) else ""
        parts.append(f"{mask} (r={_fmt(grp['summary.radius'].iloc[0])}): {rate_txt}{floor_txt}")
    verdict = INCONCLUSIVE if centered.empty else (REPRODUCED if fails == 0 else NOT_REPRODUCED)
    claims.append(
        _claim(
            data,
            "thm1.collapse",
            s_collapse,
            r_collapse,
            "; ".join(parts) or "no center mask",
            verdict,
            centered,
        )
    )
    # bound
    holds = _col(centered, "summary.theory.holds")
    applicable = centered[holds.notna()]
    if applicable.empty:
        claims.append(
            _claim(
                data,
                "thm1.bound",
                s_bound,
                r_bound,
                "no run with an applicable bound",
                INCONCLUSIVE,
                centered,
            )
        )
    else:
        informative = []
        for _, run in applicable.iterrows():
            b = data.curve(run["run_id"], "bound") if "bound" in data.table else []
            informative.append(bool(b) and b[0] > 0 and b[-1] / b[0] < data.v("informative", 0.5))
        n_hold = int(sum(bool(h) for h in applicable["summary.theory.holds"]))
        eps = applicable["summary.theory.epsilon"].astype(float)
        ratio = applicable["summary.theory.max_ratio"].astype(float)
        ev = (
            f"holds in {n_hold}/{len(applicable)} runs; max mu/bound {_fmt(ratio.max(), 3)}; eps "
            f"{_fmt(eps.min())}..{_fmt(eps.max())}; informative (bound(T)/C < {data.v('informative', 0.5)}) "
            f"in {sum(informative)}/{len(applicable)} runs"
        )
        if n_hold < len(applicable):
            verdict = NOT_REPRODUCED
        else:
            verdict = REPRODUCED if any(informative) else INCONCLUSIVE
        claims.append(_claim(data, "thm1.bound", s_bound, r_bound, ev, verdict, applicable))
    # no center
    if centerless.empty:
        claims.append(
            _claim(
                data, "thm1.no_center", s_center, r_center, "no center-less mask in the grid", INCONCLUSIVE
            )
        )
    else:
        finals = centerless["summary.final_mu_rel"].astype(float)
        kept = bool((finals >= data.v("keep_min", 0.1)).all())
        masks = ", ".join(sorted(set(centerless["mask"])))
        depth = int(centerless["layers"].iloc[0])
        ev = f"{masks}: final mu_rel {_fmt(finals.min())}..{_fmt(finals.max())} after {depth} layers"
        claims.append(
            _claim(
                data,
                "thm1.no_center",
                s_center,
                r_center,
                ev,
                REPRODUCED if kept else NOT_REPRODUCED,
                centerless,
            )
        )
    return claims


def _family(mask: str) -> str:
    return mask.split(":", 1)[0]


def claims_radius(data: Data) -> list[Claim]:
    stmt = "Local (sparser) masks slow collapse: the collapse rate grows with the radius r"
    min_rho = data.v("min_rho", 0.8)
    rule = (
        f"within each window family, Spearman(radius, fitted log-rate) >= {min_rho} -> reproduced; "
        "<= 0 in any family -> not reproduced; fewer than 3 fitted rates or in between -> inconclusive"
    )
    ok = data.ok
    if ok.empty:
        return [_no_data(data, "radius.slows", stmt, rule)]
    parts, verdicts = [], []
    for fam, grp in ok.groupby(ok["mask"].map(_family), sort=False):
        grp = grp[_col(grp, "summary.fit_log_rate").notna()]
        if grp["mask"].nunique() < 3:
            parts.append(f"{fam}: too few fitted rates")
            verdicts.append(INCONCLUSIVE)
            continue
        per_mask = grp.groupby("mask").agg(
            r=("summary.radius", "first"), rate=("summary.fit_log_rate", "median")
        )
        per_mask = per_mask.sort_values("r")
        rho = spearman(per_mask["r"].tolist(), per_mask["rate"].tolist())
        pairs = ", ".join(
            f"r={int(r)}: {math.exp(v):.3f}" for r, v in zip(per_mask["r"], per_mask["rate"], strict=True)
        )
        parts.append(f"{fam}: per-layer factor exp(rate) {pairs}; Spearman {_fmt(rho)}")
        verdicts.append(REPRODUCED if rho >= min_rho else NOT_REPRODUCED if rho <= 0 else INCONCLUSIVE)
    verdict = (
        NOT_REPRODUCED
        if NOT_REPRODUCED in verdicts
        else REPRODUCED
        if verdicts and all(v == REPRODUCED for v in verdicts)
        else INCONCLUSIVE
    )
    return [_claim(data, "radius.slows", stmt, rule, "; ".join(parts), verdict)]


# ----------------------------------------------------------------------------- Figure 2 and 3


def _classified(data: Data, runs: pd.DataFrame, dtype_col: str = "dtype") -> list[tuple[str, float | None]]:
    out = []
    for _, run in runs.iterrows():
        out.append(
            classify_curve(
                data.curve(run["run_id"]),
                str(run[dtype_col]),
                data.v("rate_tol", 5e-3),
                data.v("keep_min", 1e-2),
            )
        )
    return out


def _majority(classes: list[str]) -> str:
    return max(set(classes), key=classes.count) if classes else "unclear"


def claims_fig2_random(data: Data) -> list[Claim]:
    s_pure = (
        "Pure attention: mu(X(t)) collapses exponentially under every mask, at mask-dependent rates (Fig. 2)"
    )
    r_pure = "every pure-attention curve (majority over seeds) is 'at floor' or 'collapsing' -> reproduced"
    s_ln = (
        "Adding LayerNorm alone: mu(X(t)) no longer converges to zero in randomly initialised models (Fig. 2)"
    )
    r_ln = (
        "per mask: LN curves 'kept' in both dtypes -> reproduced; 'at floor' or 'collapsing' in float64 "
        "-> not reproduced; otherwise inconclusive"
    )
    ok = data.ok
    if ok.empty:
        return [
            _no_data(data, "fig2.pure_collapse", s_pure, r_pure),
            _no_data(data, "fig2.ln_random", s_ln, r_ln),
        ]
    claims = []
    pure = ok[ok["preset"] == "attn"]
    parts, good = [], True
    for mask, grp in _groups(data, pure, "mask"):
        per_dtype = []
        for dtype, g2 in grp.groupby("dtype"):
            cls = _majority([c for c, _ in _classified(data, g2)])
            good &= cls in ("at floor", "collapsing")
            per_dtype.append(f"{dtype} {cls}")
        parts.append(f"{mask}: " + ", ".join(per_dtype))
    claims.append(
        _claim(
            data,
            "fig2.pure_collapse",
            s_pure,
            r_pure,
            "; ".join(parts),
            (REPRODUCED if good else NOT_REPRODUCED) if parts else INCONCLUSIVE,
            pure,
        )
    )
    ln = ok[ok["preset"] != "attn"]
    for mask, grp in _groups(data, ln, "mask"):
        by_dtype: dict[str, str] = {}
        finals = []
        for dtype, g2 in grp.groupby("dtype"):
            by_dtype[str(dtype)] = _majority([c for c, _ in _classified(data, g2)])
            finals.append(
                f"{dtype} {by_dtype[str(dtype)]} (final mu_rel {_fmt(g2['summary.final_mu_rel'].median())})"
            )
        f64 = by_dtype.get("float64", by_dtype.get("float32", "unclear"))
        if all(c == "kept" for c in by_dtype.values()):
            verdict = REPRODUCED
        elif f64 in ("at floor", "collapsing"):
            verdict = NOT_REPRODUCED
        else:
            verdict = INCONCLUSIVE
        note = ""
        if verdict == NOT_REPRODUCED:
            note = (
                f"With random Gaussian weights and LayerNorm (tokens on the sphere), mu_rel under the {mask} "
                f"mask still falls ({'; '.join(finals)}); the paper reports that LN stops the collapse."
            )
        claims.append(
            _claim(
                data,
                f"fig2.ln_random[{mask}]",
                s_ln + f" — mask {mask}",
                r_ln,
                "; ".join(finals),
                verdict,
                grp,
                note,
            )
        )
    return claims


def claims_fig3(data: Data) -> list[Claim]:
    s_temp = "Smaller temperature d_QK (sharper attention) slows rank collapse, for every mask (Fig. 3)"
    min_rho = data.v("min_abs_rho", 0.8)
    r_temp = (
        f"per mask, Spearman(d_QK, fitted log-rate) <= -{min_rho} (smaller d_QK -> slower) -> reproduced "
        f"for that mask; >= +{min_rho} -> not reproduced; all masks must agree"
    )
    s_glob = (
        "The temperature effect is larger with global (complete) attention than with sparser masks (Fig. 3)"
    )
    r_glob = (
        "spread max-min of fitted log-rate over d_QK: complete > every other mask -> reproduced; "
        "smaller than some mask -> not reproduced"
    )
    ok = data.ok
    if ok.empty:
        return [
            _no_data(data, "fig3.temperature", s_temp, r_temp),
            _no_data(data, "fig3.global", s_glob, r_glob),
        ]
    parts, verdicts, spreads = [], [], {}
    for mask, grp in _groups(data, ok, "mask"):
        rate = grp["summary.fit_log_rate"].astype(float)
        # collapsed within < 3 layers: no fitted rate; rank those runs as the fastest
        rate = rate.fillna(-np.inf)
        per_t = rate.groupby(grp["temperature"]).median()
        finite = per_t.replace(-np.inf, np.nan).dropna()
        spreads[mask] = float(finite.max() - finite.min()) if len(finite) >= 2 else math.nan
        rho = spearman(grp["temperature"].astype(float).tolist(), rate.clip(lower=-1e6).tolist())
        txt = ", ".join(
            f"d_QK={t:g}: {f'{math.exp(v):.3f}' if math.isfinite(v) else 'floor<3 layers'}"
            for t, v in per_t.items()
        )
        parts.append(f"{mask}: factor/layer {txt}; rho {_fmt(rho)}")
        verdicts.append(REPRODUCED if rho <= -min_rho else NOT_REPRODUCED if rho >= min_rho else INCONCLUSIVE)
    verdict = (
        REPRODUCED
        if all(v == REPRODUCED for v in verdicts)
        else NOT_REPRODUCED
        if NOT_REPRODUCED in verdicts
        else INCONCLUSIVE
    )
    claims = [_claim(data, "fig3.temperature", s_temp, r_temp, "; ".join(parts), verdict)]
    claims.append(_fig3_shallow(data, ok, min_rho))
    if "complete" in spreads and len(spreads) > 1 and math.isfinite(spreads["complete"]):
        others = {m: s for m, s in spreads.items() if m != "complete" and math.isfinite(s)}
        ev = "spread of log-rate over d_QK: " + ", ".join(f"{m} {_fmt(s)}" for m, s in spreads.items())
        if not others:
            verdict = INCONCLUSIVE
        else:
            verdict = REPRODUCED if all(spreads["complete"] > s for s in others.values()) else NOT_REPRODUCED
        claims.append(_claim(data, "fig3.global", s_glob, r_glob, ev, verdict))
    else:
        claims.append(
            _claim(data, "fig3.global", s_glob, r_glob, "complete mask missing or not fitted", INCONCLUSIVE)
        )
    return claims


def _fig3_shallow(data: Data, ok: pd.DataFrame, min_rho: float) -> Claim:
    """Shallow layers: depth at which mu_rel first falls below ``shallow_level`` against d_QK."""
    level = data.v("shallow_level", 0.1)
    stmt = "Smaller d_QK alleviates collapse most in shallow layers: the first decade of mu_rel is lost later"
    rule = (
        f"per mask, t_{level:g} = first layer with mu_rel < {level:g} (depth + 1 if never); Spearman(d_QK, "
        f"t_{level:g}) <= -{min_rho} -> reproduced for that mask; >= +{min_rho} -> not; all masks must agree"
    )
    parts, verdicts = [], []
    for mask, grp in _groups(data, ok, "mask"):
        depth = []
        for run_id in grp["run_id"]:
            curve = data.curve(run_id)
            depth.append(next((t for t, v in enumerate(curve) if v < level), len(curve)))
        temps = grp["temperature"].astype(float).tolist()
        rho = spearman(temps, depth)
        per_t = pd.Series(depth, index=temps).groupby(level=0).median()
        parts.append(
            f"{mask}: t_{level:g} "
            + ", ".join(f"d_QK={t:g}: {v:g}" for t, v in per_t.items())
            + f"; rho {_fmt(rho)}"
        )
        verdicts.append(REPRODUCED if rho <= -min_rho else NOT_REPRODUCED if rho >= min_rho else INCONCLUSIVE)
    verdict = (
        REPRODUCED
        if verdicts and all(v == REPRODUCED for v in verdicts)
        else NOT_REPRODUCED
        if NOT_REPRODUCED in verdicts
        else INCONCLUSIVE
    )
    return _claim(data, "fig3.shallow", stmt, rule, "; ".join(parts), verdict)


def claims_ln_orthogonal(data: Data) -> list[Claim]:
    stmt = "With LayerNorm and orthogonal W_V, tokens in one open hemisphere still collapse exponentially"
    min_rate = data.v("min_log_rate", 1e-3)
    rule = (
        f"every run reaches the floor or has fitted log-rate < -{min_rate} per layer -> reproduced, else not"
    )
    ok = data.ok
    if ok.empty:
        return [_no_data(data, "ln.orthogonal", stmt, rule)]
    parts, fails = [], 0
    for mask, grp in _groups(data, ok, "mask"):
        rates = grp["summary.fit_log_rate"].astype(float)
        hits = grp["summary.layers_to_floor"]
        fails += int(sum(1 for h, r in zip(hits, rates, strict=True) if pd.isna(h) and not (r < -min_rate)))
        hit_txt = f", floor by t={int(hits.max())}" if hits.notna().all() else ""
        parts.append(f"{mask}: rate {_fmt(rates.median())}/layer{hit_txt}")
    return [
        _claim(
            data, "ln.orthogonal", stmt, rule, "; ".join(parts), REPRODUCED if fails == 0 else NOT_REPRODUCED
        )
    ]


# ----------------------------------------------------------------------------- models


def claims_fig2_models(data: Data) -> list[Claim]:
    s_pre = "In pretrained models the full network keeps mu(X(t)) away from zero with depth (Fig. 2)"
    r_pre = (
        "per pretrained model, the 'full' curve is 'kept' (see classes) -> reproduced; "
        "'at floor'/'collapsing' -> not"
    )
    s_ln = (
        "Pretrained models: pure attention sublayers alone collapse, LayerNorm and the other components "
        "prevent it (Fig. 2)"
    )
    r_ln = (
        "per pretrained model: 'attn' curve collapsing/at floor and 'full' curve kept -> reproduced; "
        "'attn' kept -> not reproduced"
    )
    ok = data.ok
    if ok.empty:
        return [
            _no_data(data, "fig2.pretrained_full", s_pre, r_pre),
            _no_data(data, "fig2.pretrained_components", s_ln, r_ln),
        ]
    pretrained = ok[~ok["model"].astype(str).str.startswith("random:")]
    classes: dict[tuple[str, str], str] = {}
    finals: dict[tuple[str, str], float] = {}
    parts = []
    for model, by_model in _groups(data, ok, "model"):
        for mode, grp in _groups(data, by_model, "mode"):
            classes[(model, mode)] = _majority([c for c, _ in _classified(data, grp)])
            finals[(model, mode)] = float(np.median([data.curve(r)[-1] for r in grp["run_id"]]))
        parts.append(
            f"{model}: "
            + ", ".join(
                f"{mode} {classes[(mm, mode)]} ({_fmt(finals[(mm, mode)])})"
                for (mm, mode) in classes
                if mm == model
            )
        )
    models = [m for m, _ in _groups(data, pretrained, "model")]
    ev = "; ".join(parts)
    if not models:
        return [
            _claim(
                data,
                "fig2.pretrained_full",
                s_pre,
                r_pre,
                "no pretrained model in the grid; " + ev,
                INCONCLUSIVE,
            ),
            _claim(
                data,
                "fig2.pretrained_components",
                s_ln,
                r_ln,
                "no pretrained model in the grid",
                INCONCLUSIVE,
            ),
        ]
    full = [classes.get((m, "full"), "missing") for m in models]
    v_full = (
        REPRODUCED
        if all(c == "kept" for c in full)
        else NOT_REPRODUCED
        if any(c in ("at floor", "collapsing") for c in full)
        else INCONCLUSIVE
    )
    attn = [classes.get((m, "attn"), "missing") for m in models]
    if any(c == "kept" for c in attn):
        v_comp = NOT_REPRODUCED
    elif all(a in ("at floor", "collapsing") for a in attn) and v_full == REPRODUCED:
        v_comp = REPRODUCED
    else:
        v_comp = INCONCLUSIVE
    return [
        _claim(data, "fig2.pretrained_full", s_pre, r_pre, ev, v_full, pretrained),
        _claim(data, "fig2.pretrained_components", s_ln, r_ln, ev, v_comp, pretrained),
    ]


def claims_fig4(data: Data) -> list[Claim]:
    s_rank = "Pretrained models keep full-rank token representations at every layer (Fig. 4)"
    fr_min = data.v("full_rank_min", 0.99)
    r_rank = (
        f"full-rank share >= {fr_min} at every layer output t >= 1 of every model -> reproduced, else not "
        "(the embeddings X(0) are reported apart: a token repeated in a window repeats its embedding row)"
    )
    s_aniso = "…yet the representations are anisotropic: high mean |cosine| between tokens (Fig. 4)"
    factor = data.v("aniso_factor", 3.0)
    r_aniso = (
        f"max over layers t>=1 of mean |cos| >= {factor} x sqrt(2/(pi d)) (mean |cos| of isotropic "
        "Gaussian tokens) for every model -> reproduced, else not"
    )
    ok = data.ok
    if ok.empty:
        return [
            _no_data(data, "fig4.full_rank", s_rank, r_rank),
            _no_data(data, "fig4.anisotropy", s_aniso, r_aniso),
        ]
    rank_parts, rank_ok, an_parts, an_ok = [], True, [], True
    for model, grp in _groups(data, ok, "model"):
        rows = data.table[data.table["run_id"].isin(grp["run_id"])]
        per_layer = rows.groupby("layer")[["full_rank", "num_rank", "mean_abs_cos"]].mean()
        outputs = per_layer["full_rank"][per_layer.index >= 1]
        worst = float(outputs.min()) if len(outputs) else math.nan
        rank_ok &= bool(worst >= fr_min)
        emb = float(per_layer["full_rank"].get(0, math.nan))
        ranks = per_layer["num_rank"][per_layer.index >= 1]
        rank_parts.append(
            f"{model}: min full-rank share {_fmt(worst)} over layers 1..{int(per_layer.index.max())}, "
            f"mean numerical rank >= {_fmt(float(ranks.min()), 4)} (embeddings: share {_fmt(emb)}, "
            f"rank {_fmt(float(per_layer['num_rank'].get(0, math.nan)), 4)})"
        )
        d_model = float(grp["summary.d_model"].iloc[0]) if "summary.d_model" in grp else math.nan
        baseline = math.sqrt(2 / (math.pi * d_model)) if d_model > 0 else math.nan
        deep = per_layer["mean_abs_cos"][per_layer.index >= 1]
        top = float(deep.max()) if len(deep) else math.nan
        an_ok &= bool(top >= factor * baseline)
        an_parts.append(
            f"{model}: max mean |cos| {_fmt(top)} (layer {int(deep.idxmax()) if len(deep) else 'n/a'}) "
            f"vs isotropic {_fmt(baseline)}"
        )
    return [
        _claim(
            data,
            "fig4.full_rank",
            s_rank,
            r_rank,
            "; ".join(rank_parts),
            REPRODUCED if rank_ok else NOT_REPRODUCED,
        ),
        _claim(
            data,
            "fig4.anisotropy",
            s_aniso,
            r_aniso,
            "; ".join(an_parts),
            REPRODUCED if an_ok else NOT_REPRODUCED,
        ),
    ]


# ----------------------------------------------------------------------------- counterexample


def claims_counterexample(data: Data) -> list[Claim]:
    s_meet = "N = 2, d = 2 without LayerNorm: both tokens converge to the same point (Fig. 1, left)"
    meet_tol = data.v("meet_tol", 1e-8)
    r_meet = (
        f"every start ends with mu_rel <= {meet_tol} -> reproduced; if every start that does not meet has "
        "stalled (last attention weight of token 1 on token 0 times the depth run < meet_tol: another run "
        "as deep could not close the gap visibly) -> inconclusive; otherwise not reproduced"
    )
    s_tok0 = "Token 0 (attending only to itself) converges to (0, 1) or (0, -1) (Fig. 1)"
    r_tok0 = "every LN run ends with token 0 within 1e-6 of ±A, A the dominant left eigenvector of W_V"
    s_ln = (
        "With LayerNorm, token 1 converges to a point B != ±A from an arc of starts: the tokens keep "
        "full rank (Fig. 1 right, Fig. 5)"
    )
    r_ln = (
        "some starts end with numerical rank 2 and their token-1 limits agree (1e-6) at a point B with "
        "|<B, A>| < 1 - 1e-6 -> reproduced; no start keeps rank 2 -> not reproduced"
    )
    ok = data.ok
    if ok.empty:
        return [
            _no_data(data, "cx.no_ln_meet", s_meet, r_meet),
            _no_data(data, "cx.token0", s_tok0, r_tok0),
            _no_data(data, "cx.ln_full_rank", s_ln, r_ln),
        ]
    run = ok.iloc[0]
    rows = data.table[data.table["run_id"] == run["run_id"]]
    n = len(rows)
    met = rows["noln_mu_rel"] <= meet_tol
    apart = rows[~met]
    if met.all():
        v_meet, ev_meet = (
            REPRODUCED,
            f"{n}/{n} starts meet (max final mu_rel {_fmt(rows['noln_mu_rel'].max())})",
        )
    else:
        depth = float(data.exp.base.get("steps", 1))
        stalled = bool((apart["noln_attn_10"] * depth < meet_tol).all())
        v_meet = INCONCLUSIVE if stalled else NOT_REPRODUCED
        ev_meet = (
            f"{int(met.sum())}/{n} starts meet; {len(apart)} (token 1 from theta in "
            f"[{apart['theta'].min():.2f}, {apart['theta'].max():.2f}]) end apart with mu_rel up to "
            f"{_fmt(apart['noln_mu_rel'].max())} and attention of token 1 on token 0 <= "
            f"{_fmt(apart['noln_attn_10'].max())}" + (" (stalled)" if stalled else "")
        )
    a = np.array([run["summary.sink_x"], run["summary.sink_y"]], dtype=float)
    t0 = rows[["ln_token0_x", "ln_token0_y"]].to_numpy(dtype=float)
    dist = np.minimum(np.linalg.norm(t0 - a, axis=1), np.linalg.norm(t0 + a, axis=1))
    v_tok0 = REPRODUCED if float(dist.max()) < 1e-6 else NOT_REPRODUCED
    ev_tok0 = (
        f"A = ({a[0]:.4f}, {a[1]:.4f}); max distance of token 0 to ±A after the run {_fmt(float(dist.max()))}"
    )
    full = rows[rows["ln_rank"] >= 2]
    if full.empty:
        v_ln, ev_ln = NOT_REPRODUCED, f"0/{n} starts keep rank 2"
    else:
        pts = full[["ln_x", "ln_y"]].to_numpy(dtype=float)
        b = np.median(pts, axis=0)
        agree = bool(np.linalg.norm(pts - b, axis=1).max() < 1e-6)
        off_axis = abs(float(b @ a)) < 1 - 1e-6
        v_ln = REPRODUCED if agree and off_axis else NOT_REPRODUCED
        arc = (
            f"; computed basin arc of B ({run.get('summary.arc_start', math.nan):.3f}, "
            f"{run.get('summary.arc_end', math.nan):.3f}) rad with token 0 at A"
            if "summary.arc_start" in run and not pd.isna(run["summary.arc_start"])
            else ""
        )
        spread = _fmt(float(np.linalg.norm(pts - b, axis=1).max()))
        ev_ln = (
            f"{len(full)}/{n} starts keep rank 2 (theta in [{full['theta'].min():.3f}, "
            f"{full['theta'].max():.3f}] rad, token 0 from {data.exp.base.get('token0')}); their token 1 "
            f"ends at B = ({b[0]:.4f}, {b[1]:.4f}), |<B, A>| = {abs(float(b @ a)):.4f}, spread {spread}{arc}"
        )
    return [
        _claim(data, "cx.no_ln_meet", s_meet, r_meet, ev_meet, v_meet),
        _claim(data, "cx.token0", s_tok0, r_tok0, ev_tok0, v_tok0),
        _claim(data, "cx.ln_full_rank", s_ln, r_ln, ev_ln, v_ln),
    ]


def claims_equilibria(data: Data) -> list[Claim]:
    stmt = (
        "With suitable W_V, the LayerNorm dynamics have stable equilibria of every rank 1..min(N, d), each "
        "attracting a positive-measure set of inputs"
    )
    res_max = data.v("residual_max", 1e-10)
    rule = (
        f"every rank k has a construction whose X* has residual <= {res_max}, numerical rank k and tangent "
        "spectral radius < 1 (locally asymptotically stable, so an open set of inputs converges to it) -> "
        "reproduced; a constructed one failing a check -> not reproduced; a rank without a construction -> "
        "inconclusive. The share of sampled nearby inputs that converge is reported as evidence (0 means "
        "the basin is smaller than the sampling radius)"
    )
    ok = data.ok
    if ok.empty:
        return [_no_data(data, "eq.every_rank", stmt, rule)]
    rows = data.table.merge(ok[["run_id"]], on="run_id").sort_values("k")
    parts, verdicts = [], []
    for _, r in rows.iterrows():
        k = int(r["k"])
        if not bool(r["constructed"]):
            parts.append(f"k={k}: no construction")
            verdicts.append(INCONCLUSIVE)
            continue
        good = float(r["residual"]) <= res_max and int(r["rank"]) == k and bool(r["stable"])
        basin = float(r["basin_ci_low"]) > 0
        verdicts.append(REPRODUCED if good and basin else NOT_REPRODUCED if not good else INCONCLUSIVE)
        radius = r["basin_radius"] if "basin_radius" in r else data.exp.base.get("radius")
        parts.append(
            f"k={k}: rank {int(r['rank'])}, residual {_fmt(float(r['residual']))}, spectral radius "
            f"{_fmt(float(r['spectral_radius']), 3)}, share of inputs within noise {_fmt(float(radius))} "
            f"converging {_fmt(float(r['basin_fraction']))} "
            f"[{_fmt(float(r['basin_ci_low']))}, {_fmt(float(r['basin_ci_high']))}]"
        )
    n, d = data.exp.base.get("n"), data.exp.base.get("d")
    verdict = (
        NOT_REPRODUCED
        if NOT_REPRODUCED in verdicts
        else REPRODUCED
        if all(v == REPRODUCED for v in verdicts)
        else INCONCLUSIVE
    )
    return [_claim(data, "eq.every_rank", stmt, rule, f"N={n}, d={d}: " + "; ".join(parts), verdict)]


CLAIM_RULES: dict[str, Callable[[Data], list[Claim]]] = {
    "counterexample": claims_counterexample,
    "equilibria_ranks": claims_equilibria,
    "theorem1": claims_theorem1,
    "radius_rate": claims_radius,
    "fig2_random": claims_fig2_random,
    "fig3_temperature": claims_fig3,
    "ln_orthogonal": claims_ln_orthogonal,
    "fig2_models": claims_fig2_models,
    "fig4_geometry": claims_fig4,
}


def evaluate(exp: Experiment, table: pd.DataFrame, index: pd.DataFrame) -> list[Claim]:
    """The claims of one experiment from its slice of the run tables."""
    rule = CLAIM_RULES.get(exp.name)
    if rule is None:
        return []
    t = table[table["experiment"] == exp.name] if not table.empty else table
    i = index[index["experiment"] == exp.name] if not index.empty else index
    data = Data(exp, t, i)
    claims = rule(data)
    failed = data.failures()
    if failed and not data.ok.empty:  # part of the grid is missing: no claim can be fully reproduced
        for claim in claims:
            claim.evidence += f"; {failed}"
            if claim.verdict == REPRODUCED:
                claim.verdict = INCONCLUSIVE
    return claims
