"""Fig. 2 with transformer models (paper §5): attention only, + the model's LayerNorm, full blocks.

Task: ``experiments.tasks.analyze``, one run per model, mode and seed (pretrained and randomly
initialised). Claims: per pretrained model, the full network keeps mu_rel away from zero, and the
attention sublayers alone collapse while the full network does not. Figure: mu_rel panels per model.
"""

from __future__ import annotations

import numpy as np

from rankcollapse.core.precision import dtype_name
from rankcollapse.experiments.analysis import majority
from rankcollapse.experiments.engine.story import FigureSpec, Story
from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Data,
    fmt,
)
from rankcollapse.experiments.plotting import curves, empty, mu_rel_panels
from rankcollapse.experiments.stories._shared import classified
from rankcollapse.experiments.tasks import analyze

SOURCE = "ours (bundled models, our modes; reading paper §5, Fig. 2 — the paper's setting is fig2_bert)"
FIGURE = "fig2_models"
S_PRE = "In pretrained models the full network keeps mu(X(t)) away from zero with depth (Fig. 2)"
R_PRE = (
    "per pretrained model, the 'full' curve is 'kept' (see classes) -> reproduced; "
    "'at floor'/'collapsing' -> not"
)
S_COMP = (
    "Pretrained models: pure attention sublayers alone collapse, LayerNorm and the other components "
    "prevent it (Fig. 2)"
)
R_COMP = (
    "per pretrained model: 'attn' curve collapsing/at floor and 'full' curve kept -> reproduced; "
    "'attn' kept -> not reproduced"
)
COLLAPSED = ("at floor", "collapsing")
#: Model names of randomly initialised models (not pretrained).
RANDOM_PREFIXES = ("random:", "tiny:")


def full_verdict(full: list[str]) -> str:
    """Classes of the 'full' curves of the pretrained models -> verdict of ``fig2.pretrained_full``."""
    if full and all(c == "kept" for c in full):
        return REPRODUCED
    if any(c in COLLAPSED for c in full):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def components_verdict(attn: list[str], v_full: str) -> str:
    """Classes of the 'attn' curves (and the full verdict) -> verdict of ``fig2.pretrained_components``."""
    if any(c == "kept" for c in attn):
        return NOT_REPRODUCED
    if attn and all(a in COLLAPSED for a in attn) and v_full == REPRODUCED:
        return REPRODUCED
    return INCONCLUSIVE


def claims(data: Data) -> list[Claim]:
    ok = data.ok
    if ok.empty:
        return [
            data.no_data("fig2.pretrained_full", S_PRE, SOURCE, R_PRE, FIGURE),
            data.no_data("fig2.pretrained_components", S_COMP, SOURCE, R_COMP, FIGURE),
        ]
    pretrained = ok[~ok["model"].astype(str).str.startswith(RANDOM_PREFIXES)]
    classes: dict[tuple[str, str], str] = {}
    finals: dict[tuple[str, str], float] = {}
    parts = []
    for model, by_model in data.groups(ok, "model"):
        for mode, grp in data.groups(by_model, "mode"):
            classes[(model, mode)] = majority([c for c, _ in classified(data, grp)])
            finals[(model, mode)] = float(np.median([data.curve(r)[-1] for r in grp["run_id"]]))
        parts.append(
            f"{model}: "
            + ", ".join(
                f"{mode} {classes[(mm, mode)]} ({fmt(finals[(mm, mode)])})"
                for (mm, mode) in classes
                if mm == model
            )
        )
    models = [m for m, _ in data.groups(pretrained, "model")]
    ev = "; ".join(parts)
    if not models:
        return [
            data.claim(
                "fig2.pretrained_full",
                S_PRE,
                SOURCE,
                R_PRE,
                "no pretrained model in the grid; " + ev,
                INCONCLUSIVE,
                figure=FIGURE,
            ),
            data.claim(
                "fig2.pretrained_components",
                S_COMP,
                SOURCE,
                R_COMP,
                "no pretrained model in the grid",
                INCONCLUSIVE,
                figure=FIGURE,
            ),
        ]
    v_full = full_verdict([classes.get((m, "full"), "missing") for m in models])
    v_comp = components_verdict([classes.get((m, "attn"), "missing") for m in models], v_full)
    return [
        data.claim("fig2.pretrained_full", S_PRE, SOURCE, R_PRE, ev, v_full, pretrained, FIGURE),
        data.claim("fig2.pretrained_components", S_COMP, SOURCE, R_COMP, ev, v_comp, pretrained, FIGURE),
    ]


def figures(data: Data) -> list[FigureSpec]:
    caption = (
        "Fig. 2 (models): mu_rel against depth t+1 (log-log) in pretrained (minilm, smollm2) and "
        "randomly initialised transformers, their own weights cycled to the depth; attn = attention "
        "sublayers only, attn+ln = + the model's LayerNorm, full = the real blocks. float32 floor "
        "dotted."
    )
    table = curves(data, ["model", "mode"])
    if table.empty:
        return [empty(FIGURE, caption, data.failures() or "no runs")]
    dtype = dtype_name(str(data.exp.base.get("dtype", "float32")))
    fig = mu_rel_panels(table, "model", "mode", dtype, str, sort=False)
    return [FigureSpec(FIGURE, fig, table, caption)]


STORY = Story(name="fig2_models", task=analyze, claims=claims, figures=figures)
