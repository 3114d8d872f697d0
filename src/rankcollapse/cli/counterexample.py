"""`rankcollapse counterexample`: the N = d = 2 counterexample's closed forms (the paper's, or ours)."""

from __future__ import annotations

import json
import math
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
    out: Path = typer.Option(
        None, "--out", help="Also write Figs. 1 and 5 (.png, .pdf) and the numbers here."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an earlier counterexample run in --out (without it, replacing is "
        "deprecated: a warning now, refused in the next release)."
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object: w, A, B, arcs (start, end, limit "
        "in radians on token 2's circle, token 1 at (0, 1)).",
    ),
) -> None:
    """Closed forms of the N = 2, d = 2 counterexample: A, B, the four invariant arcs and their limits."""
    if construction not in CONSTRUCTIONS:
        raise RankCollapseError(
            f"--construction must be one of {', '.join(CONSTRUCTIONS)}, got {quote(construction, 40)}"
        )
    existing = "replace" if overwrite else "deprecated-replace"  # the one rule: refuse, after one release
    if out is not None:
        from rankcollapse.edge.folder import check_output_folder

        check_output_folder(out, "counterexample", existing=existing)
    if construction == "ours":
        if w is not None:
            raise RankCollapseError(
                "--w applies only to --construction paper (ours fixes W_V = ((0.95, 1), (0, 1)))"
            )
        if measure:
            raise RankCollapseError("--measure applies only to --construction paper")
        from rankcollapse.equilibria.plots import portrait_numbers, write_portrait

        if out is not None:
            _write(out, write_portrait, existing)
        numbers = portrait_numbers()
        numbers["source"] = "ours (surrogate W_V = ((0.95, 1), (0, 1)), W_QK = I)"
        _print(numbers, as_json)
        return
    from rankcollapse.equilibria.counterexample_paper import (
        DEFAULT_W,
        arc_limits_by_iteration,
        check_w,
        moving_token1,
        paper_counterexample,
    )

    value = check_w(DEFAULT_W if w is None else w)
    obj = paper_counterexample(value).to_dict()
    if measure:
        obj["measured_arc_limits"] = arc_limits_by_iteration(value)
        obj["token1_not_converged"] = moving_token1(value)
    if out is not None:
        from rankcollapse.equilibria.plots_paper import write_paper_portrait

        obj["files"] = _write(out, lambda folder: write_paper_portrait(folder, value), existing)
    _print(obj, as_json)


#: Every file ``counterexample --out`` wrote before the marker listed a run's files (a folder from then is
#: replaced by these names; since, by the marker's manifest).
FILES = (*(f"{name}.{ext}" for name in ("figure1", "figure5", "paper_figure1", "paper_figure5")
           for ext in ("png", "pdf")), "portrait.json", "paper_counterexample.json")


def _write(out: Path, job: Callable[[Path], Any], existing: Existing) -> Any:
    """``job(folder)`` inside the output layer (:func:`edge.folder.write_folder`: staged, published
    when the job returns; an earlier counterexample run there under ``existing``'s rule)."""
    from rankcollapse.edge.folder import write_folder

    return write_folder(out, "counterexample", job, outputs=FILES, existing=existing)


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
