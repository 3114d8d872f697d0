"""`rankcollapse equilibria` (equilibria of the LayerNorm dynamics) and `rankcollapse portrait` (Figs. 1, 5).

Three modes of `equilibria`: ``--construction paper`` (Theorem 3's bidiagonal W_V: every equilibrium of
every rank, enumerated), ``--construction ours`` (our designed stable equilibria, one per rank), and
``--value FILE`` (search any W_V from random starts under ``--mask``). Options that do not apply in a
mode are refused.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rankcollapse.cli.app import app
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote

if TYPE_CHECKING:
    from rankcollapse.edge.folder import Existing

CONSTRUCTIONS = ("paper", "ours")


def _load_value(path: Path, d: int) -> Any:
    import numpy as np
    import torch

    from rankcollapse.edge.inputs import read_npy

    def check(shape: tuple[int, ...], dtype: object) -> None:  # before any data is read
        if shape != (d, d):
            raise RankCollapseError(
                f"value matrix in {quote(str(path), 80)} has shape {shape}; expected ({d}, {d})"
            )

    arr = read_npy(path, "value file", check)
    if np.iscomplexobj(arr) or not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr).all():
        raise RankCollapseError(f"value matrix in {quote(str(path), 80)} must be finite real numbers")
    return torch.as_tensor(arr.astype(np.float64))


def _refuse(mode: str, **given: object) -> None:
    """RankCollapseError for the first option given (not None / False) that does not apply in ``mode``."""
    for flag, value in given.items():
        if value is not None and value is not False:
            raise RankCollapseError(f"--{flag.replace('_', '-')} does not apply to {mode}")


@app.command("equilibria")
def equilibria_command(
    n: int = typer.Option(..., "--n", help="Tokens N (>= 1)."),
    d: int = typer.Option(..., "--d", help="Features d (>= 1)."),
    construction: str = typer.Option(
        "ours",
        "--construction",
        help="paper: Theorem 3's bidiagonal W_V "
        "(needs N = d), every equilibrium enumerated; ours: our designed stable "
        "equilibrium of each rank. Ignored with --value (refused if given).",
    ),
    w: float = typer.Option(None, "--w", help="paper only: the superdiagonal w > 1 of W_V (default N)."),
    family: str = typer.Option(
        None,
        "--family",
        help="paper only: 'all' branches (default) or the paper's own family (2^k of rank k).",
    ),
    rank: int = typer.Option(None, "--rank", help="Only equilibria of rank K (1 <= K <= min(N, d))."),
    value: Path = typer.Option(
        None,
        "--value",
        help="Search this W_V (a d x d .npy file, row convention "
        "x -> x W_V) from random starts instead of a construction.",
    ),
    mask: str = typer.Option(
        None, "--mask", help="--value only: mask spec (see 'rankcollapse mask'); default causal."
    ),
    d_qk: float = typer.Option(
        None,
        "--d-qk",
        help="--value only: d_QK under the square root of the logits, W_Q W_K^T = I (default 1).",
    ),
    temperature: float = typer.Option(None, "--temperature", hidden=True, help="Deprecated alias of --d-qk."),
    starts: int = typer.Option(
        None,
        "--starts",
        help="Random starts (ours, --value: also the basin sample, "
        "default 256; paper: nearby starts per equilibrium, default 8).",
    ),
    steps: int = typer.Option(2000, "--steps", help="Layers iterated from each start."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random starts."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per equilibrium (JSON lines)."),
    threads: int = typer.Option(1, "--threads", help="torch intra-op threads (default 1)."),
) -> None:
    """Find and verify equilibria of X -> D A(X) X W_V (the theory's sphere LayerNorm)."""
    import torch

    from rankcollapse.edge.deprecation import renamed

    deprecated = temperature is not None
    d_qk = renamed("--d-qk", d_qk, "--temperature", temperature)
    if n < 1 or d < 1 or n > 64 or d > 64:
        raise RankCollapseError(f"--n and --d must be in 1..64, got n={n}, d={d}")
    if rank is not None and not 1 <= rank <= min(n, d):
        raise RankCollapseError(f"--rank must be in 1..min(N, d) = 1..{min(n, d)}, got {rank}")
    if starts is not None and not 1 <= starts <= 100_000:
        raise RankCollapseError(f"--starts must be in 1..100000, got {starts}")
    if not 1 <= steps <= 1_000_000:
        raise RankCollapseError(f"--steps must be in 1..1000000, got {steps}")
    if d_qk is not None and not (d_qk > 0 and math.isfinite(d_qk)):
        raise RankCollapseError(f"--d-qk must be positive and finite, got {d_qk}")
    if not 1 <= threads <= 256:
        raise RankCollapseError(f"--threads must be in 1..256, got {threads}")
    if construction not in CONSTRUCTIONS:
        raise RankCollapseError(
            f"--construction must be one of {', '.join(CONSTRUCTIONS)}, got {quote(construction, 40)}"
        )
    if not 0 <= seed < 2**63:
        raise RankCollapseError(f"--seed must be in 0..2^63-1, got {str(seed)[:40]}")
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(seed)
    qk = {"temperature" if deprecated else "d_qk": d_qk}
    if value is not None:
        if construction != "ours":
            raise RankCollapseError(
                "--construction does not apply with --value (a search, not a construction)"
            )
        _refuse("--value (a search)", w=w, family=family)
        rows = _search(
            value, n, d, mask or "causal", 1.0 if d_qk is None else d_qk, starts or 256, steps, gen, rank,
        )
    elif construction == "paper":
        _refuse("--construction paper (its mask is causal, W_Q = W_K = 0)", mask=mask, **qk)
        rows = _paper(n, d, float(n) if w is None else w, family or "all", rank, starts or 8, steps, seed)
    else:
        _refuse(
            "--construction ours (each construction fixes its own mask and W_QK)",
            mask=mask,
            **qk,
            w=w,
            family=family,
        )
        rows = _ours(n, d, rank, starts or 256, steps, gen)
    for row in rows:
        if as_json:
            print(json.dumps(row))
        elif "unstable" in row:
            print(
                f"rank={row['rank']} family={row['family']} signs={row['signs']} "
                f"residual={row['residual']:.1e} "
                f"unstable={row['unstable']} neutral={row['neutral']} stable={row['stable']} "
                f"nearby={row['convergence']['kind']}"
            )
        else:
            print(
                f"rank={row['rank']} residual={row['residual']:.2e} "
                f"spectral_radius={row['spectral_radius']:.4f} "
                f"stable={row['stable']} basin={row['basin_fraction']:.3f} "
                f"CI=[{row['basin_ci'][0]:.3f}, {row['basin_ci'][1]:.3f}] mask={row['mask']}"
            )
    if not rows:
        print(
            "rankcollapse: note: no equilibrium found"
            + (" of that rank" if rank else "; raise --steps or --starts"),
            file=sys.stderr,
        )


def _search(value: Path, n: int, d: int, mask: str, d_qk: float, starts: int, steps: int, gen: Any,
            rank: int | None) -> list[dict[str, Any]]:
    from rankcollapse.equilibria import find_equilibria, resolve_mask

    w_v = _load_value(value, d)
    m = resolve_mask(mask, n).matrix
    rows = []
    for eq in find_equilibria(w_v, n, m, None, d_qk, starts=starts, steps=steps, generator=gen):
        if rank is not None and eq.rank != rank:
            continue
        row = eq.to_dict()
        row.update({"n": n, "d": d, "mask": mask, "d_qk": d_qk, "value": w_v.tolist(), "source": str(value)})
        rows.append(row)
    return rows


def _paper(n: int, d: int, w: float, family: str, rank: int | None, starts: int, steps: int,
           seed: int) -> list[dict[str, Any]]:
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

    w = check_size(n, d, w)
    w_v = bidiagonal_value(d, w)
    eqs = [e for e in enumerate_equilibria(w_v, n, family) if rank is None or e.rank == rank]
    mask, qk = causal_mask(n), zero_qk(d)
    from rankcollapse.equilibria.finder import residual

    conv = convergence_from_nearby(eqs, w_v, starts=starts, steps=steps, seed=seed)
    directions = directional_convergence(eqs, w_v, steps=steps)
    rows = []
    for e, c, dirs in zip(eqs, conv, directions, strict=True):
        mods = tangent_moduli(e.x, w_v, mask, qk, block_triangular=True)
        row = e.to_dict()
        row.update(direction_counts(mods))
        row.update(
            {
                "residual": residual(e.x, w_v, mask, qk),
                "moduli": [float(v) for v in mods],
                "neutral_tol": NEUTRAL_TOL,
                "convergence": c,
                "directions": dirs,
                "stable_rank": float(stable_rank(e.x)),
                "n": n,
                "d": d,
                "w": w,
                "construction": "paper",
                "mask": "causal",
                "source": SOURCE,
            }
        )
        if e.rank == min(n, d):
            row["srank_bound"] = srank_bound(n, w)
        rows.append(row)
    return rows


def _ours(n: int, d: int, rank: int | None, starts: int, steps: int, gen: Any) -> list[dict[str, Any]]:
    from rankcollapse.equilibria import construct_rank_k, verify_equilibrium
    from rankcollapse.equilibria.construction import constructed_ranks

    rows = []
    for k in [rank] if rank is not None else range(1, min(n, d) + 1):
        if rank is None and k not in constructed_ranks(n):
            print(f"rankcollapse: note: no construction of ours for rank {k}", file=sys.stderr)
            continue
        con = construct_rank_k(n, d, k)
        eq = verify_equilibrium(
            con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk, samples=starts, steps=steps, generator=gen
        )
        local = verify_equilibrium(
            con.x,
            con.w_v,
            con.mask_tensor(),
            con.w_qk,
            con.d_qk,
            steps=steps,
            init=con.neighbourhood_inputs(starts, con.basin_radius, gen),
        )
        row = eq.to_dict()
        row.update(
            {
                "n": n,
                "d": d,
                "target_rank": k,
                "mask": con.mask,
                "value": con.w_v.tolist(),
                "w_qk": None if con.w_qk is None else con.w_qk.tolist(),
                "d_qk": con.d_qk,
                "local_basin_radius": con.basin_radius,
                "local_basin_fraction": local.basin_fraction,
                "local_basin_ci": list(local.basin_ci),
                "construction": "ours",
                "source": "ours (designed stable equilibria)",
                "notes": con.notes,
            }
        )
        rows.append(row)
    return rows


@app.command("portrait")
def portrait_command(
    out: Path = typer.Option(
        ..., "--out", help="Output folder for Figs. 1 and 5 (.png, .pdf) and the numbers."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an earlier portrait run in --out (without it, replacing is "
        "deprecated: a warning now, refused in the next release)."
    ),
    construction: str = typer.Option(
        "paper",
        "--construction",
        help="paper: W_V = ((1, w), (0, 1)), "
        "W_Q = W_K = 0; ours: the surrogate W_V = ((a, s), (0, 1)), W_QK = I.",
    ),
    w: float = typer.Option(None, "--w", help="paper only: w > 1 in W_V = ((1, w), (0, 1)) (default 2)."),
    a: float = typer.Option(
        None, "--a", help="ours only: W_V = ((a, s), (0, 1)), second eigenvalue 0 < a < 1 (default 0.95)."
    ),
    s: float = typer.Option(None, "--s", help="ours only: W_V = ((a, s), (0, 1)), shear s (default 1)."),
) -> None:
    """Draw Figures 1 and 5 of the N = 2, d = 2 counterexample (the paper's, or ours) and their numbers."""
    if construction not in CONSTRUCTIONS:
        raise RankCollapseError(
            f"--construction must be one of {', '.join(CONSTRUCTIONS)}, got {quote(construction, 40)}"
        )
    from rankcollapse.edge.folder import check_output_folder

    existing = "replace" if overwrite else "deprecated-replace"  # the one rule: refuse, after one release
    check_output_folder(out, "portrait", existing=existing)  # a file, a foreign or unwritable folder, ...
    if construction == "paper":
        _refuse("--construction paper", a=a, s=s)
        from rankcollapse.equilibria.counterexample_paper import DEFAULT_W, check_w
        from rankcollapse.equilibria.plots_paper import write_paper_portrait

        value = check_w(DEFAULT_W if w is None else w)
        paths = write_into(out, "portrait", lambda folder: write_paper_portrait(folder, value), existing)
    else:
        _refuse("--construction ours", w=w)
        a_v, s_v = 0.95 if a is None else a, 1.0 if s is None else s
        if not (0 < a_v < 1) or not math.isfinite(s_v):
            raise RankCollapseError(f"need 0 < a < 1 and finite s, got a={a_v}, s={s_v}")
        from rankcollapse.equilibria import counterexample_2d, write_portrait

        cx = counterexample_2d([[a_v, s_v], [0.0, 1.0]])
        paths = write_into(out, "portrait", lambda folder: write_portrait(folder, cx), existing)
    for key, p in paths.items():
        print(f"{key}: {p}")


#: Every file ``portrait`` / ``counterexample --out`` wrote before the marker listed a run's files (a folder
#: from then is replaced by these names; since, by the marker's manifest).
PORTRAIT_FILES = (*(f"{name}.{ext}" for name in ("figure1", "figure5", "paper_figure1", "paper_figure5")
                    for ext in ("png", "pdf")), "portrait.json", "paper_counterexample.json")


def write_into(out: Path, command: str, job: Callable[[Path], Any], existing: Existing = "refuse") -> Any:
    """``job(folder)`` inside the output layer (:func:`edge.folder.write_folder`: staged, published
    when the job returns; an earlier run of ``command`` there under ``existing``'s rule)."""
    from rankcollapse.edge.folder import write_folder

    return write_folder(out, command, job, outputs=PORTRAIT_FILES, existing=existing)
