"""Every term used in a claim's evidence, defined once; the report prints those that appear on its page.

The paper's stories use :data:`rankcollapse.experiments.paper_rules.GLOSSARY`; the theory stories and
our own experiments use the terms below. A term is shown when it occurs, as written, in some evidence
cell, rule or statement of the report.
"""

from __future__ import annotations

from collections.abc import Iterable

from rankcollapse.experiments.paper_rules import GLOSSARY as PAPER_TERMS

#: Terms of the theory stories and of our own experiments (ours: how the checks are phrased).
THEORY_TERMS: dict[str, str] = {
    "rate": "the fitted per-layer slope of log mu_rel above the precision floor (-0.67/layer = mu_rel "
            "falls to exp(-0.67) = 51% per layer)",
    "factor/layer": "exp(rate): the share of mu_rel left after one more layer",
    "floor by t": "the first layer at which mu_rel reaches the precision floor of the run's dtype",
    "final mu_rel": "mu_rel at the last layer of the run (mean over samples)",
    "t_0.1": "the first layer at which mu_rel has fallen below 0.1 (the 'initial' speed of collapse)",
    "Spearman": "Spearman's rank correlation between the two quantities named (1: the same order)",
    "rho": "Spearman's rank correlation of the per-layer factor with d_QK (-1 to 1)",
    "eps": "ε of Theorem 1: the smallest attention weight on a mask edge over the whole run",
    "ρ": "the bound's per-layer rate: (1 - ε^r)^{1/r} (Theorem 1) or (1 - n ε^{2r})^{1/(2r)} "
         "(Theorem 2, Corollary 1)",
    "C/mu(0)": "the smallest constant C with mu(t) <= C ρ^t at every layer, divided by mu(0)",
    "vacuous": "ρ^T > 1/2: the bound falls by less than a factor 2 over the run's T layers: it says nothing",
    "consistent": "the measured tail rate of mu is no slower than ρ (or mu reached the precision floor)",
    "rate_exceeded": "mu falls more slowly than the bound allows: C would have to grow with depth",
    "tail rate": "the measured per-layer factor of mu over the second half of the layers above the floor",
    "residual": "||F(X*) - X*||_F: how far a claimed equilibrium X* is from being fixed by the map F",
    "spectral radius": "the largest |eigenvalue| of the map's Jacobian on the tangent space of the "
                       "product of spheres; < 1 means locally attracting",
    "unstable / neutral / stable": "tangent directions with |eigenvalue| > 1, = 1 (within 1e-9) and < 1",
    "share of inputs within noise": "the fraction of starts within the stated distance of the "
                                    "equilibrium that converge to it, with a 95% Wilson interval",
    "red segment": "the arc of token 2's starts (token 1 at (0, 1)) that converges to B: Fig. 1's red arc",
    "meet": "both tokens end at the same point (mu_rel below the floor): the pair collapsed",
    "stalled": "the attention weight that would pull the tokens together underflowed, so they stop moving",
    "overflow": "some value turned non-finite (inf or NaN) in the run's dtype; never counted as collapse",
    "full-rank share": "the share of samples whose numerical rank equals min(N, d)",
    "isotropic": "the mean |cos| of independent Gaussian tokens of the same size (the no-anisotropy level)",
}

GLOSSARY: dict[str, str] = {**PAPER_TERMS, **THEORY_TERMS}


def terms_used(texts: Iterable[str], glossary: dict[str, str] | None = None) -> dict[str, str]:
    """The glossary entries whose term occurs in some of ``texts`` (in the glossary's order)."""
    table = GLOSSARY if glossary is None else glossary
    blob = "\n".join(texts)
    return {term: text for term, text in table.items() if _occurs(term, blob)}


def _occurs(term: str, blob: str) -> bool:
    parts = [p.strip() for p in term.split("/")] if " / " in term else [term]
    return any(p and p in blob for p in parts)
