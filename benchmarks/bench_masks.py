"""Benchmark: full mask analysis time against the number of edges (prints figures; not a test).

Run: ``.venv/bin/python benchmarks/bench_masks.py [--specs window:w=8,...] [--sizes 2048,...] [--repeat 3]``

For each spec and n it prints the sparse-build time, the analysis time (SCCs, closed components,
exact eccentricities of all centers, hop distances), the BFS sources used, the time per edge and
the peak traced memory next to the n^2 bytes a dense boolean matrix would take. Target: the
analysis of ``window:w=8`` at n = 16384 under 2 s, time per edge roughly constant in n.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from rankcollapse.masks import analyze_mask, parse_mask


def bench(spec: str, n: int, repeat: int) -> dict[str, float]:
    mask = parse_mask(spec)
    best_build, best_total = float("inf"), float("inf")
    analysis = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        sparse = mask.sparse(n)
        t1 = time.perf_counter()
        analysis = analyze_mask(mask, n)  # includes its own sparse build
        t2 = time.perf_counter()
        best_build, best_total = min(best_build, t1 - t0), min(best_total, t2 - t1)
    tracemalloc.start()
    analyze_mask(mask, n)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert analysis is not None
    return {
        "edges": sparse.nnz,
        "build_s": best_build,
        "analysis_s": best_total,
        "ns_per_edge": 1e9 * best_total / sparse.nnz,
        "bfs": analysis.bfs_runs,
        "radius": analysis.radius if analysis.radius is not None else -1,
        "peak_mb": peak / 2**20,
        "dense_mb": n * n / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--specs",
        default="window:w=8;causal-window:w=8;longformer:w=8,global=2;window:w=8&block:size=1024|causal-window:w=2",
        help="';'-separated mask specs",
    )
    parser.add_argument("--sizes", default="2048,4096,8192,16384,32768,65536")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    specs = [s.strip() for s in args.specs.split(";") if s.strip()]
    sizes = [int(x) for x in args.sizes.split(",")]
    header = (f"{'spec':<46} {'n':>6} {'edges':>9} {'build s':>8} {'analysis s':>10} {'ns/edge':>8} "
              f"{'BFS':>4} {'radius':>6} {'peak MB':>8} {'n^2 MB':>8}")
    print(header)
    print("-" * len(header))
    for spec in specs:
        for n in sizes:
            r = bench(spec, n, args.repeat)
            print(f"{spec:<46} {n:>6} {r['edges']:>9} {r['build_s']:>8.4f} {r['analysis_s']:>10.4f} "
                  f"{r['ns_per_edge']:>8.1f} {r['bfs']:>4} {r['radius']:>6} {r['peak_mb']:>8.1f} "
                  f"{r['dense_mb']:>8.0f}")


if __name__ == "__main__":
    main()
