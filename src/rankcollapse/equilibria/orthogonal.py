"""Theorem 2 and Corollary 1 (the paper's §4.2): sphere LayerNorm with orthogonal ``W_V`` collapses.

One run: a Haar-orthogonal ``W_V`` (:func:`rankcollapse.core.draws.haar_orthogonal`), a fixed Gaussian
``W_QK`` (std ``qk_scale / sqrt(d)``, A2), the theory's scaling-only LN in post-LN (``X' = D A X W_V``)
or pre-LN (``X' = A D X W_V``) form (:func:`rankcollapse.equilibria.lnmap.ln_attention_map`), and inputs
that meet the results' conditions: ``sphere`` (uniform on ``S^{d-1}``; with ``N <= d`` condition (*) holds
almost surely) or ``nonnegative`` (positive orthant, ``phi(0) >= 0``). Per layer: ``mu``, ``mu_rel``
(:mod:`rankcollapse.metrics`) and the smallest attention weight on a mask edge; the bound checks of
:func:`rankcollapse.dynamics.theory.check_ln_results` (each applicable only when its conditions hold).

:func:`causal_advantage` compares the measured tail rates under ``causal`` and ``complete`` for the same
weights and inputs: "the advantage of the causal mask" is that causal collapses more slowly, as the
``n``-center refinement of Corollary 1 ranks them (``1 - eps^{2r}`` vs ``1 - N eps^{2r}``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.draws import (
    gaussian,
    haar_orthogonal,
    hemisphere_tokens,
    nonnegative_cosine_tokens,
    sphere_tokens,
)
from rankcollapse.core.norms import sphere_normalize
from rankcollapse.core.precision import floor_rel
from rankcollapse.dynamics.theory import TheoryCheck, check_ln_results, tail_rate
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.equilibria.lnmap import PLACEMENTS, attention_matrix, iterate, ln_attention_map
from rankcollapse.metrics import mu, mu_rel

INPUTS = ("sphere", "nonnegative")


@dataclass
class LNCollapseRun:
    """One Theorem 2 / Corollary 1 run: ``mu``, ``mu_rel`` [T+1, b], ``epsilon``, the three checks."""

    mask: str
    placement: str
    inputs: str
    n: int
    d: int
    mu: Tensor
    mu_rel: Tensor
    epsilon: float
    checks: list[TheoryCheck]
    tail_rate: float | None
    source: str = "paper (Theorem 2, Corollary 1)"
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self, result: str) -> TheoryCheck:
        """The check of one result (``"Theorem 2"``, ``"Corollary 1"``, ``"Corollary 1 (n centers)"``)."""
        return next(c for c in self.checks if c.result == result)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mask": self.mask,
            "placement": self.placement,
            "inputs": self.inputs,
            "n": self.n,
            "d": self.d,
            "epsilon": self.epsilon,
            "tail_rate": self.tail_rate,
            "final_mu_rel": float(self.mu_rel[-1].max()),
            "checks": [c.to_dict() for c in self.checks],
            "source": self.source,
            **self.extra,
        }


def _inputs(kind: str, samples: int, n: int, d: int, g: torch.Generator) -> Tensor:
    if kind == "sphere":
        return sphere_tokens(samples, n, d, g)
    if kind == "nonnegative":
        return nonnegative_cosine_tokens(samples, n, d, g)
    raise RankCollapseError(f"inputs must be one of {', '.join(INPUTS)}, got {quote(str(kind), 40)}")


def ln_collapse_run(
    mask: str,
    n: int,
    d: int,
    *,
    placement: str = "post",
    inputs: str = "sphere",
    samples: int = 8,
    layers: int = 200,
    seed: int = 0,
    qk_scale: float = 1.0,
    d_qk: float = 1.0,
) -> LNCollapseRun:
    """Iterate the LN map with orthogonal ``W_V`` from ``inputs``; measure and check (module docstring).

    The same ``seed`` gives the same ``W_V``, ``W_QK`` and inputs for every mask (so masks compare on equal
    terms). mask: a spec; placement ``post``/``pre``; inputs ``sphere``/``nonnegative``.
    """
    from rankcollapse.masks import analyze_mask, parse_mask

    if placement not in PLACEMENTS:
        raise RankCollapseError(
            f"placement must be one of {', '.join(PLACEMENTS)}, got {quote(str(placement), 40)}"
        )
    if n < 2 or d < 1 or samples < 1 or layers < 1:
        raise RankCollapseError(f"need n >= 2, d, samples, layers >= 1; got {n}, {d}, {samples}, {layers}")
    parsed = parse_mask(mask)
    analysis = analyze_mask(parsed, n)
    dense = parsed.dense(n).to(torch.bool)
    m = None if bool(dense.all()) else dense
    g = torch.Generator().manual_seed(seed)
    w_v = haar_orthogonal(d, g)
    w_qk = gaussian((d, d), g, std=qk_scale / math.sqrt(d))
    x = _inputs(inputs, samples, n, d, g)
    x0 = x
    mus, rels, eps = [mu(x)], [mu_rel(x)], math.inf
    for _ in range(layers):
        z = x if placement == "post" else sphere_normalize(x)
        a = attention_matrix(z, m, w_qk, d_qk)
        eps = min(eps, float(a.masked_select(dense.expand_as(a)).min()))
        x = ln_attention_map(x, w_v, m, w_qk, d_qk, placement)
        mus.append(mu(x))
        rels.append(mu_rel(x))
    mu_t, rel_t = torch.stack(mus), torch.stack(rels)
    fl = floor_rel(torch.float64)
    checks = check_ln_results(mu_t, eps, analysis, x0, True, mu_rel=rel_t, floor_rel=fl)
    return LNCollapseRun(
        parsed.spec,
        placement,
        inputs,
        n,
        d,
        mu_t,
        rel_t,
        eps,
        checks,
        tail_rate(mu_t, rel_t, fl),
        extra={"seed": seed, "layers": layers, "samples": samples, "centers": len(analysis.center_nodes)},
    )


def causal_advantage(
    n: int,
    d: int,
    *,
    placement: str = "post",
    inputs: str = "nonnegative",
    samples: int = 8,
    layers: int = 200,
    seed: int = 0,
    qk_scale: float = 1.0,
) -> dict[str, Any]:
    """Measured tail rates under ``complete`` and ``causal`` (same weights and inputs), bounds' ranking.

    ``advantage``: True when causal's measured rate is slower (closer to 1) than complete's.
    """
    runs = {
        m: ln_collapse_run(
            m,
            n,
            d,
            placement=placement,
            inputs=inputs,
            samples=samples,
            layers=layers,
            seed=seed,
            qk_scale=qk_scale,
        )
        for m in ("complete", "causal")
    }
    rates = {m: r.tail_rate for m, r in runs.items()}
    bound = {m: r.check("Corollary 1 (n centers)").rate for m, r in runs.items()}
    advantage = None if None in rates.values() else bool(rates["causal"] > rates["complete"])
    return {
        "placement": placement,
        "inputs": inputs,
        "n": n,
        "d": d,
        "measured_rate": rates,
        "bound_rate": bound,
        "epsilon": {m: r.epsilon for m, r in runs.items()},
        "advantage": advantage,
        "bound_ranks_causal_slower": None
        if None in bound.values()
        else bool(bound["causal"] >= bound["complete"]),
        "source": "paper (Corollary 1, n-center refinement)",
        "runs": runs,
    }


# ---- the earlier check (ours): hemisphere inputs, kept for the existing callers ----------------------------


@dataclass
class OrthogonalCollapse:
    """``mu_rel`` at the input and after ``steps`` layers, per sample (ours: hemisphere inputs, no bound)."""

    mu_rel_start: Tensor
    mu_rel_end: Tensor
    steps: int


def orthogonal_collapse(
    n: int,
    d: int,
    mask: Tensor | None,
    samples: int = 16,
    steps: int = 300,
    *,
    generator: torch.Generator,
    d_qk: float = 1.0,
) -> OrthogonalCollapse:
    """Run the LN map with a Haar ``W_V`` from one random open hemisphere (margin 0.1); ``mu_rel``.
    ``generator``: required (it draws ``W_V`` and the inputs)."""
    w_v = haar_orthogonal(d, generator)
    x0 = hemisphere_tokens(samples, n, d, generator, direction="random", margin=0.1)
    x = iterate(x0, w_v, steps, mask, None, d_qk)
    return OrthogonalCollapse(mu_rel(x0), mu_rel(x), steps)
