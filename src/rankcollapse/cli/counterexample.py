"""`rankcollapse counterexample`: the N = d = 2 counterexample's closed forms (the paper's, or ours)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rankcollapse.cli.app import app
from rankcollapse.cli.options import existing, out_option, overwrite_option

if TYPE_CHECKING:
    pass

CONSTRUCTIONS = ("paper", "ours")


@app.command("counterexample")
def counterexample_command(
    w: float = typer.Option(
        None,
        "--w",
        help="The paper's W_V = ((1, w), (0, 1)), w > 1 (default 2); only with --construction paper.",
    ),
    construction: str = typer.Option(
        "paper",
        "--construction",
        help="paper: W_V = ((1, w), (0, 1)), "
        "W_Q = W_K = 0 (the paper's §4.3.1); ours: the surrogate "
        "W_V = ((0.95, 1), (0, 1)) with W_QK = I.",
    ),
    measure: bool = typer.Option(
        False,
        "--measure",
        help="Also iterate the map: each arc's measured limit, "
        "and token 2's basin of B while token 1 has not converged (paper only).",
    ),
    out: Path = out_option("Figs. 1 and 5 (.png, .pdf) and the numbers", default=None, optional="Also write "
                           "the figures:"),
    overwrite: bool = overwrite_option("counterexample"),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object: w, A, B, arcs (start, end, limit "
        "in radians on token 2's circle, token 1 at (0, 1)).",
    ),
) -> None:
    """Closed forms of the N = 2, d = 2 counterexample: A, B, the four invariant arcs and their limits."""
    from rankcollapse.equilibria.entry import CounterexampleConfig, counterexample

    config = CounterexampleConfig(construction=construction, w=w, measure=measure)
    policy = existing(overwrite)  # the one rule: never replaced silently
    if out is not None:
        from rankcollapse.edge.folder import check_output_folder

        check_output_folder(out, "counterexample", existing=policy)
    _print(counterexample(config, out, policy), as_json)


def _print(obj: dict, as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps(
                obj,
                allow_nan=False,
                default=lambda v: None if isinstance(v, float) and not math.isfinite(v) else str(v),
            )
        )
        return
    if "arcs" in obj:
        typer.echo(
            f"w = {obj['w']:g}: A = ({obj['A'][0]:.6f}, {obj['A'][1]:.6f}), "
            f"B = ({obj['B'][0]:.6f}, {obj['B'][1]:.6f})  [{obj['source']}]"
        )
        for k, arc in enumerate(obj["arcs"], 1):
            typer.echo(
                f"arc {k}: ({arc['start']:.6f}, {arc['end']:.6f}) rad -> {arc['limit_name']} "
                f"({arc['limit'][0]:.6f}, {arc['limit'][1]:.6f})" + ("  [red segment]" if arc["red"] else "")
            )
        return
    arc = obj["basin_arc"]
    typer.echo(
        f"basin of B: ({arc['start']:.6f}, {arc['end']:.6f}) rad -> ({arc['target_point'][0]:.6f}, "
        f"{arc['target_point'][1]:.6f})  [{obj['source']}]"
    )
