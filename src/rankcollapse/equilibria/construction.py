"""Value matrices with stable equilibria of a prescribed rank (SPEC §5, "equilibria of every rank").

See docs/equilibria.md for the construction and why it works. All matrices use the row convention
``x -> x W_V``; attention logits ``x W_QK y^T / sqrt(d_qk)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from rankcollapse.equilibria.finder import newton_polish, residual
from rankcollapse.equilibria.lnmap import iterate, resolve_mask
from rankcollapse.errors import RankCollapseError

OFF_BLOCK_GAIN = 0.5
COUNTEREXAMPLE_BLOCK = ((0.95, 1.0), (0.0, 1.0))


@dataclass
class Construction:
    """A value matrix (and mask, W_QK, d_qk) with a target equilibrium ``x`` [n, d] of rank ``k``."""

    n: int
    d: int
    k: int
    w_v: Tensor
    mask: str
    x: Tensor
    w_qk: Tensor | None = None
    d_qk: float = 1.0
    notes: str = ""
    basin_radius: float = 0.02
    extra: dict = field(default_factory=dict)

    def mask_tensor(self) -> Tensor | None:
        return resolve_mask(self.mask, self.n)

    def neighbourhood_inputs(self, samples: int, radius: float, generator: torch.Generator) -> Tensor:
        """Inputs [samples, n, d]: ``x`` plus Gaussian noise of scale ``radius`` per token, renormalised
        (an open set of inputs: positive measure)."""
        noise = torch.randn(samples, self.n, self.d, generator=generator, dtype=torch.float64) * radius
        y = self.x.unsqueeze(0) + noise
        return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def _check(n: int, d: int, k: int) -> None:
    if n < 1 or d < 1:
        raise RankCollapseError(f"n and d must be >= 1, got n={n}, d={d}")
    if not 1 <= k <= min(n, d):
        raise RankCollapseError(f"rank k must be in 1..min(n, d) = 1..{min(n, d)}, got {k}")


def _settle(x0: Tensor, w_v: Tensor, mask: Tensor | None, w_qk: Tensor | None, d_qk: float,
            steps: int = 3000) -> Tensor:
    x = iterate(x0, w_v, steps, mask, w_qk, d_qk)
    x = newton_polish(x, w_v, mask, w_qk, d_qk)
    if residual(x, w_v, mask, w_qk, d_qk) > 1e-10:
        raise RuntimeError("construction did not settle; this is a bug")
    return x


def _embed_block(d: int, block: Tensor) -> Tensor:
    """``blockdiag(OFF_BLOCK_GAIN * I_{d-b}, block)``: the block acts on the last b coordinates."""
    b = block.shape[0]
    w = torch.zeros(d, d, dtype=torch.float64)
    w[: d - b, : d - b] = OFF_BLOCK_GAIN * torch.eye(d - b, dtype=torch.float64)
    w[d - b:, d - b:] = block
    return w


# Cores for k >= 3 (row convention, u = e_0, lower-triangular so that span(e_0..e_{m-1}) is invariant),
# found by the sequential search ``search_core_extension`` with repulsive attention W_QK = -I, d_qk = 1.
# ``points``: the core tokens (approximate; settled and Newton-polished at construction time).
REPULSIVE_CORES: dict[int, dict[str, list[list[float]]]] = {
    3: {
        "w_v": [[1.0, 0.0, 0.0],
                [2.060421026923321, 0.9250453420171199, 0.0],
                [-1.5915202150048988, -1.8163247998460386, 0.7429138741206136]],
        "points": [[1.0, 0.0, 0.0],
                   [0.36116224643888306, -0.9325029928891487, 0.0],
                   [0.3297900878665543, -0.3035528615397699, -0.8939206666119694]],
    },
    4: {
        "w_v": [[1.0, 0.0, 0.0, 0.0],
                [2.060421026923321, 0.9250453420171199, 0.0, 0.0],
                [-1.5915202150048988, -1.8163247998460386, 0.7429138741206136, 0.0],
                [1.311824533216742, 1.5768713774914322, -1.5636654814049573, 0.4796379822289037]],
        "points": [[1.0, 0.0, 0.0, 0.0],
                [0.36116224643888306, -0.9325029928891487, 0.0, 0.0],
                [0.3297900878665543, -0.3035528615397699, -0.8939206666119694, 0.0],
                [0.3804910348327761, -0.49315891583231913, -0.26943796517800467, -0.7344549265051676]],
    },
}
# Radius of the input ball (per-token Gaussian noise, renormalised) used to show a positive-measure basin.
BASIN_RADIUS = {1: 0.02, 2: 0.02, 3: 0.003, 4: 0.0001}


def constructed_ranks(n: int | None = None) -> list[int]:
    """The ranks ``construct_rank_k`` can build for ``n`` tokens (any d >= k; rank 4 only for n = 4)."""
    return [1, 2, *(k for k in sorted(REPULSIVE_CORES) if k <= 3 or n is None or n == k)]


def _construct_core(n: int, d: int, k: int) -> Construction:
    """Rank k >= 3 from a repulsive-attention core, padded to (n, d) (see docs/equilibria.md)."""
    from rankcollapse.equilibria.finder import spectral_radius

    core = REPULSIVE_CORES[k]
    w_core = torch.tensor(core["w_v"], dtype=torch.float64)
    pts = torch.tensor(core["points"], dtype=torch.float64)
    gain = 0.3 * float(torch.diagonal(w_core).min())
    w_v = torch.zeros(d, d, dtype=torch.float64)
    w_v[:k, :k] = w_core
    w_v[k:, k:] = gain * torch.eye(d - k, dtype=torch.float64)
    w_qk = -torch.eye(d, dtype=torch.float64)
    mask_spec = "causal"
    mask = resolve_mask(mask_spec, n)
    best = None
    gen = torch.Generator().manual_seed(0)
    inits = [pts[j].expand(n - k, k) for j in range(k - 1, -1, -1)]  # later tokens start on a core token
    inits += [torch.randn(n - k, k, generator=gen, dtype=torch.float64) for _ in range(32)]  # or at random
    for init in inits:
        x0 = torch.zeros(n, d, dtype=torch.float64)
        x0[:k, :k] = pts
        x0[k:, :k] = init
        x0 = x0 / torch.linalg.vector_norm(x0, dim=-1, keepdim=True)
        try:
            x = _settle(x0, w_v, mask, w_qk, 1.0)
        except RuntimeError:
            continue
        if spectral_radius(x, w_v, mask, w_qk, 1.0) < 1.0:
            best = x
            break
        if n == k:
            break
    if best is None:
        raise RankCollapseError(f"rank-{k} construction: later tokens found no stable resting place for "
                                f"n={n}, d={d}")
    return Construction(n, d, k, w_v, mask_spec, best, w_qk=w_qk, d_qk=1.0, basin_radius=BASIN_RADIUS[k],
                        notes=f"repulsive attention W_QK = -I; {k}x{k} core (u = e_0), gain {gain:.3g} "
                              "elsewhere")


def construct_rank_k(n: int, d: int, k: int) -> Construction:
    """Value matrix, mask (causal) and target stable equilibrium of rank ``k``.

    k = 1: ``W_V = diag(1/2, ..., 1/2, 1)``; every token at ``u = e_{d-1}``; ``W_QK = I``.
    k = 2: ``W_V = blockdiag(1/2 I_{d-2}, [[0.95, 1], [0, 1]])``: the counterexample in the last two
    coordinates; token 0 at ``u``, token 1 at ``B ≈ (-0.086, -0.996)``, later tokens where they settle
    from ``B``; ``W_QK = I``.
    k >= 3: a lower-triangular ``k x k`` core from ``REPULSIVE_CORES`` on the first k coordinates, a small
    gain on the others, ``W_QK = -I`` (repulsive attention); see docs/equilibria.md.
    """
    _check(n, d, k)
    if k >= 3:
        if k not in REPULSIVE_CORES:
            have = ", ".join(str(c) for c in sorted(REPULSIVE_CORES))
            raise RankCollapseError(f"no construction for rank k={k} (implemented: k = 1, 2"
                                    f"{', ' + have if have else ''}; see docs/equilibria.md)")
        if k >= 4 and n > k:
            raise RankCollapseError(f"the rank-{k} construction exists for n = {k} tokens only (later tokens "
                                    f"found no stable resting place); got n={n}; see docs/equilibria.md")
        return _construct_core(n, d, k)
    mask_spec = "causal"
    mask = resolve_mask(mask_spec, n)
    if k == 1:
        w_v = _embed_block(d, torch.ones(1, 1, dtype=torch.float64))
        x = torch.zeros(n, d, dtype=torch.float64)
        x[:, d - 1] = 1.0
        return Construction(n, d, 1, w_v, mask_spec, x, notes="every token at the dominant eigenvector u")
    w_v = _embed_block(d, torch.tensor(COUNTEREXAMPLE_BLOCK, dtype=torch.float64))
    x0 = torch.zeros(n, d, dtype=torch.float64)
    x0[0, d - 1] = 1.0
    x0[1:, d - 2] = -0.086
    x0[1:, d - 1] = -0.996
    x0 = x0 / torch.linalg.vector_norm(x0, dim=-1, keepdim=True)
    x = _settle(x0, w_v, mask, None, 1.0)
    return Construction(n, d, 2, w_v, mask_spec, x,
                        notes="token 0 at u, token 1 at the counterexample's B, later tokens settled from B")


@dataclass
class CoreExtension:
    """One step of the core search: the (m+1)x(m+1) core, its m+1 settled tokens, the share of random
    starts of the new token that reached an off-subspace point, and the full-system spectral radius."""

    w_v: Tensor
    points: Tensor
    new_token_fraction: float
    spectral_radius: float


def _single_token_map(x: Tensor, preds: Tensor, w_v: Tensor, beta: float) -> Tensor:
    """The new (last) token's layer given fixed predecessors: x [b, D], preds [m, D] -> [b, D]."""
    logits = beta * torch.cat([x @ preds.T, (x * x).sum(-1, keepdim=True)], dim=-1)
    a = torch.softmax(logits, dim=-1)
    y = (a[:, :-1] @ preds + a[:, -1:] * x) @ w_v
    return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def search_core_extension(w_v: Tensor, points: Tensor, generator: torch.Generator, beta: float = -1.0,
                          candidates: int = 300, starts: int = 48, steps: int = 500,
                          max_radius: float = 0.98) -> CoreExtension | None:
    """Extend an m x m core (lower-triangular, ``u = e_0``, tokens ``points`` [m, m]) by one token and one
    feature: random candidates for the new row ``(s_0 .. s_{m-1}, a_new)`` of ``W_V`` with
    ``0 < a_new < min(diag(W_V)[1:])`` (so the new direction never dominates an earlier token's transverse
    dynamics) and shears of random scale up to 8; the new token (attention ``W_QK = beta I``) is iterated
    from ``starts`` random points given the fixed predecessors; a candidate counts when some start
    settles off ``span(e_0..e_{m-1})`` and the whole (m+1)-token system is stable there (tangent spectral
    radius < ``max_radius``). Returns the candidate with the largest settling share, or None."""
    from rankcollapse.equilibria.finder import spectral_radius

    m = w_v.shape[0]
    dim = m + 1
    a_max = float(torch.diagonal(w_v)[1:].min()) if m > 1 else 0.999
    preds = torch.cat([points, torch.zeros(m, 1, dtype=torch.float64)], dim=1)
    best: CoreExtension | None = None
    for _ in range(candidates):
        a_new = float(torch.rand((), generator=generator, dtype=torch.float64)) * a_max
        scale = float(torch.rand((), generator=generator, dtype=torch.float64)) * 8.0
        shear = (torch.rand(m, generator=generator, dtype=torch.float64) * 2 - 1) * scale
        w_new = torch.zeros(dim, dim, dtype=torch.float64)
        w_new[:m, :m] = w_v
        w_new[m, :m] = shear
        w_new[m, m] = a_new
        x = torch.randn(starts, dim, generator=generator, dtype=torch.float64)
        x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        for _ in range(steps):
            x = _single_token_map(x, preds, w_new, beta)
        settled = torch.linalg.vector_norm(_single_token_map(x, preds, w_new, beta) - x, dim=-1) < 1e-9
        ok = settled & (x[:, m].abs() > 0.05)
        if not bool(ok.any()):
            continue
        pts = torch.cat([preds, x[int(torch.nonzero(ok)[0])].unsqueeze(0)], dim=0)
        w_qk = beta * torch.eye(dim, dtype=torch.float64)
        rho = spectral_radius(pts, w_new, resolve_mask("causal", dim), w_qk)
        frac = float(ok.double().mean())
        if rho < max_radius and (best is None or frac > best.new_token_fraction):
            best = CoreExtension(w_new, pts, frac, rho)
    return best
