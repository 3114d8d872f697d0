"""`rankcollapse equilibria` (find and verify LN equilibria) and `rankcollapse portrait` (Figs. 1 and 5)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import typer

from rankcollapse.cli.app import app
from rankcollapse.errors import RankCollapseError


def _load_value(path: Path, d: int):
    import numpy as np
    import torch

    if not path.is_file():
        raise RankCollapseError(f"value file {str(path)!r} does not exist")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as err:
        raise RankCollapseError(
            f"value file {str(path)!r} is not a .npy array ({type(err).__name__})") from None
    if arr.shape != (d, d):
        raise RankCollapseError(f"value matrix in {str(path)!r} has shape {arr.shape}; expected ({d}, {d})")
    if not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr).all():
        raise RankCollapseError(f"value matrix in {str(path)!r} must be finite real numbers")
    return torch.as_tensor(arr.astype(np.float64))


@app.command("equilibria")
def equilibria_command(
    n: int = typer.Option(..., "--n", help="Tokens N (>= 1)."),
    d: int = typer.Option(..., "--d", help="Features d (>= 1)."),
    rank: int = typer.Option(None, "--rank", help="Use the rank-K construction (1 <= K <= min(N, d))."),
    value: Path = typer.Option(None, "--value", help="Value matrix W_V as a d x d .npy file (row convention "
                               "x -> x W_V); equilibria are searched from random starts."),
    mask: str = typer.Option("causal", "--mask", help="Mask spec (see 'rankcollapse mask'); default causal."),
    starts: int = typer.Option(256, "--starts", help="Random initial inputs (also the basin sample)."),
    steps: int = typer.Option(2000, "--steps", help="Layers iterated from each start."),
    temperature: float = typer.Option(1.0, "--temperature", help="d_QK (W_Q W_K^T = I)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random starts."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per equilibrium (JSON lines)."),
    threads: int = typer.Option(1, "--threads", help="torch intra-op threads (default 1: these maps are tiny "
                                "and extra threads only contend)."),
) -> None:
    """Find and verify equilibria of X -> D A(X) X W_V.

    Without --value: for --rank K (or every K in 1..min(N, d)) the documented rank-K construction is used
    (its own value matrix and mask; see docs/equilibria.md) and its target equilibrium is verified, with
    the basin estimated from uniformly random inputs and from a small ball of inputs around it.
    With --value: equilibria reached from --starts
    random inputs under --mask are reported (sorted by basin fraction).
    """
    import torch

    from rankcollapse.equilibria import construct_rank_k, find_equilibria, resolve_mask, verify_equilibrium

    if n < 1 or d < 1:
        raise RankCollapseError(f"--n and --d must be >= 1, got n={n}, d={d}")
    if rank is not None and not 1 <= rank <= min(n, d):
        raise RankCollapseError(f"--rank must be in 1..min(N, d) = 1..{min(n, d)}, got {rank}")
    if starts < 1 or steps < 1:
        raise RankCollapseError(f"--starts and --steps must be >= 1, got {starts}, {steps}")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise RankCollapseError(f"--temperature must be positive and finite, got {temperature}")
    if threads < 1:
        raise RankCollapseError(f"--threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(seed)
    rows: list[dict] = []
    if value is not None:
        w_v = _load_value(value, d)
        m = resolve_mask(mask, n)
        for eq in find_equilibria(w_v, n, m, None, temperature, starts=starts, steps=steps, generator=gen):
            if rank is not None and eq.rank != rank:
                continue
            row = eq.to_dict()
            row.update({"n": n, "d": d, "mask": mask, "value": w_v.tolist(), "source": str(value)})
            rows.append(row)
    else:
        from rankcollapse.equilibria.construction import constructed_ranks

        for k in ([rank] if rank is not None else range(1, min(n, d) + 1)):
            if rank is None and k not in constructed_ranks(n):
                print(f"rankcollapse: note: no construction for rank {k} (see docs/equilibria.md)",
                      file=sys.stderr)
                continue
            con = construct_rank_k(n, d, k)
            eq = verify_equilibrium(con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk, samples=starts,
                                    steps=steps, generator=gen)
            local = verify_equilibrium(con.x, con.w_v, con.mask_tensor(), con.w_qk, con.d_qk, steps=steps,
                                       init=con.neighbourhood_inputs(starts, con.basin_radius, gen))
            row = eq.to_dict()
            row.update({"n": n, "d": d, "target_rank": k, "mask": con.mask, "value": con.w_v.tolist(),
                        "w_qk": None if con.w_qk is None else con.w_qk.tolist(), "d_qk": con.d_qk,
                        "local_basin_radius": con.basin_radius, "local_basin_fraction": local.basin_fraction,
                        "local_basin_ci": list(local.basin_ci), "source": "construction",
                        "construction": con.notes})
            rows.append(row)
    for row in rows:
        if as_json:
            print(json.dumps(row))
        else:
            print(f"rank={row['rank']} residual={row['residual']:.2e} "
                  f"spectral_radius={row['spectral_radius']:.4f} "
                  f"stable={row['stable']} basin={row['basin_fraction']:.3f} "
                  f"CI=[{row['basin_ci'][0]:.3f}, {row['basin_ci'][1]:.3f}] mask={row['mask']}")
    if not rows and not as_json:
        print("no settled equilibrium found; raise --steps or --starts")


@app.command("portrait")
def portrait_command(
    out: Path = typer.Option(..., "--out", help="Output folder for figure1/figure5 (.png, .pdf) and "
                             "portrait.json."),
    a: float = typer.Option(0.95, "--a", help="W_V = [[a, s], [0, 1]]: second eigenvalue a (0 < a < 1)."),
    s: float = typer.Option(1.0, "--s", help="W_V = [[a, s], [0, 1]]: shear s."),
) -> None:
    """Write Figs. 1 and 5 of the N = 2, d = 2 counterexample and its computed numbers."""
    from rankcollapse.equilibria import counterexample_2d, write_portrait

    if not (0 < a < 1) or not math.isfinite(s):
        raise RankCollapseError(f"need 0 < a < 1 and finite s, got a={a}, s={s}")
    paths = write_portrait(out, counterexample_2d([[a, s], [0.0, 1.0]]))
    for key, p in paths.items():
        print(f"{key}: {p}")
