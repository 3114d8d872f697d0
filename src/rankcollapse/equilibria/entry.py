"""The entry points of ``rankcollapse equilibria``, ``counterexample`` and ``portrait``: one config each,
validating on construction, and one function each that the command calls with it.

>>> rows = equilibria(EquilibriaConfig(tokens=3, d=3, construction="paper"))   # Theorem 3, every rank
>>> cx = counterexample(CounterexampleConfig(w=2.0))                     # the N = d = 2 closed forms
>>> files = portrait(PortraitConfig(construction="ours", a=0.95), "out")  # Figs. 1 and 5, ours

Three modes of :func:`equilibria`: ``construction="paper"`` (Theorem 3's bidiagonal ``W_V``: every
equilibrium of every rank, enumerated), ``"ours"`` (our designed stable equilibria, one per rank) and
``value=PATH`` (search that ``W_V`` from random starts under ``mask``). A field that does not apply to
the mode is refused (one line), never ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import check_choice, check_float, check_int, check_threads, quote

CONSTRUCTIONS = ("paper", "ours")

#: Sizes the exhaustive checks allow (N, d) and the iteration limits of one run.
MAX_SIZE, MAX_STARTS, MAX_STEPS = 64, 100_000, 1_000_000


def _refuse(mode: str, **given: object) -> None:
    """RankCollapseError for the first field given (not None / False) that does not apply in ``mode``."""
    for field, value in given.items():
        if value is not None and value is not False:
            raise RankCollapseError(f"{field} does not apply to {mode}")


@dataclass(frozen=True)
class EquilibriaConfig:
    """What :func:`equilibria` finds and verifies, of ``X -> D A(X) X W_V`` (the theory's sphere LayerNorm).

    Arguments:
        tokens, d: tokens N and features d (1..64).
        construction: ``"paper"`` (Theorem 3, needs N = d) or ``"ours"``; ``None``: ours, or the search
            when ``value`` is given (a construction with ``value`` is refused).
        w: paper only, the superdiagonal ``w > 1`` of ``W_V`` (default N).
        family: paper only, ``"all"`` branches (default) or the paper's own family.
        rank: only equilibria of this rank (1..min(N, d)).
        value: search this ``d x d`` ``W_V`` (a ``.npy`` file, row convention ``x -> x W_V``).
        mask: search only, a mask spec (default causal); ``d_qk``: search only (default 1).
        starts: random starts (ours and search: also the basin sample, default 256; paper: nearby starts
            per equilibrium, default 8); ``layers``: layers iterated from each start.
        seed: the random starts' seed; ``threads``: torch intra-op threads.
    """

    tokens: int
    d: int
    construction: Literal["paper", "ours"] | None = None
    w: float | None = None
    family: str | None = None
    rank: int | None = None
    value: Path | None = None
    mask: str | None = None
    d_qk: float | None = None
    starts: int | None = None
    layers: int = 2000
    seed: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("tokens", "d"):
            check_int(name, getattr(self, name), low=1, high=MAX_SIZE)
        if self.rank is not None:
            check_int("rank", self.rank, low=1, high=min(self.tokens, self.d))
        if self.starts is not None:
            check_int("starts", self.starts, low=1, high=MAX_STARTS)
        check_int("layers", self.layers, low=1, high=MAX_STEPS)
        check_threads("threads", self.threads)
        check_int("seed", self.seed, low=0, high=2**63 - 1)
        if self.d_qk is not None:
            check_float("d_qk", self.d_qk, low=0.0, low_open=True)
        if self.construction is not None:
            check_choice("construction", self.construction, CONSTRUCTIONS)
        if self.value is not None:
            if self.construction is not None:
                raise RankCollapseError(
                    "construction does not apply with value (a search, not a construction)"
                )
            _refuse("value (a search)", w=self.w, family=self.family)
        elif self.construction == "paper":
            _refuse("construction paper (its mask is causal, W_Q = W_K = 0)", mask=self.mask, d_qk=self.d_qk)
        else:
            _refuse("construction ours (each construction fixes its own mask and W_QK)", mask=self.mask,
                    d_qk=self.d_qk, w=self.w, family=self.family)

    @property
    def mode(self) -> Literal["search", "paper", "ours"]:
        """``search`` (a value file), ``paper`` or ``ours``."""
        return "search" if self.value is not None else self.construction or "ours"


def equilibria(config: EquilibriaConfig, note: Any = None) -> list[dict[str, Any]]:
    """One JSON-ready row per equilibrium found and verified under ``config``.

    ``note(text)`` receives what is worth a line on stderr (a rank ours has no construction for)."""
    import torch

    torch.set_num_threads(config.threads)
    gen = torch.Generator().manual_seed(config.seed)
    if config.mode == "search":
        return _search(config, gen)
    if config.mode == "paper":
        return _paper(config)
    return _ours(config, gen, note or (lambda text: None))


def load_value(path: Path, d: int) -> Any:
    """The ``d x d`` value matrix in the ``.npy`` file ``path`` as a float64 tensor; its header checked
    before any data is read (``edge.inputs.read_npy``), finite real numbers only."""
    import numpy as np
    import torch

    from rankcollapse.edge.inputs import read_npy

    def check(shape: tuple[int, ...], dtype: object) -> None:
        if shape != (d, d):
            raise RankCollapseError(
                f"value matrix in {quote(str(path), 80)} has shape {shape}; expected ({d}, {d})"
            )

    arr = read_npy(path, "value file", check)
    if np.iscomplexobj(arr) or not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr).all():
        raise RankCollapseError(f"value matrix in {quote(str(path), 80)} must be finite real numbers")
    return torch.as_tensor(arr.astype(np.float64))


def _search(config: EquilibriaConfig, gen: Any) -> list[dict[str, Any]]:
    from rankcollapse.equilibria.finder import find_equilibria
    from rankcollapse.equilibria.lnmap import resolve_mask

    assert config.value is not None
    n, d, mask = config.tokens, config.d, config.mask or "causal"
    d_qk = 1.0 if config.d_qk is None else config.d_qk
    w_v = load_value(config.value, d)
    found = find_equilibria(w_v, n, resolve_mask(mask, n).matrix, None, d_qk, starts=config.starts or 256,
                            steps=config.layers, generator=gen)
    rows = []
    for eq in found:
        if config.rank is not None and eq.rank != config.rank:
            continue
        row = eq.to_dict()
        row.update({"n": n, "d": d, "mask": mask, "d_qk": d_qk, "value": w_v.tolist(),
                    "source": str(config.value)})
        rows.append(row)
    return rows


def _paper(config: EquilibriaConfig) -> list[dict[str, Any]]:
    from rankcollapse.equilibria.finder import residual
    from rankcollapse.equilibria.lnmap import causal_mask
    from rankcollapse.equilibria.theorem3 import (
        SOURCE,
        bidiagonal_value,
        check_size,
        enumerate_equilibria,
        zero_qk,
    )
    from rankcollapse.equilibria.theorem3_checks import (
        NEUTRAL_TOL,
        convergence_from_nearby,
        direction_counts,
        directional_convergence,
        srank_bound,
        tangent_moduli,
    )
    from rankcollapse.metrics import stable_rank

    n, d = config.tokens, config.d
    w = check_size(n, d, float(n) if config.w is None else config.w)
    w_v = bidiagonal_value(d, w)
    eqs = [e for e in enumerate_equilibria(w_v, n, config.family or "all")
           if config.rank is None or e.rank == config.rank]
    mask, qk = causal_mask(n), zero_qk(d)
    conv = convergence_from_nearby(eqs, w_v, starts=config.starts or 8, steps=config.layers, seed=config.seed)
    directions = directional_convergence(eqs, w_v, steps=config.layers)
    rows = []
    for e, c, dirs in zip(eqs, conv, directions, strict=True):
        mods = tangent_moduli(e.x, w_v, mask, qk, block_triangular=True)
        row = e.to_dict()
        row.update(direction_counts(mods))
        row.update({
            "residual": residual(e.x, w_v, mask, qk), "moduli": [float(v) for v in mods],
            "neutral_tol": NEUTRAL_TOL, "convergence": c, "directions": dirs,
            "stable_rank": float(stable_rank(e.x)), "n": n, "d": d, "w": w, "construction": "paper",
            "mask": "causal", "source": SOURCE,
        })
        if e.rank == min(n, d):
            row["srank_bound"] = srank_bound(n, w)
        rows.append(row)
    return rows


def _ours(config: EquilibriaConfig, gen: Any, note: Any) -> list[dict[str, Any]]:
    from rankcollapse.equilibria.construction import construct_rank_k, constructed_ranks
    from rankcollapse.equilibria.finder import verify_equilibrium

    n, d, starts, steps = config.tokens, config.d, config.starts or 256, config.layers
    rows = []
    for k in [config.rank] if config.rank is not None else range(1, min(n, d) + 1):
        if config.rank is None and k not in constructed_ranks(n):
            note(f"no construction of ours for rank {k}")
            continue
        con = construct_rank_k(n, d, k)
        eq = verify_equilibrium(con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk, samples=starts,
                                steps=steps, generator=gen)
        local = verify_equilibrium(con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk, steps=steps,
                                   init=con.neighbourhood_inputs(starts, con.basin_radius, gen))
        row = eq.to_dict()
        row.update({
            "n": n, "d": d, "target_rank": k, "mask": con.mask, "value": con.w_v.tolist(),
            "w_qk": None if con.w_qk is None else con.w_qk.tolist(), "d_qk": con.d_qk,
            "local_basin_radius": con.basin_radius, "local_basin_fraction": local.basin_fraction,
            "local_basin_ci": list(local.basin_ci), "construction": "ours",
            "source": "ours (designed stable equilibria)", "notes": con.notes,
        })
        rows.append(row)
    return rows


@dataclass(frozen=True)
class CounterexampleConfig:
    """The N = d = 2 counterexample :func:`counterexample` gives.

    Arguments:
        construction: ``"paper"`` (``W_V = ((1, w), (0, 1))``, ``W_Q = W_K = 0``, §4.3.1) or ``"ours"``
            (the surrogate ``W_V = ((0.95, 1), (0, 1))`` with ``W_QK = I``).
        w: paper only, ``w > 1`` (default 2).
        measure: paper only, also iterate the map (each arc's measured limit, and token 2's basin of B
            while token 1 has not converged).
    """

    construction: Literal["paper", "ours"] = "paper"
    w: float | None = None
    measure: bool = False

    def __post_init__(self) -> None:
        from rankcollapse.equilibria.counterexample_paper import check_w

        check_choice("construction", self.construction, CONSTRUCTIONS)
        if self.construction == "ours":
            if self.w is not None:
                raise RankCollapseError(
                    "w applies only to construction paper (ours fixes W_V = ((0.95, 1), (0, 1)))"
                )
            if self.measure:
                raise RankCollapseError("measure applies only to construction paper")
        elif self.w is not None:
            check_w(self.w)


def counterexample(config: CounterexampleConfig, out: str | Path | None = None,
                   existing: Any = "refuse") -> dict[str, Any]:
    """The closed forms of ``config``'s counterexample (A, B, the invariant arcs and their limits; ours:
    the fixed points and the basin arc), and with ``out`` Figs. 1 and 5 and the numbers written there
    through the output layer (``existing``: the rule for an earlier run in ``out``; the paths under
    ``"files"``)."""
    if config.construction == "ours":
        from rankcollapse.equilibria.plots import portrait_numbers, write_portrait

        numbers: dict[str, Any] = {}
        if out is not None:
            write_figures(out, "counterexample", write_portrait, existing)
        numbers.update(portrait_numbers())
        numbers["source"] = "ours (surrogate W_V = ((0.95, 1), (0, 1)), W_QK = I)"
        return numbers
    from rankcollapse.equilibria.counterexample_paper import (
        DEFAULT_W,
        arc_limits_by_iteration,
        moving_token1,
        paper_counterexample,
    )
    from rankcollapse.equilibria.plots_paper import write_paper_portrait

    value = DEFAULT_W if config.w is None else float(config.w)
    obj = paper_counterexample(value).to_dict()
    if config.measure:
        obj["measured_arc_limits"] = arc_limits_by_iteration(value)
        obj["token1_not_converged"] = moving_token1(value)
    if out is not None:
        obj["files"] = write_figures(
            out, "counterexample", lambda folder: write_paper_portrait(folder, value), existing
        )
    return obj


@dataclass(frozen=True)
class PortraitConfig:
    """Figures 1 and 5 :func:`portrait` draws.

    Arguments:
        construction: ``"paper"`` (``W_V = ((1, w), (0, 1))``, ``W_Q = W_K = 0``) or ``"ours"`` (the
            surrogate ``W_V = ((a, s), (0, 1))``, ``W_QK = I``).
        w: paper only, ``w > 1`` (default 2).
        a, s: ours only, the second eigenvalue ``0 < a < 1`` (default 0.95) and the shear (default 1).
    """

    construction: Literal["paper", "ours"] = "paper"
    w: float | None = None
    a: float | None = None
    s: float | None = None

    def __post_init__(self) -> None:
        from rankcollapse.equilibria.counterexample_paper import check_w

        check_choice("construction", self.construction, CONSTRUCTIONS)
        if self.construction == "paper":
            _refuse("construction paper", a=self.a, s=self.s)
            if self.w is not None:
                check_w(self.w)
        else:
            _refuse("construction ours", w=self.w)
            if self.a is not None:
                check_float("a", self.a, low=0.0, high=1.0)
                if not 0 < self.a < 1:
                    raise RankCollapseError(f"a must be strictly between 0 and 1, got {self.a:g}")
            if self.s is not None:
                check_float("s", self.s)


def portrait(config: PortraitConfig, out: str | Path, existing: Any = "refuse") -> dict[str, Path]:
    """Draw ``config``'s Figures 1 and 5 and their numbers into ``out`` (through the output layer;
    ``existing``: the rule for an earlier portrait there); returns the paths written, by name."""
    if config.construction == "paper":
        from rankcollapse.equilibria.counterexample_paper import DEFAULT_W
        from rankcollapse.equilibria.plots_paper import write_paper_portrait

        value = DEFAULT_W if config.w is None else float(config.w)
        return write_figures(out, "portrait", lambda folder: write_paper_portrait(folder, value), existing)
    from rankcollapse.equilibria.counterexample import counterexample_2d
    from rankcollapse.equilibria.plots import write_portrait

    a = 0.95 if config.a is None else float(config.a)
    s = 1.0 if config.s is None else float(config.s)
    cx = counterexample_2d([[a, s], [0.0, 1.0]])
    return write_figures(out, "portrait", lambda folder: write_portrait(folder, cx), existing)


#: Every file ``portrait`` / ``counterexample --out`` wrote before the marker listed a run's files (a folder
#: from then is replaced by these names; since, by the marker's manifest).
PORTRAIT_FILES = (*(f"{name}.{ext}" for name in ("figure1", "figure5", "paper_figure1", "paper_figure5")
                    for ext in ("png", "pdf")), "portrait.json", "paper_counterexample.json")


def write_figures(out: str | Path, command: str, job: Any, existing: Any = "refuse") -> Any:
    """``job(folder)`` inside the output layer (:func:`edge.folder.write_folder`: staged, published when the
    job returns; an earlier run of ``command`` there under ``existing``'s rule)."""
    from rankcollapse.edge.folder import write_folder

    return write_folder(out, command, job, outputs=PORTRAIT_FILES, existing=existing)
