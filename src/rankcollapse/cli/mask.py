"""`rankcollapse mask SPEC --n N`: a mask's graph facts (SPEC §4) as text, JSON or a picture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from rankcollapse.cli.app import app
from rankcollapse.errors import RankCollapseError

PLOT_MAX_PIXELS = 1024
"""``--plot`` draws at most this many rows/columns; larger masks show the share of allowed pairs per cell."""


def _summary_lines(facts: dict[str, Any]) -> list[str]:
    n, radius = facts["n"], facts["radius"]
    centers = facts["center_nodes"]
    more = f", ... ({len(centers)} in all)" if len(centers) > 10 else ""
    shown = ", ".join(map(str, centers[:10])) + more
    sizes = f"{facts['closed_component_sizes'][:10]}{' ...' if facts['num_closed_components'] > 10 else ''}"
    lines = [
        f"mask {facts['spec']}  (n = {n}, {facts['edges']} allowed pairs incl. self-loops, "
        f"density {facts['edges'] / n**2:.4g})",
        f"  self-loops:               {'yes' if facts['self_loops'] else 'NO'}",
        f"  strongly connected:       {'yes' if facts['strongly_connected'] else 'no'} "
        f"({facts['num_components']} strongly connected components)",
        f"  closed components:        {facts['num_closed_components']} "
        f"(sizes {sizes})",
        f"  quasi-strongly connected: {'yes' if facts['quasi_strongly_connected'] else 'no'}",
        f"  center nodes:             {shown if centers else 'none'}",
        f"  radius:                   {radius if radius is not None else 'undefined (no center)'}",
    ]
    if radius is not None:
        lines.append(
            f"  best center:              {facts['best_center']} (center eccentricities "
            f"{radius}..{facts['max_center_eccentricity']})"
        )
    if facts["band"] is not None:
        lo, hi = facts["band"]
        lines.append(f"  band:                     {lo} <= j - i <= {hi}")
    if facts["theorem1_applies"]:
        lines.append(
            f"Theorem 1 applies: self-loops and a center node, so pure masked attention collapses "
            f"exponentially, mu(X(t)) <= C (1 - eps^r)^(t / (2r)) with radius r = {radius}; "
            "a larger radius gives a slower rate bound (1 - eps^r)^(1/(2r))."
        )
    else:
        why = []
        if not facts["self_loops"]:
            why.append("some tokens lack self-loops")
        if not facts["quasi_strongly_connected"]:
            why.append(
                f"no center node ({facts['num_closed_components']} closed components, "
                "none reaches the others)"
            )
        lines.append(
            f"Theorem 1 does not apply: {'; '.join(why)}. Collapse to a single point need not happen "
            "(each closed component can keep its own limit)."
        )
    return lines


def plot_mask(sparse: Any, centers: Any, path: Path, title: str) -> None:
    """Draw the mask matrix (row = query i, column = key j), centers marked on the diagonal.

    For n > PLOT_MAX_PIXELS each cell is the share of allowed pairs in an f x f block (O(edges)).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = sparse.n
    f = -(-n // PLOT_MAX_PIXELS)
    cells = -(-n // f)
    rows = sparse.row_ids() // f
    counts = np.bincount(rows * cells + sparse.indices // f, minlength=cells * cells).reshape(cells, cells)
    sizes = np.bincount(np.arange(n) // f, minlength=cells).astype(np.float64)
    share = counts / np.outer(sizes, sizes)
    fig, ax = plt.subplots(figsize=(6, 6))
    extent = (-0.5, n - 0.5, n - 0.5, -0.5)
    ax.imshow(share, cmap="Greys", vmin=0, vmax=1, interpolation="nearest", extent=extent)
    if len(centers):
        marks = np.unique(np.asarray(centers) // f) * f + (f - 1) / 2
        # a red rug above the matrix at the center tokens' columns, plus diagonal dots when few
        ax.plot(marks, np.full(marks.shape, -0.5 - 0.01 * n), "|", color="tab:red", ms=8, clip_on=False,
                label="center nodes")
        if marks.size <= 200:
            ax.scatter(marks, marks, s=14, c="tab:red", zorder=3)
        ax.legend(loc="lower left", fontsize=8)
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    ax.set_title(title + (f"\n(each cell: share allowed in {f}x{f} block)" if f > 1 else ""), fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except (OSError, ValueError) as err:
        msg = f"cannot write plot {str(path)!r} ({err}); allowed: a writable .png path"
        raise RankCollapseError(msg) from None
    finally:
        plt.close(fig)


def _parse_n(text: str | None) -> int:
    """``--n`` is read here (not by Typer) so a missing or non-integer value is a one-line error."""
    if text is None:
        raise RankCollapseError("missing option --n N (sequence length); allowed: an integer >= 1")
    try:
        return int(text)
    except ValueError:
        raise RankCollapseError(f"--n {text!r} is not an integer; allowed: an integer >= 1") from None


@app.command("mask")
def mask_command(
    spec: str = typer.Argument(..., help="Mask spec, e.g. causal, window:w=4, 'causal&window:w=4', "
                               "'block:size=8|prefix:k=2'. Families: complete, causal, window:w, "
                               "causal-window:w, dilated:w,dilation, strided:stride, block:size, prefix:k, "
                               "longformer:w,global, bigbird:w,global,random,seed, sinks:w,sinks, "
                               "random:p,seed, file:PATH (docs/masks.md)."),
    n: str = typer.Option(None, "--n", metavar="N", help="Sequence length N (tokens), an integer >= 1."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (keys: docs/masks.md)."),
    full: bool = typer.Option(None, "--full/--summary", help="JSON: list per-token arrays (hop distances, "
                              "center eccentricities, closed components) in full, or only histograms. "
                              "Default: full iff N <= 4096. center_nodes is always listed in full."),
    plot: Path = typer.Option(None, "--plot", metavar="FILE.png",
                              help="Draw the mask matrix with its center nodes into FILE.png."),
) -> None:
    """Graph facts of a mask (edge j -> i iff token i attends to j): connectivity, centers, radius."""
    from rankcollapse.masks import parse_mask
    from rankcollapse.masks.graph import analyze_mask

    length = _parse_n(n)
    mask = parse_mask(spec)
    analysis = analyze_mask(mask, length)
    facts = analysis.to_dict(full=full)
    if plot is not None:
        title = f"{mask.spec}, n={length}, radius={analysis.radius}"
        plot_mask(mask.sparse(length), analysis.center_nodes, Path(plot), title)
        facts["plot"] = str(plot)
    if as_json:
        typer.echo(json.dumps(facts))
        return
    for line in _summary_lines(facts):
        typer.echo(line)
    if plot is not None:
        typer.echo(f"plot: {plot}")
