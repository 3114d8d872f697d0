"""A paper-profile slice on the local pool and on a Dask LocalCluster: wall times, and the rows compared.

The slice: Fig. 2's paper arm (``fig2.paper``, the paper profile: BERT-base random init, 5 variants x
4 masks, N = 128 Wikipedia tokens), ``--samples`` samples per condition in ``--runs`` runs (seeds
0..runs-1), one dtype. Both executors get the same thread count per worker, so their rows must be
identical to the bit; the script says whether they are, and prints each wall time beside the
pre-sweep estimate::

    python benchmarks/bench_dask_slice.py --samples 256 --runs 8 --out /tmp/dask_slice

Prints one line per executor and one verdict line. Nothing here is a unit test: the equality is also
tested on a tiny slice (tests/experiments/test_sweep_engine.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=256, help="samples per condition (default 256)")
    ap.add_argument("--runs", type=int, default=8, help="runs (seeds) they are split into (default 8)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/rankcollapse_dask_slice"))
    args = ap.parse_args()
    if args.samples % args.runs:
        ap.error("--samples must be a multiple of --runs")

    import distributed

    from rankcollapse.experiments.engine.executors import run_sweep
    from rankcollapse.experiments.engine.store import collect_table
    from rankcollapse.experiments.stories import load_experiments
    from rankcollapse.pipeline.reproduce import PARALLEL_SLOWDOWN

    exp = load_experiments("paper", ["fig2.paper"])[0]
    exp = replace(
        exp,
        base={**exp.base, "samples": args.samples // args.runs},
        grid={"model": ["random:bert-base-uncased"], "dtype": [args.dtype], "seed": list(range(args.runs))},
    )
    specs = exp.runs()
    cpu = sum(exp.cost_s(s) or 0.0 for s in specs)
    w = args.workers
    print(
        f"slice: fig2.paper (paper profile), random:bert-base-uncased, {args.dtype}, {args.samples} samples "
        f"per condition in {len(specs)} runs; estimate {cpu / 60:.1f} min CPU, "
        f"{cpu * PARALLEL_SLOWDOWN / w / 60:.1f} min on {w} workers",
        flush=True,
    )
    shutil.rmtree(args.out, ignore_errors=True)
    threads = str(max(1, (os.cpu_count() or 1) // w))
    walls = {}
    t0 = time.perf_counter()
    local = run_sweep(specs, args.out / "local", workers=w, progress=False, cost=exp.cost_s)
    walls["local"] = time.perf_counter() - t0
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
    with distributed.LocalCluster(
        n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None, env=env
    ) as cluster:
        t0 = time.perf_counter()
        dask = run_sweep(
            specs, args.out / "dask", executor="dask", scheduler=cluster.scheduler_address, progress=False
        )
        walls["dask"] = time.perf_counter() - t0
    for name, summary in (("local", local), ("dask", dask)):
        print(
            f"{name:5s}: {summary.finished} runs finished, {summary.failed} failed, wall {walls[name]:.1f} s "
            f"({walls[name] / 60:.1f} min)",
            flush=True,
        )
    key = ["run_id", "row"]
    a = collect_table(args.out / "local").sort_values(key).reset_index(drop=True)
    b = collect_table(args.out / "dask").sort_values(key).reset_index(drop=True)
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        same = f"identical: {len(a)} rows x {a.shape[1]} columns, to the bit"
    except AssertionError as err:
        same = f"DIFFERENT: {str(err).splitlines()[0]}"
    print(f"rows: {same}; dask / local wall = {walls['dask'] / walls['local']:.3f}")


if __name__ == "__main__":
    main()
