"""`rankcollapse equilibria` (equilibria of the LayerNorm dynamics) and `rankcollapse portrait` (Figs. 1, 5).

Three modes of `equilibria`: ``--construction paper`` (Theorem 3's bidiagonal W_V: every equilibrium of
every rank, enumerated), ``--construction ours`` (our designed stable equilibria, one per rank), and
``--value FILE`` (search any W_V from random starts under ``--mask``). Options that do not apply in a
mode are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rankcollapse.cli.app import app
from rankcollapse.cli.options import existing, out_option, overwrite_option, seed_option, threads_option
from rankcollapse.core.names import quantity as q
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.messages import note

if TYPE_CHECKING:
    pass

CONSTRUCTIONS = ("paper", "ours")


@app.command("equilibria")
def equilibria_command(
    tokens: int = typer.Option(None, "--tokens", help=q("tokens").help("required, 1..64")),
    d: int = typer.Option(..., "--d", help=q("d").help("1..64")),
    construction: str = typer.Option(
        None,
        "--construction",
        help="paper: Theorem 3's bidiagonal W_V "
        "(needs N = d), every equilibrium enumerated; ours (default): our designed stable "
        "equilibrium of each rank. Refused with --value (a search).",
    ),
    w: float = typer.Option(None, "--w", help="paper only: the superdiagonal w > 1 of W_V (default N)."),
    family: str = typer.Option(
        None,
        "--family",
        help="paper only: 'all' branches (default) or the paper's own family (2^k of rank k).",
    ),
    rank: int = typer.Option(
        None, "--rank", help=q("equilibrium_rank").help("only those of this rank, 1 <= k <= min(N, d)")
    ),
    value: Path = typer.Option(
        None,
        "--value",
        help="Search this W_V (a d x d .npy file, row convention "
        "x -> x W_V) from random starts instead of a construction.",
    ),
    mask: str = typer.Option(
        None, "--mask", help=q("mask").help("--value only (see 'rankcollapse mask'); default causal")
    ),
    d_qk: float = typer.Option(
        None,
        "--d-qk",
        help=q("d_qk").help("--value only, W_Q W_K^T = I (default 1)"),
    ),
    starts: int = typer.Option(
        None,
        "--starts",
        help="Random starts (ours, --value: also the basin sample, "
        "default 256; paper: nearby starts per equilibrium, default 8).",
    ),
    layers: int = typer.Option(None, "--layers", help=q("layers").help("iterated from each start (default "
                               "2000)")),
    seed: int = seed_option("the random starts"),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per equilibrium (JSON lines)."),
    threads: int = threads_option(1),
) -> None:
    """Find and verify equilibria of X -> D A(X) X W_V (the theory's sphere LayerNorm)."""
    from rankcollapse.equilibria.entry import EquilibriaConfig, equilibria

    if tokens is None:
        raise RankCollapseError("missing option --tokens (tokens N, 1..64)")
    config = EquilibriaConfig(
        tokens=tokens, d=d, construction=construction, w=w, family=family, rank=rank, value=value, mask=mask,
        d_qk=d_qk, starts=starts,
        layers=2000 if layers is None else layers, seed=seed, threads=threads,
    )
    rows = equilibria(config, note=note)
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
        note("no equilibrium found" + (" of that rank" if rank else "; raise --layers or --starts"))


@app.command("portrait")
def portrait_command(
    out: Path = out_option("Figs. 1 and 5 (.png, .pdf) and the numbers"),
    overwrite: bool = overwrite_option("portrait"),
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
    from rankcollapse.edge.folder import check_output_folder
    from rankcollapse.equilibria.entry import PortraitConfig, portrait

    config = PortraitConfig(construction=construction, w=w, a=a, s=s)
    policy = existing(overwrite)  # the one rule: never replaced silently
    check_output_folder(out, "portrait", existing=policy)  # a file, a foreign or unwritable folder, ...
    paths = portrait(config, out, policy)
    for key, p in paths.items():
        print(f"{key}: {p}")
