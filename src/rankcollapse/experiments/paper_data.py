"""From the run tables of the paper's stories to curves and claim rows (ours).

- :func:`curves_by`: the ``kind = curve`` rows of :func:`~rankcollapse.experiments.paper_tasks.paper_curves`
  as :class:`~rankcollapse.experiments.paper_curves.Curve` objects, pooled over weight seeds;
- :func:`sample_note`: the samples, seeds and uncertainty behind a verdict, in words;
- :func:`two_way_claim`: one claim row judged on raw ``mu`` (the paper's quantity) and on
  ``mu_rel`` with the precision floor; the row's verdict combines both
  (``engine.verdicts.combine_verdicts``) and a difference is explained in plain words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.engine.verdicts import Claim, Data, combine_verdicts
from rankcollapse.experiments.paper_curves import Curve, Z
from rankcollapse.experiments.paper_rules import Judgement

#: Words for the variants (modes of ``rankcollapse.models``), as the paper names them.
VARIANT_WORDS: dict[str, str] = {
    "attn": "SAN (attention only)",
    "attn+skip": "SAN + skip",
    "attn+ln": "SAN + LayerNorm",
    "attn+skip+ln": "SAN + skip + LayerNorm (post-LN)",
    "full": "full transformer",
}
#: Words for the paper's four masks.
MASK_WORDS: dict[str, str] = {
    "complete": "complete",
    "causal": "causal",
    "window:w=1": "sliding window (w = 1)",
    "causal-window:w=1": "uni-directional sliding window (w = 1)",
}
QUANTITY_WORDS: dict[str, str] = {"mu": "raw mu (the paper's quantity)", "mu_rel": "mu_rel with the floor"}


def words(mapping: dict[str, str], key: Any) -> str:
    return mapping.get(str(key), str(key))


def rows_of(data: Data, kind: str) -> pd.DataFrame:
    """Rows of ``kind`` of the finished runs (empty frame if none)."""
    t = data.table
    if t.empty or "kind" not in t or data.ok.empty:
        return pd.DataFrame()
    t = t[t["run_id"].isin(set(data.ok["run_id"]))]
    return t[t["kind"] == kind]


def curves_by(frame: pd.DataFrame, quantity: str, keys: Sequence[str]) -> dict[tuple, Curve]:
    """``{key tuple: Curve}`` of ``quantity``, one per group of ``keys`` (+ dtype), pooled over runs."""
    out: dict[tuple, Curve] = {}
    if frame.empty:
        return out
    for key, grp in frame.groupby([*keys, "dtype"], sort=False, dropna=False):
        per_run = [
            Curve.from_rows(g, quantity, str(key[-1]), int(g["samples"].iloc[0]))
            for _, g in grp.groupby("run_id", sort=False)
        ]
        out[tuple(key)] = Curve.pool(per_run)
    return out


def by_mask(curves: dict[tuple, Curve], select: Callable[[tuple], bool], masks: Sequence[str],
            dtypes: Sequence[str] = ("float32", "float64")) -> dict[str, list[Curve]]:
    """``{mask: [curve per dtype, in dtypes order]}`` of the keys ``(..., mask, dtype)`` that ``select``."""
    out: dict[str, list[Curve]] = {}
    for mask in masks:
        got = [c for dt in dtypes for k, c in curves.items() if select(k) and k[-2] == mask and k[-1] == dt]
        if got:
            out[mask] = got
    return out


def aligned(a: dict[str, list[Curve]], b: dict[str, list[Curve]]) -> tuple[dict, dict]:
    """The masks and dtypes present in both ``a`` and ``b`` (for rules that compare two variants)."""
    out_a, out_b = {}, {}
    for mask in a:
        if mask not in b:
            continue
        dt = {c.dtype for c in a[mask]} & {c.dtype for c in b[mask]}
        out_a[mask] = [c for c in a[mask] if c.dtype in dt]
        out_b[mask] = [c for c in b[mask] if c.dtype in dt]
    return out_a, out_b


def sample_note(runs: pd.DataFrame, frame: pd.DataFrame) -> str:
    """``n = 8 per condition (2 weight seeds x 4 excerpts; seeds 0, 1); ± = 2 standard errors``."""
    if runs.empty:
        return "no runs"
    seeds = sorted({int(s) for s in runs["seed"].dropna()}) if "seed" in runs else []
    per_run = int(frame["samples"].iloc[0]) if "samples" in frame and not frame.empty else 0
    pretrained = bool(frame["pretrained"].iloc[0]) if "pretrained" in frame and not frame.empty else False
    what = "excerpt seed(s)" if pretrained else "weight and excerpt seed(s)"
    return (f"n = {per_run * max(len(seeds), 1)} samples per condition ({len(seeds)} {what} "
            f"{', '.join(map(str, seeds))} x {per_run} excerpts each); "
            f"± = {Z:g} standard errors over samples")


def norm_rates(mu: dict[str, list[Curve]], rel: dict[str, list[Curve]]) -> str:
    """Per-layer factor of ``||X||_F`` per mask: exp(rate of log mu - rate of log mu_rel)."""
    bits = []
    for mask, cs in mu.items():
        for c_mu in cs:
            c_rel = next((c for c in rel.get(mask, []) if c.dtype == c_mu.dtype), None)
            if (c_rel is None or c_rel.first_at_floor() is not None or c_mu.first_nonfinite() is not None
                    or c_mu.first_at_floor() is not None or c_rel.first_nonfinite() is not None):
                continue
            r = c_mu.rate(0, c_mu.layers).mean - c_rel.rate(0, c_rel.layers).mean
            if math.isfinite(r):
                bits.append(f"{words(MASK_WORDS, mask)} ({c_mu.dtype}) x{math.exp(r):.3g}")
                break
    return ", ".join(bits)


def explain(raw: Judgement, rel: Judgement, norms: str) -> str:
    """Plain words where raw mu and mu_rel tell different stories ("" when nothing differs)."""
    parts = []
    if raw.verdict != rel.verdict:
        parts.append(f"Raw mu says {raw.verdict!r}, mu_rel says {rel.verdict!r}.")
        if norms:
            parts.append(f"Raw mu = mu_rel x ||X||_F, and the token norm ||X||_F changes per layer by "
                         f"{norms}: that change moves raw mu on its own, without any change in how alike "
                         "the tokens are.")
    if " kept" in raw.evidence and "at floor" in rel.evidence:
        parts.append("Where raw mu levels off ('kept') while mu_rel sits at the precision floor (32 eps "
                     "of its dtype), the tokens have collapsed to rounding noise: raw mu stays level only "
                     "because the norm does; in float64 the same curve sits 9 orders of magnitude lower.")
    return " ".join(parts)


def two_way_claim(data: Data, cid: str, statement: str, source: str, rule: str, raw: Judgement,
                  rel: Judgement, runs: pd.DataFrame, frame: pd.DataFrame, figure: str, model_label: str,
                  norms: str = "", names: tuple[str, str] | None = None) -> Claim:
    """One claim row from the raw-mu and mu_rel judgements (see the module docstring).

    ``names``: the words for the two quantities (default raw mu and mu_rel with the floor).
    """
    verdict = combine_verdicts([raw.verdict, rel.verdict])
    first, second = names or (QUANTITY_WORDS["mu"], QUANTITY_WORDS["mu_rel"])
    evidence = (f"[{model_label}] {first}: {raw.verdict} — {raw.evidence} || "
                f"{second}: {rel.verdict} — {rel.evidence} || {sample_note(runs, frame)}")
    why = explain(raw, rel, norms) if names is None else (
        f"{first} says {raw.verdict!r}, {second} says {rel.verdict!r}." if raw.verdict != rel.verdict else "")
    claim = data.claim(cid, f"{statement} [{model_label}]", source, rule, evidence, verdict, runs,
                       figure=figure, disagreement=why)
    if why and not claim.disagreement:
        claim.disagreement = why
    return claim


def one_way_claim(data: Data, cid: str, statement: str, source: str, rule: str, judged: Judgement,
                  runs: pd.DataFrame, frame: pd.DataFrame, figure: str, model_label: str) -> Claim:
    """A claim row judged on one quantity (the token geometry of Figs. 4, 8, 9)."""
    evidence = f"[{model_label}] {judged.evidence} || {sample_note(runs, frame)}"
    return data.claim(cid, f"{statement} [{model_label}]", source, rule, evidence, judged.verdict, runs,
                      figure=figure)


def runs_of(data: Data, frame: pd.DataFrame) -> pd.DataFrame:
    """Index rows of the runs behind ``frame``."""
    ok = data.ok
    return ok[ok["run_id"].isin(set(frame["run_id"]))] if not frame.empty else ok.iloc[0:0]


def model_groups(frame: pd.DataFrame) -> list[tuple[str, bool, pd.DataFrame]]:
    """``(model_label, pretrained, rows)`` per model, random-init first."""
    if frame.empty:
        return []
    out = [(str(label), bool(g["pretrained"].iloc[0]), g)
           for label, g in frame.groupby("model_label", sort=False)]
    return sorted(out, key=lambda x: (x[1], x[0]))


def layer_array(frame: pd.DataFrame, column: str) -> np.ndarray:
    """Mean over runs of ``column`` per layer (layer order)."""
    return frame.groupby("layer")[column].mean().sort_index().to_numpy(dtype=float)


def pooled_layer(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Per layer: mean and std over all samples of all runs (each run: mean ``column``, std
    ``column_std`` over its ``samples``), and the total number of samples."""
    means, stds, ns = [], [], []
    for _, g in frame.groupby("run_id", sort=False):
        g = g.sort_values("layer")
        means.append(g[column].to_numpy(dtype=float))
        stds.append(g[f"{column}_std"].to_numpy(dtype=float))
        ns.append(float(g["samples"].iloc[0]))
    depth = min(len(m) for m in means)
    m = np.stack([a[:depth] for a in means])
    sd = np.stack([a[:depth] for a in stds])
    w = np.asarray(ns)[:, None] / sum(ns)
    mean = (w * m).sum(0)
    std = np.sqrt((w * (sd**2 + (m - mean) ** 2)).sum(0))
    return mean, std, int(sum(ns))
