"""Collapse measures as pure functions of token matrices ``x: [..., n, d]`` (the paper's eq. (4)).

Every function maps ``x: [..., n, d]`` (one token per row) to a tensor of shape ``[...]`` in
x's dtype (counts and flags in float too, so that they average into shares).

Definitions (``1`` the all-ones column, ``gamma_x = 1^T x / n`` the mean token, ``s_k`` the
singular values of ``x`` in decreasing order, ``u_i = x_i / ||x_i||``):

================== =====================================================================
``mu``             ``||x - 1 gamma_x||_F``                                   (the paper's eq. (4))
``mu_rel``    ``mu(x) / ||x||_F`` (0 for the zero matrix)
``at_floor``  ``mu(x) <= FLOOR_FACTOR * eps(dtype) * ||x||_F`` (1.0 / 0.0)
``num_rank`` ``#{k : s_k > max(n, d) * eps(dtype) * s_1}`` (torch.linalg.matrix_rank's
                   default tolerance)
``singular_values`` ``s_1 >= ... >= s_min(n, d)`` (shape ``[..., min(n, d)]``; LAPACK's SVD)
``gram_singular_values`` the same from the eigenvalues of the Gram matrix formed in float64, with a
                   stated error bound (the spectrum :func:`collapse_metrics` reads for data coarser
                   than float64)
``stable_rank``    ``||x||_F^2 / ||x||_2^2 = sum s_k^2 / s_1^2``
``effective_rank`` Roy & Vetterli (2007): ``exp(-sum p_k log p_k)``, ``p_k = s_k / sum s``
``mean_abs_cos``   ``1/(n(n-1)) sum_{i != j} |<u_i, u_j>|``   (anisotropy, the paper's Fig. 4)
``mean_signed_cos`` ``1/(n(n-1)) sum_{i != j} <u_i, u_j>``
``dong_residual``  Dong, Cordonnier & Loukas (ICML 2021, "Attention is not all you need"):
                   ``||x - 1 gamma_x^T||_{1,inf}`` with the composite norm
                   ``||R||_{1,inf} = sqrt(||R||_1 ||R||_inf)``, see :func:`dong_residual`
================== =====================================================================
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rankcollapse.core.precision import FLOOR_FACTOR
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import checked

#: Cosine of a pair that contains a zero token (its direction is undefined) is taken as 0.
#: Most entries of one Gram tile of :func:`mean_abs_cos` (1M: 4 MB in float32; the side is at most 1024).
_COSINE_TILE = 1 << 20
#: Multiply-adds one tile of :func:`mean_abs_cos` aims at (``side^2 d``): enough to hide the loop's
#: per-tile cost (tens of microseconds) when d is small, while d = 576 gets 256-row tiles (256 KB in
#: float32, a core's share of L2) and a triangle of tiles close to the half the symmetry allows.
_COSINE_WORK = 1 << 25
#: Rows of x converted to float64 at a time while :func:`gram_singular_values` forms the Gram matrix.
_GRAM_ROWS = 1024
#: From a Gram side of twice this, only its lower block triangle is formed (3 of 4 half-size products).
_GRAM_HALF_MIN = 128


def _check(x: Tensor) -> None:
    if not isinstance(x, Tensor):
        from rankcollapse.edge.errors import RankCollapseTypeError

        raise RankCollapseTypeError(f"x must be a torch.Tensor of tokens [..., n, d], got {type(x).__name__}")
    if x.ndim < 2:
        raise RankCollapseError(f"expected tokens x of shape [..., n, d], got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise RankCollapseError(f"expected a floating-point tensor, got {x.dtype}")


#: Dtypes whose arithmetic is too coarse (or unsupported, e.g. the SVD) for the measures: their values
#: are measured in float32, while every precision floor and rank tolerance keeps their own eps.
LOW_PRECISION = (torch.float16, torch.bfloat16)


def working(x: Tensor) -> Tensor:
    """``x`` in the dtype its measures are computed in: float32 for float16 / bfloat16 (a model loaded
    in bf16 is measured, not refused), else itself. Floors and tolerances use ``x``'s own dtype."""
    return x.float() if x.dtype in LOW_PRECISION else x


@checked
def centered(x: Tensor) -> Tensor:
    """``x - 1 gamma_x``: every token minus the mean token. [..., n, d] -> [..., n, d]."""
    _check(x)
    return x - x.mean(dim=-2, keepdim=True)


def _reduced(x: Tensor) -> tuple[Tensor, Tensor]:
    """``(mu(x), ||x||_F)`` [...], their sums in float64 where the device has it (x's dtype else).

    Float32 sums over ``n d`` squares (and a float32 mean token) put float32 runs' ``mu_rel`` 1e-5 to
    6e-4 relative away from float64 arithmetic on the same states at 4,096 tokens (the larger with
    massive activations: tests/metrics/test_float64_reductions.py). Here the mean token ``g`` is summed
    in float64, the centred tokens ``x_i - g32`` formed in x's dtype (each exact to x's rounding),
    each token's squared norm summed in x's dtype (``d`` terms) and the tokens' in float64, and the
    rounding ``delta = g32 - g`` of the mean taken out exactly: ``mu^2 = sum_i |x_i - g32|^2 - n |delta|^2``.
    Agrees with float64 arithmetic to ~2e-7 relative, at about 3x the float32 reduction's time (a
    float64 copy of x: 5x).
    """
    if x.dtype == torch.float64 or x.device.type not in ("cpu", "cuda"):
        c = centered(x)
        return torch.linalg.vector_norm(c, dim=(-2, -1)), torch.linalg.vector_norm(x, dim=(-2, -1))
    n = x.shape[-2]
    g = x.mean(dim=-2, keepdim=True, dtype=torch.float64)  # [..., 1, d]
    g_own = g.to(x.dtype)
    c = x - g_own
    rows = torch.linalg.vector_norm(c, dim=-1).to(torch.float64)  # [..., n]
    delta = (g_own.to(torch.float64) - g).squeeze(-2)  # [..., d]
    m2 = (rows * rows).sum(dim=-1) - n * (delta * delta).sum(dim=-1)
    norms = torch.linalg.vector_norm(x, dim=-1).to(torch.float64)
    return m2.clamp(min=0.0).sqrt(), (norms * norms).sum(dim=-1).sqrt()


@checked
def mu(x: Tensor) -> Tensor:
    """Rank-collapse measure ``mu(x) = ||x - 1 gamma_x||_F``, ``gamma_x = 1^T x / n``.

    x: [..., n, d] -> [...] in x's dtype, its sums in float64 (:func:`_reduced`). Zero iff all tokens
    are equal (the paper's eq. (4)).
    """
    _check(x)
    return _reduced(x)[0].to(x.dtype)


@checked
def mu_rel(x: Tensor) -> Tensor:
    """Relative measure ``mu(x) / ||x||_F`` in [0, 1]. [..., n, d] -> [...] in x's dtype, its sums in
    float64 (:func:`_reduced`).

    The zero matrix gives NaN: 0/0 is *undefined* (all tokens vanished), never "collapsed".
    """
    _check(x)
    m, norm = _reduced(x)
    return _ratio(m, norm).to(x.dtype)


DOC_COLUMNS = 16
"""Per-document columns written (``mu_rel_doc0`` ...); ``mu_rel_docs_max`` covers every document."""


def _check_docs(docs: object, n: int) -> list[Tensor]:
    """``docs`` as a list of int64 index tensors into ``n`` tokens (RankCollapseError naming ``docs``)."""

    if not isinstance(docs, list | tuple) or not docs:
        raise RankCollapseError(
            f"docs must be a non-empty list of token index tensors, got {type(docs).__name__}")
    for d in docs:
        if not isinstance(d, Tensor) or d.ndim != 1 or d.numel() == 0 or d.dtype != torch.int64:
            raise RankCollapseError("docs must hold non-empty 1-d int64 token index tensors")
        if int(d.min()) < 0 or int(d.max()) >= n:
            raise RankCollapseError(f"docs index tokens 0 .. {n - 1}; got one outside")
    return list(docs)


@checked
def document_mu_rel(x: Tensor, docs: list[Tensor]) -> Tensor:
    """``mu_rel`` per document, ``mu_rel(x[..., D_k, :])`` for token sets ``D_k``: [..., n, d] -> [..., K].

    ``docs``: K int64 index tensors (the mask's independent parts, ``masks.analysis.documents``).
    A one-token document has ``mu_rel`` 0; an all-zero one NaN (as :func:`mu_rel`).
    """
    _check(x)
    docs = _check_docs(docs, x.shape[-2])
    return torch.stack([mu_rel(x.index_select(-2, d.to(x.device))) for d in docs], dim=-1)


@checked(ndim={"x": 3})
def document_columns(x: Tensor, docs: list[Tensor], lengths: Tensor | None = None) -> dict[str, Tensor]:
    """Per-sample ``mu_rel_doc{k}`` (k < :data:`DOC_COLUMNS`) and ``mu_rel_docs_max`` (the largest
    over all K documents) of x [b, n, d]: ``{name: [b]}``. ``lengths`` [b]: sample ``i`` has its
    first ``lengths[i]`` tokens (each document cut to them; a document with none is NaN, left out
    of the max)."""

    _check(x)
    docs = _check_docs(docs, x.shape[-2])
    if lengths is not None and (lengths.shape != (x.shape[0],) or lengths.is_floating_point()
                                or bool((lengths < 1).any()) or bool((lengths > x.shape[1]).any())):
        raise RankCollapseError(
            f"lengths must be an integer tensor [{x.shape[0]}] with values 1 .. {x.shape[1]}")
    if lengths is None:
        per = document_mu_rel(x, docs)  # [b, K]
    else:
        per = torch.full((x.shape[0], len(docs)), math.nan, dtype=x.dtype)
        for i, m in enumerate(int(v) for v in lengths):
            for k, d in enumerate(docs):
                kept = d[d < m]
                if kept.numel():
                    per[i, k] = mu_rel(x[i].index_select(0, kept))
    out = {f"mu_rel_doc{k}": per[:, k] for k in range(min(len(docs), DOC_COLUMNS))}
    defined = torch.where(torch.isnan(per), torch.full_like(per, -math.inf), per).amax(dim=-1)
    out["mu_rel_docs_max"] = torch.where(torch.isinf(defined), torch.full_like(defined, math.nan), defined)
    return out


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` with NaN where ``den == 0`` (an undefined ratio, not 0)."""
    safe = torch.where(den > 0, den, torch.ones_like(den))
    return torch.where(den > 0, num / safe, torch.full_like(den, math.nan))


@checked
def at_floor(x: Tensor) -> Tensor:
    """1.0 where ``mu(x) <= FLOOR_FACTOR * eps(dtype) * ||x||_F`` (collapsed to working precision).

    x: [..., n, d] -> [...] (float 0/1, so a mean over samples is the share at the floor).
    Such a ``mu`` is indistinguishable from 0 in x's dtype (the paper's §4, §5): a curve that stops
    falling there has collapsed, not stabilised.
    """
    _check(x)
    m, norm = _reduced(x)
    return _at_floor(m, norm, x.dtype).to(x.dtype)


def _at_floor(m: Tensor, norm: Tensor, dtype: torch.dtype) -> Tensor:
    """1.0 / 0.0 for ``m <= FLOOR_FACTOR eps ||x||_F``; NaN where ``||x||_F`` is 0 or non-finite."""
    flag = (m <= FLOOR_FACTOR * torch.finfo(dtype).eps * norm).to(dtype)
    defined = (norm > 0) & torch.isfinite(norm) & torch.isfinite(m)
    return torch.where(defined, flag, torch.full_like(flag, math.nan))


@checked
def singular_values(x: Tensor) -> Tensor:
    """Singular values ``s_1 >= ... >= s_k``, ``k = min(n, d)``. [..., n, d] -> [..., k]."""
    _check(x)
    return _svdvals(x)


def _svdvals(x: Tensor) -> Tensor:
    """``svdvals`` of the finite samples; NaN rows for samples with a NaN/inf entry (no LinAlgError);
    float16 / bfloat16 in float32 (the SVD has no low-precision kernel)."""
    x = working(x)
    finite = torch.isfinite(x).flatten(-2).all(dim=-1)
    if bool(finite.all()):
        return torch.linalg.svdvals(x)
    out = torch.full((*x.shape[:-2], min(x.shape[-2], x.shape[-1])), math.nan, dtype=x.dtype, device=x.device)
    if bool(finite.any()):
        out[finite] = torch.linalg.svdvals(x[finite])
    return out


@checked
def gram_singular_values(x: Tensor) -> Tensor:
    """Singular values of x from the eigenvalues of its Gram matrix formed in float64, descending, float64.

    x: [..., n, d] -> [..., k], ``k = min(n, d)``: ``s_hat_k = sqrt(max(lambda_k, 0))``, ``lambda_k`` the
    eigenvalues (``eigvalsh``) of ``G = x^T x`` [d, d] when n >= d, else of ``x x^T`` [n, n]; ``G`` is
    accumulated over blocks of :data:`_GRAM_ROWS` rows (columns when n < d) converted to float64, so the
    workspace is one block and ``G``; from k = 256 only its lower block triangle is formed (all that
    ``eigvalsh`` reads). Cost ``3 n d k / 4`` float64 multiply-adds and one k x k eigenproblem, against
    LAPACK's float32 SVD (:func:`singular_values`): about half its time at n = 2,048, d = 576.

    Error bound, with ``m = max(n, d)`` (the length of each dot product in ``G``) and ``u = eps64 / 2``:
    forming ``G`` errs by ``|E| <= gamma_{m+1} |x|^T |x|`` entrywise (``gamma_j = j u / (1 - j u)``; the
    products of float32 numbers are exact in float64), so ``||E||_2 <= gamma_{m+1} ||x||_F^2``; the
    eigensolver is backward stable, ``||F||_2 <= k u ||G||_2``; by Weyl's theorem
    ``|lambda_k - s_k^2| <= Delta = (gamma_{m+1} + k u (1 + gamma_{m+1})) ||x||_F^2`` and hence
    ``|s_hat_k - s_k| <= Delta / (s_hat_k + s_k) <= sqrt(Delta)``. For float32 (or float16 / bfloat16)
    data, ``sqrt(Delta) <= sqrt((m + k + 1) k u) s_1`` stays below 0.2 of float32's rank tolerance
    ``max(n, d) eps32 s_1`` (:func:`rank_tolerance`) at every shape, and a singular value at that
    tolerance is exact to 2 %: the ranks, sigma_min, sigma_max, stable and effective rank keep their
    values. Singular values below ``sqrt(Delta)`` are rounding noise here (0 where ``lambda_k < 0``), as
    they are below ``eps32 s_1`` in a float32 SVD. For float64 data the Gram matrix squares the condition
    number: values below ``sqrt(Delta)``, about ``1e-8 ||x||_F``, are lost although float64 resolves
    ``max(n, d) eps64 s_1``, so float64 data keeps LAPACK's SVD (:func:`collapse_metrics`).
    A sample with a NaN / inf entry gets a NaN row.
    """
    _check(x)
    n, d = x.shape[-2], x.shape[-1]
    y = working(x).reshape(-1, n, d)
    if n < d:
        y = y.mT  # x x^T is the Gram matrix of x's columns
    finite = torch.isfinite(y).flatten(1).all(dim=1)
    out = torch.full((y.shape[0], min(n, d)), math.nan, dtype=torch.float64, device=x.device)
    if bool(finite.any()):
        z = y if bool(finite.all()) else y[finite]
        side = z.shape[-1]
        half = side // 2 if side >= 2 * _GRAM_HALF_MIN else side  # eigvalsh reads the lower triangle only
        g = torch.zeros(z.shape[0], side, side, dtype=torch.float64, device=x.device)
        for first in range(0, z.shape[-2], _GRAM_ROWS):
            block = z[:, first : first + _GRAM_ROWS].to(torch.float64)
            left, right = block[..., :half], block[..., half:]
            g[:, :half, :half].baddbmm_(left.mT, left)
            if half < side:
                g[:, half:, :half].baddbmm_(right.mT, left)
                g[:, half:, half:].baddbmm_(right.mT, right)
        lam = torch.linalg.eigvalsh(g, UPLO="L")  # ascending
        out[finite] = lam.flip(-1).clamp_(min=0.0).sqrt_()
    return out.reshape(*x.shape[:-2], min(n, d))


def _spectrum(x: Tensor) -> Tensor:
    """The singular values the rank columns of :func:`collapse_metrics` read, float64: from the float64
    Gram matrix (:func:`gram_singular_values`) for data coarser than float64 on a device with float64
    (within its bound, the same ranks and sigmas, faster), else LAPACK's SVD (:func:`_svdvals`)."""
    if x.dtype != torch.float64 and x.device.type in ("cpu", "cuda"):
        return gram_singular_values(x)
    return _svdvals(x).to(torch.float64)


#: The half-precision dtypes: measured in float32, their own eps in floors and rank tolerances.
HALF: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16)


@checked
def rank_tolerance(s: Tensor, n: int, d: int, dtype: torch.dtype | None = None) -> Tensor:
    """The numerical rank's tolerance. s: [..., k] (every singular value) -> [...].

    Full precision (``dtype`` the data's own, default ``s``'s): torch.linalg.matrix_rank's default
    ``max(n, d) eps s_1``. Half precision (bfloat16, float16; measured in float32): the larger of
    float32's ``max(n, d) eps32 s_1`` and the data's own rounding, ``(eps / 2) ||x||_F`` with
    ``||x||_F = sqrt(sum s_k^2)`` (rounding each entry moves every singular value by at most
    ``||E||_2 <= ||E||_F <= (eps / 2) ||x||_F``). matrix_rank's rule at half precision would put the
    tolerance above ``s_1`` itself once ``max(n, d) eps >= 1`` (bf16: 128 tokens), every rank 0.
    """
    own = dtype or s.dtype
    if own in HALF:
        data = 0.5 * torch.finfo(own).eps * s.to(torch.float64).square().sum(dim=-1).sqrt().to(s.dtype)
        return torch.maximum(max(n, d) * torch.finfo(torch.float32).eps * s[..., 0], data)
    return max(n, d) * torch.finfo(own).eps * s[..., 0]


def _rank_from_sv(s: Tensor, n: int, d: int, dtype: torch.dtype | None = None) -> Tensor:
    return (s > rank_tolerance(s, n, d, dtype).unsqueeze(-1)).sum(dim=-1).to(s.dtype)


@checked
def num_rank(x: Tensor, rtol: float | None = None) -> Tensor:
    """Number of singular values above ``max(n, d) * eps(dtype) * s_1`` (as torch.linalg.matrix_rank).

    x: [..., n, d] -> [...] (float). The zero matrix has rank 0. ``rtol``: count ``s_k > rtol * s_1``
    instead (a looser relative tolerance, e.g. for states reached by iteration rather than built exactly).
    """
    s = singular_values(x)
    if rtol is None:
        return _rank_from_sv(s, x.shape[-2], x.shape[-1])
    return (s > rtol * s[..., :1]).sum(dim=-1).to(s.dtype)


@checked
def full_rank(x: Tensor) -> Tensor:
    """1.0 where ``num_rank(x) == min(n, d)``. [..., n, d] -> [...]."""
    return (num_rank(x) == min(x.shape[-2], x.shape[-1])).to(x.dtype)


def _stable_rank_from_sv(s: Tensor) -> Tensor:
    top = s[..., 0]
    return (s * s).sum(dim=-1) / torch.where(top > 0, top * top, torch.ones_like(top))


@checked
def stable_rank(x: Tensor) -> Tensor:
    """Stable rank ``||x||_F^2 / ||x||_2^2 = sum_k s_k^2 / s_1^2`` (0 for the zero matrix).

    x: [..., n, d] -> [...]. Between 1 and rank(x); insensitive to tiny singular values.
    """
    return _stable_rank_from_sv(singular_values(x))


def _effective_rank_from_sv(s: Tensor) -> Tensor:
    total = s.sum(dim=-1, keepdim=True)
    p = s / torch.where(total > 0, total, torch.ones_like(total))
    plogp = torch.where(p > 0, p * torch.log(torch.where(p > 0, p, torch.ones_like(p))), torch.zeros_like(p))
    return torch.exp(-plogp.sum(dim=-1))


@checked
def effective_rank(x: Tensor) -> Tensor:
    """Effective rank (Roy & Vetterli, EUSIPCO 2007): ``exp(H(p))``, ``p_k = s_k / sum_k s_k``.

    ``H(p) = -sum_k p_k log p_k`` with ``0 log 0 = 0``. x: [..., n, d] -> [...]; 1 for a rank-one
    matrix, ``min(n, d)`` when all singular values are equal (1 for the zero matrix).
    """
    return _effective_rank_from_sv(singular_values(x))


#: The per-sample columns of :func:`token_geometry`.
GEOMETRY_NAMES: tuple[str, ...] = ("full_rank", "rank", "rank_max", "sigma_min", "sigma_max", "sigma_ratio",
                                   "sigma_dominance", "rank_tol_rel", "mean_abs_cos")


@checked
def token_geometry(x: Tensor, rank_max: Tensor | None = None) -> tuple[dict[str, Tensor], Tensor]:
    """Token geometry of each sample (Figs. 4 and 8) against the rank it can reach, and its spectrum.

    x: [b, n, d]; ``rank_max`` [b]: the largest rank each sample can have by structure (its number of
    distinct rows; an embedding's width), capped at ``min(n, d)``; None: ``min(n, d)``. With ``k = rank_max``
    and the numerical rank at :func:`rank_tolerance` (``max(n, d) eps s_1`` in full precision):
    ``full_rank`` (1 where rank >= k), ``rank``, ``rank_max``, ``sigma_min`` (the k-th singular value:
    the smallest the input allows above 0), ``sigma_max``, ``sigma_ratio = sigma_min / sigma_max``,
    ``sigma_dominance = s_1 / s_2``, ``rank_tol_rel`` (:func:`rank_tolerance` relative to ``s_1``: where
    ``sigma_ratio`` stops being measurable), ``mean_abs_cos``. -> ({name: float64 [b]}, singular values
    float64 [b, min(n, d)]), on the CPU wherever x lives; NaN for a sample that is not finite.
    """
    _check(x)
    if x.dim() != 3:
        raise RankCollapseError(f"x must be [b, n, d], got shape {tuple(x.shape)}")
    b, n, d = x.shape
    k_all = min(n, d)
    if rank_max is None:
        cap = torch.full((b,), k_all)
    else:
        cap = torch.as_tensor(rank_max)
        if cap.shape != (b,) or (cap.is_floating_point() and not bool(torch.isfinite(cap).all())):
            raise RankCollapseError(
                f"rank_max must be [b] = [{b}] finite whole numbers, got {tuple(cap.shape)}"
            )
        cap = cap.clamp(min=1, max=k_all)
    out = {k: torch.full((b,), math.nan, dtype=torch.float64) for k in GEOMETRY_NAMES}
    sv = torch.full((b, k_all), math.nan, dtype=torch.float64)
    ok = torch.isfinite(x).flatten(1).all(dim=1)
    kept = ok.cpu()  # the results live on the CPU; the SVDs run where x lives
    own = x.dtype  # the data's precision: its rank tolerance (a bf16 model is measured in float32)
    x = working(x)
    if bool(kept.any()):
        s = torch.linalg.svdvals(x[ok])
        tol = rank_tolerance(s, n, d, own)
        rank = (s > tol[:, None]).sum(-1)
        k = cap.cpu()[kept].to(device=s.device, dtype=torch.long)
        smin = s.gather(1, (k - 1)[:, None])[:, 0]
        vals = {
            "full_rank": (rank >= k), "rank": rank, "rank_max": k, "sigma_min": smin, "sigma_max": s[:, 0],
            "sigma_ratio": smin / s[:, 0],
            "sigma_dominance": s[:, 0] / s[:, 1] if k_all > 1 else s[:, 0] * math.nan,
            "rank_tol_rel": torch.where(s[:, 0] > 0, tol / s[:, 0].clamp(min=torch.finfo(s.dtype).tiny),
                                        max(n, d) * torch.finfo(torch.float32 if own in HALF else own).eps),
            "mean_abs_cos": mean_abs_cos(x[ok]),
        }
        for name in GEOMETRY_NAMES:
            out[name][kept] = vals[name].to(device="cpu", dtype=torch.float64)
        sv[kept] = s.to(device="cpu", dtype=torch.float64)
    return out, sv


@checked
def pairwise_cosines(x: Tensor) -> Tensor:
    """Pairwise cosines ``<x_i, x_j> / (|x_i| |x_j|)`` in float64: [..., n, d] -> [..., n, n]
    (a zero token has cosine 0 with every token)."""
    _check(x)
    u = _unit_tokens(x.to(torch.float64))
    return u @ u.transpose(-1, -2)


def _unit_tokens(x: Tensor) -> Tensor:
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / torch.where(norm > 0, norm, torch.ones_like(norm))


@checked
def mean_signed_cos(x: Tensor) -> Tensor:
    """Mean signed pairwise cosine ``1/(n(n-1)) sum_{i != j} <u_i, u_j>``, ``u_i = x_i / ||x_i||``.

    x: [..., n, d] -> [...]; needs n >= 2. Computed in O(n d) as
    ``(||sum_i u_i||^2 - sum_i ||u_i||^2) / (n(n-1))``. A zero token counts as cosine 0.
    """
    _check(x)
    n = x.shape[-2]
    if n < 2:
        raise RankCollapseError("pairwise cosines need at least 2 tokens")
    u = _unit_tokens(x)
    total = u.sum(dim=-2)
    diag = (u * u).sum(dim=(-2, -1))
    return ((total * total).sum(dim=-1) - diag) / (n * (n - 1))


@checked
def mean_abs_cos(x: Tensor) -> Tensor:
    """Mean absolute pairwise cosine ``1/(n(n-1)) sum_{i != j} |<u_i, u_j>|`` (anisotropy, Fig. 4).

    x: [..., n, d] -> [...]; needs n >= 2. A zero token counts as cosine 0. Exact, every pair: the Gram
    matrix ``U U^T`` is formed in x's dtype in square tiles, only those on and above the diagonal (the
    matrix is symmetric: about ``n^2 d / 2`` multiply-adds per sample), each into one reused buffer,
    its absolute values summed per row in x's dtype and the row sums in float64; memory is one tile.
    The side is ``sqrt(_COSINE_WORK / d)`` rounded up to a power of two, within 64 .. 1024 and at most n
    (256 at d = 576: a tile stays in a core's cache and the triangle of tiles is close to half the
    square; 1024 at d = 16, where the per-tile loop would otherwise dominate); several samples share a
    tile when n is small. Rounding: each cosine errs by at most about ``(d + 4) eps`` (a dot product of
    two unit vectors, each normalised with a relative error ``<= (d / 2 + 2) eps``), each row sum of
    ``side`` terms in [0, 1] by ``gamma_side`` relative, so the mean errs by at most ``(d + side + 6) eps``
    in x's dtype (``1.0e-4`` for float32 at d = 576, side 256; the errors seen are about 1e-7).
    """
    _check(x)
    n, d = x.shape[-2], x.shape[-1]
    if n < 2:
        raise RankCollapseError("pairwise cosines need at least 2 tokens")
    u = _unit_tokens(x).reshape(-1, n, d)
    wide = 1 << max(0, math.ceil(math.log2(max(1.0, _COSINE_WORK / d)) / 2))  # side^2 d ~ _COSINE_WORK
    side = min(n, max(64, min(wide, math.isqrt(_COSINE_TILE))))
    group = max(1, _COSINE_TILE // (side * side))  # samples per tile
    total = torch.zeros(u.shape[0], dtype=torch.float64, device=x.device)
    buffer = torch.empty(min(group, u.shape[0]), side, side, dtype=u.dtype, device=x.device)
    for first in range(0, u.shape[0], group):
        us = u[first : first + group]
        part = total[first : first + group]
        for i in range(0, n, side):
            rows = us[:, i : i + side]
            for j in range(i, n, side):
                cols = us[:, j : j + side]
                tile = buffer[: us.shape[0], : rows.shape[1], : cols.shape[1]]
                torch.bmm(rows, cols.transpose(-1, -2), out=tile).abs_()
                # rows summed in x's dtype (<= side terms each), the row sums in float64
                part += tile.sum(dim=-1).sum(dim=-1, dtype=torch.float64) * (1.0 if i == j else 2.0)
    diag = (u * u).sum(dim=(-2, -1), dtype=torch.float64)  # |<u_i, u_i>| = 1 (0 for a zero token)
    return ((total - diag) / (n * (n - 1))).to(x.dtype).reshape(x.shape[:-2])


@checked
def abs_cos_row_means(x: Tensor, rows: Tensor) -> Tensor:
    """Each chosen token's mean absolute cosine with every other token, float64.

    x: [..., n, d]; rows: long [m], distinct indices of tokens -> [..., m]:
    ``r_i = 1/(n-1) sum_{j != i} |<u_i, u_j>|`` (a zero token counts as cosine 0). The mean of ``r_i``
    over all n rows is :func:`mean_abs_cos`. Cost ``m n d`` multiply-adds in x's dtype, in blocks of at
    most ``_COSINE_TILE`` cosines (one buffer); the block sums in float64.
    """
    _check(x)
    n, d = x.shape[-2], x.shape[-1]
    if n < 2:
        raise RankCollapseError("pairwise cosines need at least 2 tokens")
    rows = torch.as_tensor(rows, dtype=torch.long, device=x.device).reshape(-1)
    if (rows.numel() == 0 or int(rows.min()) < 0 or int(rows.max()) >= n
            or rows.unique().numel() != rows.numel()):
        raise RankCollapseError(f"rows must be distinct token indices in 0..{n - 1}, got {rows.numel()} of "
                                "them")
    u = _unit_tokens(x).reshape(-1, n, d)
    picked = u[:, rows]  # [B, m, d]
    m = rows.numel()
    height = min(m, 256)
    width = max(1, min(n, _COSINE_TILE // height))
    total = torch.zeros(u.shape[0], m, dtype=torch.float64, device=x.device)
    buffer = torch.empty(u.shape[0], height, width, dtype=u.dtype, device=x.device)
    for i in range(0, m, height):
        q = picked[:, i : i + height]
        for j in range(0, n, width):
            keys = u[:, j : j + width]
            tile = buffer[:, : q.shape[1], : keys.shape[1]]
            torch.bmm(q, keys.transpose(-1, -2), out=tile).abs_()
            total[:, i : i + q.shape[1]] += tile.sum(dim=-1, dtype=torch.float64)
    self_term = (picked * picked).sum(dim=-1, dtype=torch.float64)  # |<u_i, u_i>| = 1 (0 for a zero token)
    return ((total - self_term) / (n - 1)).reshape(*x.shape[:-2], m)


@checked
def sampled_mean_abs_cos(x: Tensor, rows: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """:func:`mean_abs_cos` estimated from ``rows`` query tokens, with its standard error, float64.

    x: [..., n, d] -> (estimate [...], standard error [...]). A set S of ``m = min(rows, n)`` tokens is
    drawn uniformly without replacement (``core.draws.distinct_indices``; the same S for every sample of
    the batch), and ``estimate = 1/m sum_{i in S} r_i`` with ``r_i`` of :func:`abs_cos_row_means`: the
    exact mean over all pairs is the mean of ``r_i`` over all n tokens, so the estimate is unbiased.
    ``se = sqrt((1 - m/n) s^2 / m)``, ``s^2`` the sample variance of ``r_i`` over S (simple random
    sampling without replacement; 0 when m = n, where the estimate is the exact mean). Cost
    ``m n d`` against ``n^2 d / 2`` for every pair.
    """
    from rankcollapse.core.draws import distinct_indices

    _check(x)
    n = x.shape[-2]
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 2:
        raise RankCollapseError(f"rows must be a whole number >= 2, got {rows!r}")
    chosen = distinct_indices(n, rows, generator).to(x.device)
    r = abs_cos_row_means(x, chosen)
    m = chosen.numel()
    estimate = r.mean(dim=-1)
    se = (r.var(dim=-1, correction=1) * (1.0 - m / n) / m).clamp_(min=0.0).sqrt_()
    return estimate, se


@checked
def composite_norm(r: Tensor) -> Tensor:
    """Dong et al.'s ``||r||_{1,inf} = sqrt(||r||_1 ||r||_inf)``. r: [..., n, d] -> [...].

    ``||r||_1`` = largest column absolute sum (induced 1-norm), ``||r||_inf`` = largest row
    absolute sum (induced inf-norm).
    """
    a = r.abs()
    return torch.sqrt(a.sum(dim=-2).amax(dim=-1) * a.sum(dim=-1).amax(dim=-1))


@checked
def dong_residual(x: Tensor, relative: bool = False) -> Tensor:
    """Dong et al.'s rank-collapse residual ``||x - 1 gamma_x^T||_{1,inf}``.

    x: [..., n, d] -> [...]. Dong, Cordonnier & Loukas, "Attention is not all you need: pure
    attention loses rank doubly exponentially with depth" (ICML 2021) define
    ``res(x) = x - 1 x_*^T`` with ``x_* = argmin_v ||x - 1 v^T||`` and measure it in the
    composite norm ``sqrt(||.||_1 ||.||_inf)``. That minimiser has no closed form under the
    composite norm; we take ``x_*`` = the mean token ``gamma_x`` (the Frobenius minimiser; their
    code's exact choice is not available to us), so this value is an upper bound on the
    composite-norm minimum and exactly zero iff all tokens are equal. ``relative=True`` divides
    by ``||x||_{1,inf}``.
    """
    res = composite_norm(centered(x))
    if not relative:
        return res
    base = composite_norm(x)
    return res / torch.where(base > 0, base, torch.ones_like(base))


#: Column names of :func:`collapse_metrics`, in CSV order.
METRIC_NAMES: tuple[str, ...] = (
    "mu",
    "mu_rel",
    "at_floor",
    "num_rank",
    "full_rank",
    "sigma_min",
    "sigma_max",
    "stable_rank",
    "effective_rank",
    "mean_abs_cos",
    "mean_signed_cos",
    "dong_residual",
)

#: Columns that need a singular value decomposition (O(n d min(n, d)) per sample).
SVD_METRICS = frozenset({"num_rank", "full_rank", "sigma_min", "sigma_max", "stable_rank", "effective_rank"})
#: Columns that cost O(n d) per sample.
CHEAP_METRICS: tuple[str, ...] = ("mu", "mu_rel", "at_floor", "mean_signed_cos", "dong_residual")


def metric_names(
    metrics: str | tuple[str, ...] | list[str] | None, extra: tuple[str, ...] = ()
) -> tuple[str, ...] | None:
    """The one parser of a metric selection (``--metrics`` and every config's ``metrics=``): ``"mu,mu_rel"``
    or a tuple of names of :data:`METRIC_NAMES` (and of ``extra``: opt-in columns a caller offers, e.g.
    the simulator's ``metrics.rollout.ROLLOUT_NAMES``, never part of ``all``) -> a tuple in the order
    given (None, ``""`` or ``"all"``: None, every metric of :data:`METRIC_NAMES`; ``all`` among others:
    every metric and the others, ``all,mu`` is ``all``). RankCollapseError
    naming the allowed names for an unknown one, RankCollapseTypeError for anything else."""
    from rankcollapse.edge.errors import RankCollapseError, RankCollapseTypeError
    from rankcollapse.edge.validate import quote

    if metrics is None:
        return None
    if isinstance(metrics, str):
        if metrics.strip() in ("", "all"):
            return None
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    if not isinstance(metrics, tuple | list) or not all(isinstance(m, str) for m in metrics):
        raise RankCollapseTypeError(f"metrics must be names separated by commas, got {quote(metrics)}")
    allowed = (*METRIC_NAMES, *extra)
    metrics = [n for m in metrics for n in (METRIC_NAMES if m == "all" else (m,))]  # all,rollout_x: both
    unknown = [m for m in metrics if m not in allowed]
    if unknown:
        raise RankCollapseError(f"metrics {quote(unknown)} unknown; allowed: {', '.join(allowed)}")
    if not metrics:
        raise RankCollapseError("metrics names none; allowed: all, or some of " + ", ".join(allowed))
    return tuple(dict.fromkeys(metrics))


#: The column :func:`collapse_metrics` adds after ``mean_abs_cos`` when ``cos_rows`` is given: the
#: standard error of a sampled mean |cos| (:func:`sampled_mean_abs_cos`; 0 where every pair was used).
COS_SE = "mean_abs_cos_se"
#: A sample is measured on ``cos_rows`` query rows from ``SAMPLED_COS_FROM * cos_rows`` tokens on: there the
#: sample's ``m n d`` multiply-adds are at most half of every pair's ``n^2 d / 2``.
SAMPLED_COS_FROM = 4


@checked
def measured_names(names: tuple[str, ...] | list[str] | None, cos_rows: int | None = None) -> tuple[str, ...]:
    """The keys :func:`collapse_metrics` returns for ``names`` (None: :data:`METRIC_NAMES`): the names, and
    :data:`COS_SE` after ``mean_abs_cos`` when ``cos_rows`` is given."""
    wanted = METRIC_NAMES if names is None else tuple(names)
    if cos_rows is None or "mean_abs_cos" not in wanted:
        return wanted
    at = wanted.index("mean_abs_cos") + 1
    return (*wanted[:at], COS_SE, *wanted[at:])


@checked
def cos_is_sampled(n: int, cos_rows: int | None) -> bool:
    """Whether a sample of n tokens gets a sampled mean |cos| (``n >= SAMPLED_COS_FROM * cos_rows``)."""
    return cos_rows is not None and n >= SAMPLED_COS_FROM * cos_rows


@checked
def collapse_metrics(x: Tensor, names: tuple[str, ...] | list[str] | None = None,
                     cos_rows: int | None = None, cos_seed: int = 0) -> dict[str, Tensor]:
    """Every collapse measure of each sample: x [b, n, d] (or [n, d]) -> {name: [b] (or [])}.

    ``cos_rows`` (None: every pair, always): from ``n >= SAMPLED_COS_FROM * cos_rows`` tokens,
    ``mean_abs_cos`` is estimated from ``cos_rows`` query tokens drawn with ``cos_seed`` (the same rows
    at every call of that n and seed: every layer of a run) and its standard error is returned as
    :data:`COS_SE` (:func:`sampled_mean_abs_cos`); below that every pair is used and the error is 0.

    Keys are :data:`METRIC_NAMES` (or ``names``, a subset, to skip costly ones; :func:`measured_names`);
    the rank columns
    (:data:`SVD_METRICS`) read one spectrum per sample: LAPACK's SVD for float64 data, the float64 Gram
    matrix's eigenvalues for float32 / float16 / bfloat16 data (:func:`gram_singular_values`: within its
    bound the same ranks and sigmas, in about half the time). ``at_floor`` and ``full_rank`` are 0/1 so
    that their mean is a share. A float16 / bfloat16 ``x`` is measured in float32 (:func:`working`),
    against its own dtype's floor and rank tolerance.
    """
    _check(x)
    wanted = METRIC_NAMES if names is None else tuple(names)
    unknown = [k for k in wanted if k not in METRIC_NAMES]
    if unknown:
        raise RankCollapseError(f"unknown metric(s) {unknown}; allowed: {', '.join(METRIC_NAMES)}")
    n, d = x.shape[-2], x.shape[-1]
    own = x.dtype  # the data's precision: its floor and rank tolerance
    x = working(x)
    out: dict[str, Tensor] = {}
    m, norm = _reduced(x)  # float64 sums (x's dtype where the device has no float64)
    for name in wanted:
        if name == "mu":
            out[name] = m.to(x.dtype)
        elif name == "mu_rel":
            out[name] = _ratio(m, norm).to(x.dtype)
        elif name == "at_floor":
            out[name] = _at_floor(m, norm, own).to(x.dtype)
    if any(k in SVD_METRICS for k in wanted):
        s = _spectrum(x)  # float64, one spectrum for every rank column
        derived = {
            "num_rank": lambda: _rank_from_sv(s, n, d, own),
            "full_rank": lambda: (_rank_from_sv(s, n, d, own) == min(n, d)),
            "sigma_min": lambda: s[..., -1],
            "sigma_max": lambda: s[..., 0],
            "stable_rank": lambda: _stable_rank_from_sv(s),
            "effective_rank": lambda: _effective_rank_from_sv(s),
        }
        for name in wanted:
            if name in derived:
                out[name] = derived[name]().to(x.dtype)
    if "mean_abs_cos" in wanted:
        if cos_is_sampled(n, cos_rows):
            g = torch.Generator().manual_seed(cos_seed)
            estimate, se = sampled_mean_abs_cos(x, int(cos_rows), g)  # type: ignore[arg-type]
            out["mean_abs_cos"], out[COS_SE] = estimate.to(x.dtype), se.to(x.dtype)
        else:
            out["mean_abs_cos"] = mean_abs_cos(x)
            out[COS_SE] = torch.zeros_like(out["mean_abs_cos"])
    if "mean_signed_cos" in wanted:
        out["mean_signed_cos"] = mean_signed_cos(x)
    if "dong_residual" in wanted:
        out["dong_residual"] = composite_norm(centered(x))
    return {k: out[k] for k in measured_names(wanted, cos_rows)}


@checked
def per_sample_metrics(x: Tensor, names: tuple[str, ...] | list[str] | None = None,
                       lengths: Tensor | None = None, cos_rows: int | None = None,
                       cos_seed: int = 0) -> dict[str, Tensor]:
    """:func:`collapse_metrics` of each sample on its own tokens, NaN for a sample that is not finite.

    x: [b, n, d]; lengths: [b] (sample i is ``x[i, :lengths[i]]``, right padding left out; None: all n)
    -> {name: float64 [b]}. The one per-sample helper every caller uses (model analyses, the paper's
    experiments): samples of equal length are measured together, one SVD each. ``cos_rows``,
    ``cos_seed``: :func:`collapse_metrics`'s (the keys are then :func:`measured_names`).
    """
    _check(x)
    b, n = x.shape[0], x.shape[-2]
    wanted = METRIC_NAMES if names is None else tuple(names)
    lengths = torch.full((b,), n, dtype=torch.long) if lengths is None else torch.as_tensor(lengths)
    if lengths.shape != (b,) or bool((lengths < 1).any()) or bool((lengths > n).any()):
        raise RankCollapseError(f"lengths must be [b] = [{b}] values in 1..{n}, got {tuple(lengths.shape)}")
    ok = torch.stack([torch.isfinite(x[i, : int(lengths[i])]).all() for i in range(b)]) if b else \
        torch.zeros(0, dtype=torch.bool)
    keys = measured_names(wanted, cos_rows)
    out = {k: torch.full((b,), math.nan, dtype=torch.float64) for k in keys}
    for m in sorted({int(lengths[i]) for i in range(b) if bool(ok[i])}):
        rows = [i for i in range(b) if bool(ok[i]) and int(lengths[i]) == m]
        vals = collapse_metrics(x[rows, :m], wanted, cos_rows, cos_seed)
        for k in keys:
            out[k][rows] = vals[k].detach().to(device="cpu", dtype=torch.float64)
    return out


@checked
def summarize(per_sample: dict[str, Tensor]) -> dict[str, float]:
    """Batch summary of :func:`collapse_metrics`: ``{name: mean, name_min: min, name_max: max}``.

    per_sample: {name: [b] or []} -> plain floats (NaN stays NaN). Order: all means first, in
    the input order, then each column's ``_min`` and ``_max``.
    """
    means: dict[str, float] = {}
    extremes: dict[str, float] = {}
    for name, values in per_sample.items():
        v = values.detach().reshape(-1).to(dtype=torch.float64, device="cpu")
        if v.numel() == 0:
            means[name] = extremes[f"{name}_min"] = extremes[f"{name}_max"] = math.nan
            continue
        means[name] = float(v.mean())
        extremes[f"{name}_min"] = float(v.min())
        extremes[f"{name}_max"] = float(v.max())
    return {**means, **extremes}
