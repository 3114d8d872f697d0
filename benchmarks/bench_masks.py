"""Benchmark: mask analysis time against edges, the per-length cache, schedules (prints figures; not a test).

Run: ``.venv/bin/python benchmarks/bench_masks.py [--specs window:w=8,...] [--sizes 2048,...] [--repeat 3]``

Three tables:

1. For each spec and n: the sparse-build time, the analysis time on the path ``analysis(n)`` takes
   (``intervals`` for interval masks, ``sparse`` BFS otherwise) and on the sparse BFS path forced
   (SCCs, closed components, exact eccentricities of all centers, hop distances), the BFS sources
   used, the time per edge and the peak traced memory next to the n^2 bytes a dense boolean would take.
2. The cache: ``parse_mask(spec).analysis(n)`` the first time and again (one object per spec).
3. Schedules: ``analyze_schedule`` on the intervals and the bitset paths.

Each timing is the best of ``--repeat`` runs on a fresh mask object (caches cleared).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from rankcollapse.masks import parse_mask
from rankcollapse.masks.composed import analyze_schedule
from rankcollapse.masks.graph import analyze_sparse
from rankcollapse.masks.spec import _Parser


def _best(repeat: int, fn) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench(spec: str, n: int, repeat: int) -> dict[str, float]:
    build_s, sparse = _best(repeat, lambda: _Parser(spec).parse()._sparse(n))
    auto_s, analysis = _best(repeat, lambda: _Parser(spec).parse().analysis(n))
    forced_s, forced = _best(repeat, lambda: analyze_sparse(sparse, spec))
    tracemalloc.start()
    analyze_sparse(_Parser(spec).parse()._sparse(n), spec)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    path = "intervals" if parse_mask(spec).intervals(n) is not None else "sparse"
    return {
        "edges": sparse.nnz,
        "build_s": build_s,
        "path": path,
        "auto_s": auto_s,
        "sparse_s": forced_s,
        "ns_per_edge": 1e9 * forced_s / sparse.nnz,
        "bfs": forced.bfs_runs,
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
    header = (f"{'spec':<46} {'n':>6} {'edges':>9} {'build s':>8} {'path':>9} {'analysis s':>10} "
              f"{'sparse s':>9} {'ns/edge':>8} {'BFS':>4} {'radius':>6} {'peak MB':>8} {'n^2 MB':>8}")
    print(header)
    print("-" * len(header))
    for spec in specs:
        for n in sizes:
            r = bench(spec, n, args.repeat)
            print(f"{spec:<46} {n:>6} {r['edges']:>9} {r['build_s']:>8.4f} {r['path']:>9} "
                  f"{r['auto_s']:>10.4f} {r['sparse_s']:>9.4f} {r['ns_per_edge']:>8.1f} {r['bfs']:>4} "
                  f"{r['radius']:>6} {r['peak_mb']:>8.1f} {r['dense_mb']:>8.0f}")
    print()
    print(f"{'cache: spec':<46} {'n':>8} {'first s':>9} {'again s':>9}")
    for spec, n in (("random:p=0.001,seed=1", 16384), ("longformer:w=8,global=2", 65536), ("causal", 10**6)):
        mask = parse_mask(spec)
        mask.clear_cache()
        t0 = time.perf_counter()
        parse_mask(spec).analysis(n)
        t1 = time.perf_counter()
        parse_mask(spec).analysis(n)
        t2 = time.perf_counter()
        print(f"{spec:<46} {n:>8} {t1 - t0:>9.4f} {t2 - t1:>9.6f}")
    print()
    print(f"{'schedule':<46} {'n':>8} {'layers':>6} {'path':>9} {'seconds':>8} {'to center':>9}")
    gemma = "causal-window:w=511*5;causal"
    for spec, n, depth in ((gemma, 4096, 26), (gemma, 200_000, 26),
                           ("random:p=0.01,seed=1;causal-window:w=4", 1024, 12),
                           ("strided:stride=32;window:w=2", 4096, 8)):
        seconds, a = _best(args.repeat, lambda spec=spec, n=n, depth=depth: analyze_schedule(spec, n, depth))
        print(f"{spec:<46} {n:>8} {depth:>6} {a.method:>9} {seconds:>8.3f} {a.layers_to_center!s:>9}")


if __name__ == "__main__":
    main()
