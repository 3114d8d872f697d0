"""Regenerate ``src/rankcollapse/equilibria/designed_data.py`` from scratch (our designed equilibria).

For every cell (n, k) with 3 <= k <= n <= 6: seeds 0, 1, 2, ... until pass 1 of
``rankcollapse.equilibria.design.optimise_design`` reaches a tangent spectral radius below 0.9; pass 2
refines that result (``design.PASSES``); then the stored numbers are recomputed from the parameters: the
spectral radius, the largest transient growth ``max_t ||J^t||_2`` (t <= 80) and the basin-radius ladder
(``design.LADDER``: the largest radius at which at least half of 64 inputs around the equilibrium, seed 7,
d = k, converge within 2000 layers).

    python scripts/regenerate_designed.py                  # every cell, rewrites designed_data.py
    python scripts/regenerate_designed.py --cells 3,3 4,3  # only these cells, printed (file untouched)
    python scripts/regenerate_designed.py --out other.py   # every cell, written elsewhere

One cell takes seconds (n = k = 3) to a few minutes (n = k = 6) on one CPU thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from rankcollapse.edge.atomic import atomic_write
from rankcollapse.equilibria.design import design_entry
from rankcollapse.equilibria.design_checks import basin_ladder, entry_spectral_radius, entry_transient_growth

CELLS = [(n, k) for k in range(3, 7) for n in range(k, 7)]
DATA = Path(__file__).resolve().parents[1] / "src" / "rankcollapse" / "equilibria" / "designed_data.py"
HEADER = '''"""Stored designs for ``construct_rank_k``, 3 <= k <= 6 (scripts/regenerate_designed.py writes it;
do not edit by hand). Ours, not the paper's.

One entry per (n, k): ``params`` for ``build_design`` (beta, log lambda_1..k-1, unnormalised core rows),
the seed of ``optimise_design`` pass 1 that found it (pass 2 refines it, ``design.PASSES``), the tangent
spectral radius, the largest transient growth ``max_t ||J^t||_2`` (t <= 80), and ``basin_radius``: the
largest radius in the ladder ``design.LADDER`` at which at least half of 64 inputs drawn around the
equilibrium (seed 7, d = k) converge to it within 2000 layers (``basin_fraction_at_radius``).
See docs/equilibria.md, "Equilibria of every rank".
"""

DESIGNS: list[dict] = [
'''


def regenerate(n: int, k: int, max_seed: int = 20) -> dict:
    """Every pass and the ladder for one cell; raises RuntimeError if no seed works."""
    for seed in range(max_seed):
        entry = design_entry(n, k, seed)
        if entry is None:
            continue
        params = entry.pop("params")
        entry["spectral_radius"] = entry_spectral_radius({**entry, "params": params})
        entry["max_transient_growth"] = entry_transient_growth({**entry, "params": params})
        radius, frac = basin_ladder({**entry, "params": params})
        if radius == 0.0:
            continue
        entry.update({"basin_radius": radius, "basin_fraction_at_radius": frac, "params": params})
        return entry
    raise RuntimeError(f"no design found for n={n}, k={k} with seeds < {max_seed}")


def render(entries: list[dict]) -> str:
    """The text of designed_data.py."""
    lines = [HEADER]
    for e in entries:
        head = [f"{json.dumps(key)}: {json.dumps(value)}" for key, value in e.items() if key != "params"]
        text, row = [], "    {"
        for item in head:  # wrap the scalar fields at ~100 characters
            if len(row) + len(item) > 100:
                text.append(row.rstrip() + "\n")
                row = "     "
            row += item + ", "
        text.append(row.rstrip() + "\n")
        lines.extend(text)
        lines.append('     "params": [\n')
        for i in range(0, len(e["params"]), 4):
            lines.append("         " + " ".join(f"{v!r}," for v in e["params"][i:i + 4]) + "\n")
        lines.append("     ]},\n")
    lines.append("]\n")
    return "".join(lines).replace("true", "True").replace("false", "False")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", help="n,k pairs (default: every cell; then the file is written)")
    ap.add_argument("--out", type=Path, default=None, help="write here instead of designed_data.py")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cells = [tuple(int(v) for v in c.split(",")) for c in args.cells] if args.cells else CELLS
    entries = []
    for n, k in cells:
        t0 = time.time()
        e = regenerate(n, k)
        entries.append(e)
        print(f"n={n} k={k} seed={e['seed']} pass1={e['pass1_spectral_radius']:.4f} "
              f"spectral_radius={e['spectral_radius']:.4f} growth={e['max_transient_growth']:.3g} "
              f"basin_radius={e['basin_radius']:g} fraction={e['basin_fraction_at_radius']:.4f} "
              f"({time.time() - t0:.0f} s)", flush=True)
    if args.cells and args.out is None:
        return 0
    atomic_write(args.out or DATA, render(entries))
    print(f"wrote {args.out or DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
