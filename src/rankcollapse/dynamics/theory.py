"""Theorem 1 check: does the measured mu stay under ``C (1 - eps^r)^{t / (2r)}``? (SPEC §5)

For pure masked attention ``X(t+1) = A(t) X(t) W_V(t)`` on a mask graph with a center node and
radius ``r``, every attention weight on an edge is at least some ``eps > 0`` and
``mu(X(t)) <= C (1 - eps^r)^{t / (2r)}``. We take ``eps`` = the smallest attention weight on
a mask edge seen in the run (all layers, heads, samples), ``r`` from the mask analysis, and per
sample the smallest ``C`` that covers layer 0, ``C_b = mu_b(0)``. The bound is evaluated in
log space (``log1p(-exp(r log eps))``): when ``eps^r`` underflows the per-layer rate is exactly
1 and the bound is the constant ``C`` — the theorem then says nothing at that depth.
The theorem also assumes bounded products ``||W_V(0) ... W_V(t)||``; random Gaussian value
matrices do not guarantee that, so a violation is reported, not hidden.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

#: Relative slack for rounding when comparing mu with the bound.
BOUND_RTOL = 1e-9


@dataclass(frozen=True)
class TheoryCheck:
    """Outcome of the Theorem 1 comparison for one run.

    ``applicable`` False (with ``reason``) when the run is not pure attention or the mask has no
    center node; ``epsilon``/``radius``/``log_rate``/``c`` describe the bound
    ``C exp(log_rate * t)`` with ``log_rate = log1p(-eps^r) / (2r)``; ``holds`` is True when every
    sample's mu stays under its bound at every layer (``first_violation`` = first layer where not);
    ``max_ratio`` = max over layers and samples of ``mu / bound``.
    """

    applicable: bool
    reason: str = ""
    epsilon: float | None = None
    radius: int | None = None
    log_rate: float | None = None
    c: list[float] = field(default_factory=list)
    holds: bool | None = None
    first_violation: int | None = None
    max_ratio: float | None = None

    @property
    def rate(self) -> float | None:
        """Per-layer factor ``(1 - eps^r)^{1/(2r)}``."""
        return None if self.log_rate is None else math.exp(self.log_rate)

    def bound(self, t: Tensor | int, sample: int | None = None) -> Tensor:
        """Bound curve at layers t; ``sample`` None uses the largest C (for plots)."""
        if not self.applicable or self.log_rate is None:
            raise ValueError("no bound: " + (self.reason or "theory check not applicable"))
        c = max(self.c) if sample is None else self.c[sample]
        tt = torch.as_tensor(t, dtype=torch.float64)
        return c * torch.exp(self.log_rate * tt)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rate"] = self.rate
        return out


def log_rate(epsilon: float, radius: int) -> float:
    """``log((1 - eps^r)^{1/(2r)}) = log1p(-eps^r) / (2r)`` (0 when ``eps^r`` underflows)."""
    if radius <= 0:
        return -math.inf if epsilon >= 1.0 else math.log1p(-epsilon) / 2.0
    if epsilon >= 1.0:
        return -math.inf
    return math.log1p(-math.exp(radius * math.log(epsilon))) / (2 * radius)


def check_theorem1(mu: Tensor, epsilon: float, radius: int | None) -> TheoryCheck:
    """Compare ``mu: [T+1, b]`` (row t = X(t)) with ``C_b (1 - eps^r)^{t/(2r)}``, ``C_b = mu[0, b]``."""
    if radius is None:
        return TheoryCheck(False, "mask has no center node (Theorem 1 needs one)", epsilon=epsilon)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        return TheoryCheck(False, f"no positive attention weight measured (eps = {epsilon})", epsilon=epsilon,
                           radius=radius)
    lr = log_rate(epsilon, radius)
    mu64 = mu.detach().to(dtype=torch.float64, device="cpu")
    c = mu64[0]
    t = torch.arange(mu64.shape[0], dtype=torch.float64).unsqueeze(1)
    bound = c.unsqueeze(0) * torch.exp(lr * t) if math.isfinite(lr) else torch.where(t == 0, c, 0.0 * c)
    ok = mu64 <= bound * (1 + BOUND_RTOL)
    bad_layers = (~ok).any(dim=1).nonzero()
    ratio = torch.where(bound > 0, mu64 / bound, torch.where(mu64 > 0, math.inf, 0.0))
    return TheoryCheck(
        applicable=True,
        epsilon=epsilon,
        radius=radius,
        log_rate=lr,
        c=[float(v) for v in c],
        holds=bool(ok.all()),
        first_violation=int(bad_layers[0, 0]) if bad_layers.numel() else None,
        max_ratio=float(ratio.max()),
    )


def radius_of_dense(mask: Tensor) -> int | None:
    """Radius of the mask graph (edge j -> i iff mask[i, j]) by breadth-first search; None without a center.

    For user-given matrices; named masks use ``rankcollapse.masks.analyze_mask``. O(n^3 r).
    """
    n = mask.shape[0]
    adj = mask.to(torch.float32).T  # adj[u, v] = 1 iff edge u -> v
    reach = torch.eye(n, dtype=torch.bool, device=mask.device)
    ecc = torch.full((n,), -1, dtype=torch.long, device=mask.device)
    ecc[reach.all(dim=1)] = 0
    for hops in range(1, n):
        reach = reach | ((reach.to(torch.float32) @ adj) > 0)
        newly = reach.all(dim=1) & (ecc < 0)
        ecc[newly] = hops
        if bool(reach.all()):
            break
    centers = ecc >= 0
    return int(ecc[centers].min()) if bool(centers.any()) else None
