"""Bound checks for the paper's collapse theorems (§4.1-4.2): Theorem 1, Theorem 2, Corollary 1.

Every result bounds ``mu(X(t)) <= C rho^t`` with a per-layer rate ``rho`` set by the smallest
attention weight ``eps`` on a mask edge and the mask radius ``r`` (the paper's statements):

============================ ======================================= ==================================
result                       rate ``rho``                            conditions (besides A1-A2)
============================ ======================================= ==================================
Theorem 1 (no LayerNorm)     ``(1 - eps^r)^{1/r}``                   quasi-strongly connected, A3
Theorem 2 (LN, orthogonal)   ``(1 - N eps^{2r})^{1/(2r)}``           strongly connected, orthogonal
                                                                     ``W_V``, ``N <= d``, ``X(0)`` full rank
Corollary 1 (LN, orthogonal) ``(1 - eps^{2r})^{1/(2r)}``             quasi-strongly connected,
                                                                     orthogonal ``W_V``, ``phi(0) >= 0``
Corollary 1, n centers       ``(1 - n eps^{2r})^{1/(2r)}``           as Corollary 1; ``n`` center nodes
============================ ======================================= ==================================

One form covers them: ``rho = (1 - k eps^{p r})^{1/(p r)}``, with ``p`` the power (1 or 2) and ``k`` the
bound's multiplier ``eps_multiplier`` (1; N, the tokens; n, the center nodes), not the mask's number of
centers in general (Theorem 1's is 1 whatever the mask).

A run gives ``mu: [T+1, b]`` (row t = X(t)). We report ``eps`` (the smallest weight measured on an edge,
all layers and samples), ``r`` (from :func:`rankcollapse.masks.analyze_mask`), ``rho`` (computed in log
space, ``log1p(-n exp(p r log eps)) / (p r)``, so an ``eps^r`` that underflows gives ``rho = 1``), the
smallest constant ``C = max_{t, b} mu_b(t) / rho^t`` with which the bound holds at every layer, ``C/mu(0)``,
and the measured tail rate. With a finite run some ``C`` always exists, so the content of a check is:

- ``vacuous`` when ``rho^T > 1/2``: the bound falls by less than a factor 2 over the run, it says nothing;
- otherwise ``consistent`` when the measured tail rate is at most ``rho`` (or the run reached the
  precision floor), ``rate_exceeded`` when mu falls more slowly than the bound's rate (then ``C`` must
  grow with the depth: evidence against the bound, or an assumption such as A3 that fails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from rankcollapse.core.norms import sphere_normalize
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked

#: Relative slack when comparing a measured tail rate with ``rho``.
RATE_RTOL = 1e-6
#: Verdicts of a check.
VERDICTS = ("not_applicable", "vacuous", "consistent", "rate_exceeded")


@dataclass(frozen=True)
class TheoryCheck:
    """Outcome of one bound check for one run (the paper's result named in ``result``).

    ``epsilon``, ``radius``, ``rate`` (``rho``), ``log_rate`` describe the bound ``C rho^t``, with
    ``rho = (1 - eps_multiplier * eps^{power r})^{1/(power r)}`` (``eps_multiplier``: 1 for Theorem 1 and
    Corollary 1, N for Theorem 2, the number of center nodes for Corollary 1 (n centers)); ``c`` the
    smallest ``C`` covering every layer and sample, ``c_per_sample`` per sample, ``c_over_mu0`` the largest
    ``C_b / mu_b(0)``; ``tail_rate`` the measured per-layer factor of mu over the tail (largest over samples;
    None if no tail above the floor); ``bound_drop`` = ``rho^T``; ``verdict`` one of :data:`VERDICTS`.
    """

    applicable: bool
    reason: str = ""
    result: str = "Theorem 1"
    epsilon: float | None = None
    radius: int | None = None
    exponent: str = "t/r"
    eps_multiplier: int = 1
    log_rate: float | None = None
    c: float | None = None
    c_per_sample: list[float] = field(default_factory=list)
    c_over_mu0: float | None = None
    tail_rate: float | None = None
    layers: int = 0
    bound_drop: float | None = None
    vacuous: bool | None = None
    verdict: str = "not_applicable"
    source: str = "paper"

    @property
    def rate(self) -> float | None:
        """Per-layer factor ``rho`` of the bound."""
        return None if self.log_rate is None else math.exp(self.log_rate)

    @property
    def holds(self) -> bool | None:
        """True for ``consistent``, False for ``rate_exceeded``, None when vacuous or not applicable."""
        return {"consistent": True, "rate_exceeded": False}.get(self.verdict)

    def bound(self, t: Tensor | int, sample: int | None = None) -> Tensor:
        """``C rho^t`` at layers t (``sample`` None: the run's ``C``, else that sample's)."""
        if not self.applicable or self.log_rate is None or self.c is None:
            raise RankCollapseError("no bound: " + (self.reason or "theory check not applicable"))
        c = self.c if sample is None else self.c_per_sample[sample]
        tt = torch.as_tensor(t, dtype=torch.float64)
        return c * torch.exp(self.log_rate * tt)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields plus ``rate`` and ``holds``."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["rate"] = self.rate
        out["holds"] = self.holds
        return out


def log_rate(epsilon: float, radius: int, power: int = 1, eps_multiplier: int = 1) -> float:
    """``log rho = log1p(-eps_multiplier * eps^{power r}) / (power r)``; 0 when ``eps^{power r}`` underflows.

    ``power = 1``: Theorem 1; ``power = 2``: Theorem 2 (``eps_multiplier = N``) and Corollary 1 (1, or the
    number of center nodes). Radius 0 (one token) is treated as 1. ``-inf`` when
    ``eps_multiplier * eps^{power r} >= 1`` (one layer collapses).
    """
    k = int(eps_multiplier)
    r = max(int(radius), 1) * power
    if not (epsilon > 0):
        return 0.0
    x = math.log(k) + r * math.log(epsilon)
    if x >= 0.0:
        return -math.inf
    return math.log1p(-math.exp(x)) / r


def _radius_and_reason(radius: Any) -> tuple[int | None, str]:
    """Accept an int, None, or a :class:`rankcollapse.masks.MaskAnalysis` (radius, self-loops)."""
    if radius is None or isinstance(radius, int):
        return radius, "" if radius is not None else "mask has no center node (not quasi-strongly connected)"
    r = getattr(radius, "radius", None)
    if not getattr(radius, "self_loops", True):
        return None, "mask lacks self-loops (A1 fails)"
    if r is None:
        return None, "mask has no center node (not quasi-strongly connected)"
    return int(r), ""


def tail_rate(mu: Tensor, mu_rel: Tensor | None = None, floor_rel: float | None = None) -> float | None:
    """Measured per-layer factor of mu over the second half of the layers above the floor (max over samples).

    mu, mu_rel: [T+1, b]. Layers with ``mu_rel <= floor_rel`` (collapsed to working precision) and
    non-finite or zero mu are left out; a sample needs at least 2 such layers in its tail. None if none does.
    """
    mu64 = mu.detach().to(dtype=torch.float64, device="cpu")
    ok = torch.isfinite(mu64) & (mu64 > 0)
    if mu_rel is not None and floor_rel is not None:
        ok &= mu_rel.detach().to(dtype=torch.float64, device="cpu") > floor_rel
    rates: list[float] = []
    for b in range(mu64.shape[1]):
        layers = torch.nonzero(ok[:, b]).flatten()
        if layers.numel() < 2:
            continue
        last = int(layers.max())
        usable = layers[(layers >= last // 2)]
        if usable.numel() < 2:
            continue
        t0, t1 = int(usable[0]), int(usable[-1])
        if t1 == t0:
            continue
        rates.append(math.exp((math.log(float(mu64[t1, b])) - math.log(float(mu64[t0, b]))) / (t1 - t0)))
    return max(rates) if rates else None


def fit_bound(
    mu: Tensor,
    epsilon: float,
    radius: Any,
    *,
    result: str = "Theorem 1",
    power: int = 1,
    eps_multiplier: int = 1,
    mu_rel: Tensor | None = None,
    floor_rel: float | None = None,
    failed: str = "",
) -> TheoryCheck:
    """Compare ``mu: [T+1, b]`` with ``C rho^t`` for one result (module docstring); ``failed`` names a
    condition that does not hold (then the check is not applicable and says so)."""
    k = int(eps_multiplier)
    r, why = _radius_and_reason(radius)
    exponent = "t/r" if power == 1 else f"t/({power}r)"
    base = {"result": result, "exponent": exponent, "eps_multiplier": k, "epsilon": epsilon, "radius": r}
    if failed or why:
        return TheoryCheck(False, f"{failed or why}: {result} does not apply", **base)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        return TheoryCheck(False, f"no positive attention weight measured (eps = {epsilon})", **base)
    lr = log_rate(epsilon, r, power, k)
    mu64 = mu.detach().to(dtype=torch.float64, device="cpu")
    layers = mu64.shape[0] - 1
    t = torch.arange(mu64.shape[0], dtype=torch.float64).unsqueeze(1)
    if math.isfinite(lr):
        logs = torch.where(mu64 > 0, torch.log(mu64), torch.full_like(mu64, -math.inf)) - lr * t
        c_b = torch.exp(logs.amax(dim=0))
    else:  # one layer collapses exactly: the bound is C at t = 0 and 0 after
        c_b = mu64[0]
    mu0 = mu64[0]
    ratio = torch.where(mu0 > 0, c_b / mu0, torch.full_like(mu0, math.nan))
    drop = math.exp(lr * layers) if math.isfinite(lr) else 0.0
    tail = tail_rate(mu64, mu_rel, floor_rel)
    vacuous = drop > 0.5
    if vacuous:
        verdict = "vacuous"
    elif tail is None or tail <= math.exp(lr) * (1 + RATE_RTOL):
        verdict = "consistent"
    else:
        verdict = "rate_exceeded"
    reason = {
        "vacuous": f"rho^T = {drop:.3g} > 1/2: the bound falls < 2x in {layers} layers (says nothing)",
        "consistent": "measured tail rate <= rho" if tail is not None else "mu reached the precision floor",
        "rate_exceeded": f"measured tail rate {tail} > rho = {math.exp(lr)}",
    }[verdict]
    return TheoryCheck(
        applicable=True, reason=reason, log_rate=lr, c=float(c_b.max()), c_per_sample=[float(v) for v in c_b],
        c_over_mu0=float(ratio.max()) if bool(torch.isfinite(ratio).any()) else None,
        tail_rate=tail, layers=layers, bound_drop=drop, vacuous=vacuous, verdict=verdict, **base,
    )


@checked(ndim={"mu": 2})
def check_theorem1(
    mu: Tensor, epsilon: float, radius: Any, *, mu_rel: Tensor | None = None, floor_rel: float | None = None
) -> TheoryCheck:
    """Theorem 1: ``mu(X(t)) <= C (1 - eps^r)^{t/r}`` (pure attention, quasi-strongly connected mask).

    ``radius``: an int, None (no center) or a ``MaskAnalysis``. ``mu_rel`` and ``floor_rel`` let the
    tail rate ignore layers at the precision floor.
    """
    return fit_bound(mu, epsilon, radius, result="Theorem 1", mu_rel=mu_rel, floor_rel=floor_rel)


def ln_conditions(analysis: Any, x0: Tensor, w_v_orthogonal: bool) -> dict[str, str]:
    """The first failing condition ("" if none) of Theorem 2 and Corollary 1 for a mask and inputs.

    analysis: a ``MaskAnalysis``; x0: [b, n, d] (or [n, d]) inputs. Theorem 2: self-loops, strongly
    connected, orthogonal W_V, (*) ``N <= d`` and full-rank ``X(0)`` (every sample). Corollary 1:
    self-loops, quasi-strongly connected, orthogonal W_V, ``phi(0) = min <x_i, x_j> >= 0`` (every sample).
    """
    from rankcollapse.metrics import num_rank

    spec = getattr(analysis, "spec", None) or "the mask"
    x = x0 if x0.ndim == 3 else x0.unsqueeze(0)
    n, d = x.shape[-2], x.shape[-1]
    common = ""
    if not analysis.self_loops:
        common = f"{spec} lacks self-loops (A1)"
    elif not w_v_orthogonal:
        common = "W_V is not orthogonal"
    unit = sphere_normalize(x)
    phi = float((unit @ unit.transpose(-1, -2)).amin())
    thm2 = common
    if not thm2 and not analysis.strongly_connected:
        thm2 = f"{spec} is not strongly connected"
    if not thm2 and n > d:
        thm2 = f"(*) needs N <= d, got N = {n} > d = {d}"
    if not thm2 and bool((num_rank(x) < n).any()):
        thm2 = "(*) needs a full-rank X(0)"
    cor1 = common
    if not cor1 and not analysis.quasi_strongly_connected:
        cor1 = f"{spec} is not quasi-strongly connected"
    if not cor1 and phi < 0:
        cor1 = f"phi(0) = {phi:.3g} < 0"
    return {"Theorem 2": thm2, "Corollary 1": cor1}


def check_ln_results(
    mu: Tensor, epsilon: float, analysis: Any, x0: Tensor, w_v_orthogonal: bool, *,
    mu_rel: Tensor | None = None, floor_rel: float | None = None,
) -> list[TheoryCheck]:
    """Theorem 2, Corollary 1 and its n-center refinement for one LayerNorm run (module docstring).

    A check whose condition fails is not applicable and names the condition, e.g. "causal is not strongly
    connected: Theorem 2 does not apply"; its ``reason`` then also says which result does apply.
    """
    failed = ln_conditions(analysis, x0, w_v_orthogonal)
    n = x0.shape[-2]
    centers = len(analysis.center_nodes) if analysis.quasi_strongly_connected else 1
    kw = {"mu_rel": mu_rel, "floor_rel": floor_rel, "power": 2}
    out = [
        fit_bound(mu, epsilon, analysis, result="Theorem 2", eps_multiplier=n, failed=failed["Theorem 2"],
                  **kw),
        fit_bound(mu, epsilon, analysis, result="Corollary 1", failed=failed["Corollary 1"], **kw),
        fit_bound(mu, epsilon, analysis, result="Corollary 1 (n centers)", eps_multiplier=centers,
                  failed=failed["Corollary 1"], **kw),
    ]
    if failed["Theorem 2"] and not failed["Corollary 1"]:
        out[0] = replace(out[0], reason=out[0].reason + ", Corollary 1 does")
    return out


