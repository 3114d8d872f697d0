"""The device path against the CPU: ``analyze``, ``model_curves``, ``model_geometry`` and the simulator
on ``--device`` give the CPU's rows to rounding, and batches on the device agree with one batch.

    .venv/bin/python benchmarks/check_device.py --device cuda [--rtol 1e-9]

Prints one line per check (``ok`` / ``FAIL`` with the largest relative difference) and exits 1 on a
failure. float64 throughout, tiny random-init models (built offline), well under a minute on a GPU.
On the CPU (``--device cpu``) every check compares the CPU with itself: a smoke test of this script.
Batches on CUDA are compared to rounding, not bitwise: cuBLAS may pick kernels by batch size.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any


def _largest_difference(rows: list[dict[str, Any]], other: list[dict[str, Any]]) -> float:
    """The largest relative difference between two lists of rows of the same columns (inf: they differ in
    shape, in a non-number, or in where a number is NaN)."""
    if len(rows) != len(other):
        return math.inf
    worst = 0.0
    for a, b in zip(rows, other, strict=True):
        if list(a) != list(b):
            return math.inf
        for k, x in a.items():
            y = b[k]
            if isinstance(x, float) and isinstance(y, float):
                if math.isnan(x) or math.isnan(y):
                    if math.isnan(x) != math.isnan(y):
                        return math.inf
                    continue
                worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-300))
            elif x != y and k not in ("device", "batch_size"):
                return math.inf
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rtol", type=float, default=1e-9)
    args = parser.parse_args()

    from rankcollapse.core.execution import parse_device
    from rankcollapse.experiments.kit.tasks.curves import model_curves, model_geometry, simulate_curves
    from rankcollapse.models import AnalyzeConfig, analyze

    device = str(parse_device(args.device, "float64"))
    failed = 0

    def check(name: str, cpu: list[dict[str, Any]], there: list[dict[str, Any]], rtol: float) -> None:
        nonlocal failed
        worst = _largest_difference(cpu, there)
        ok = worst <= rtol
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(cpu)} rows, largest relative difference {worst:.3g}")

    start = time.perf_counter()
    for mode, extra in (("full", {}), ("attn", {"mask": "causal"}), ("attn+ln", {"diagnostics": True})):
        base = {
            "model": "tiny:bert",
            "mode": mode,
            "layers": 6,
            "samples": 7,
            "tokens": 32,
            "dtype": "float64",
            **extra,
        }
        cpu = analyze(AnalyzeConfig(**base)).rows
        check(
            f"analyze {mode}{' ' + str(extra) if extra else ''} on {device}",
            cpu,
            analyze(AnalyzeConfig(**base, device=device)).rows,
            args.rtol,
        )
        check(
            f"analyze {mode} on {device}, batches of 3",
            cpu,
            analyze(AnalyzeConfig(**base, device=device, batch_size=3)).rows,
            args.rtol,
        )
    curves = {
        "model": "tiny:gpt2",
        "variants": ["attn", "attn+ln", "full"],
        "masks": ["complete", "causal"],
        "layers": 6,
        "samples": 5,
        "tokens": 24,
        "dtype": "float64",
        "seed": 0,
    }
    cpu = model_curves(dict(curves), lambda t: None).rows
    for size in (None, 2):
        there = model_curves(
            dict(curves), lambda t: None, execution={"device": device, "batch_size": size}
        ).rows
        check(f"model_curves on {device}, batch {size or 'all'}", cpu, there, args.rtol)
    geometry = {
        "model": "tiny:bert,layers=8",
        "layers": 8,
        "samples": 5,
        "tokens": 24,
        "dtype": "float64",
        "spectrum_samples": 2,
        "cosine_samples": 2,
    }
    cpu = model_geometry(dict(geometry), lambda t: None).rows
    there = model_geometry(dict(geometry), lambda t: None, execution={"device": device, "batch_size": 2}).rows
    check(f"model_geometry on {device}, batches of 2", cpu, there, args.rtol)
    sim = {
        "mask": "causal",
        "n": 16,
        "d": 8,
        "layers": 32,
        "batch": 4,
        "preset": "attn+sphere",
        "seed": 0,
        "metrics": ["mu", "mu_rel"],
    }
    cpu = simulate_curves(dict(sim), lambda t: None).rows
    check(
        f"simulate_curves on {device}",
        cpu,
        simulate_curves(dict(sim), lambda t: None, execution={"device": device}).rows,
        args.rtol,
    )
    print(f"{failed} failed, {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
