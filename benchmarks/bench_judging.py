"""Judging a finished folder: CPU and wall time of every story's rows and headlines (no figure drawn).

Judging reads the folder's whole long table once, then hands each arm its slice
(``contract.story.slice_data``). The folder: any ``reproduce`` output, e.g. the tiny profile's::

    rankcollapse reproduce --profile tiny --out /tmp/tiny --no-progress
    python benchmarks/bench_judging.py /tmp/tiny --profile tiny

Prints the time to read the tables, the time per story (longest first) and the total, in CPU seconds of
this process (comparable under load, unlike wall time) and wall seconds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a reproduce output folder (runs/ inside)")
    ap.add_argument("--profile", default="tiny", help="the profile the folder was made with (default tiny)")
    ap.add_argument("--only", default="", help="comma-separated stories (default: all)")
    args = ap.parse_args()

    from rankcollapse.experiments.contract.story import StoryData, slice_data
    from rankcollapse.experiments.engine.config import names_of
    from rankcollapse.experiments.engine.store import collect_index, collect_table
    from rankcollapse.experiments.stories import all_stories, load_experiments

    cpu, wall = time.process_time(), time.perf_counter()
    stories = all_stories()
    only = [s for s in args.only.split(",") if s] or None
    experiments = load_experiments(args.profile, only, None, stories)
    names = names_of(experiments)  # the tables under the names table's names, as the stories read them
    table, index = collect_table(args.folder, names=names), collect_index(args.folder, names=names)
    read = time.process_time() - cpu, time.perf_counter() - wall
    print(f"tables: {len(table):,} rows x {table.shape[1]} columns, "
          f"read in {read[0]:.1f} s CPU ({read[1]:.1f} s wall)")
    by_story: dict[str, list] = {}
    for exp in experiments:
        by_story.setdefault(exp.story, []).append(exp)
    times = []
    for name, exps in by_story.items():
        c0, w0 = time.process_time(), time.perf_counter()
        arms = {e.arm: slice_data(e, table, index) for e in exps}
        sd = StoryData(name, arms, dict(exps[0].verdict), dict(exps[0].ranges))
        rows = stories[name].story.claims(sd)
        stories[name].story.headlines(sd)
        times.append((time.process_time() - c0, time.perf_counter() - w0, name, len(rows)))
    for c, w, name, n in sorted(times, reverse=True):
        print(f"{name:18s} {n:3d} rows  {c:7.1f} s CPU  {w:7.1f} s wall")
    total = time.process_time() - cpu, time.perf_counter() - wall
    print(f"total: {total[0]:.1f} s CPU, {total[1]:.1f} s wall ({len(by_story)} stories)")


if __name__ == "__main__":
    main()
