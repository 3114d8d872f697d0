"""How far the pre-sweep estimate is from the seconds runs took, before and after calibration.

For each reproduce folder given, the finished runs are ordered by when they finished; every other one
calibrates :class:`rankcollapse.experiments.engine.costs.RunCost` (as the runs already done of the same
experiments calibrate a resumed sweep or a later look of ``--until-decided``), and the others are
predicted. Printed per task: the runs, their
measured seconds (the records' ``wall_s``), the tasks' own estimate and the calibrated one, each as
measured / estimated (1 = exact; above 1 = the estimate was low).

    python benchmarks/bench_estimates.py results/quick /path/to/another/reproduce/folder

Nothing is run: the folders' records hold the measured seconds (their runs' load is not recorded; say it
with the figures).
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

from rankcollapse.experiments.engine.costs import RunCost
from rankcollapse.experiments.engine.grid import RunSpec
from rankcollapse.experiments.engine.store import RunStore
from rankcollapse.experiments.engine.tasks import RunResult
from rankcollapse.experiments.stories import load_experiments


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    exps = {e.name: e for e in load_experiments("full")}
    for folder in args.folders:
        done = []
        for rec in RunStore(folder).records():
            if rec.get("status") != "ok" or rec["experiment"] not in exps:
                continue
            spec = RunSpec(rec["experiment"], rec["task"], rec["params"], run_id=rec["run_id"])
            if exps[spec.experiment].cost_s(spec) is not None:
                done.append((str(rec.get("finished_at", "")), spec, float(rec["wall_s"])))
        done.sort(key=lambda r: r[0])
        with tempfile.TemporaryDirectory() as tmp:  # every other run, as if only they were done
            store = RunStore(tmp)
            for _, spec, wall in done[::2]:
                store.save(spec, RunResult(spec.run_id, "ok", [], {}, wall))
            cost = RunCost(exps, store)
            per: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
            for _, spec, wall in done[1::2]:
                for key in (spec.task, "all"):
                    row = per[key]
                    row[0] += 1
                    row[1] += wall
                    row[2] += cost.task_estimate(spec) or 0.0
                    row[3] += cost(spec) or 0.0
        print(f"{folder}: {len(done)} runs with an estimate; every other one calibrates, the rest predicted")
        head = ("task", "runs", "measured s", "task est.", "ratio", "calibr.", "ratio")
        print("  {:24} {:>5} {:>11} {:>10} {:>6} {:>8} {:>6}".format(*head))
        for key, (n, wall, own, calibrated) in sorted(per.items(), key=lambda kv: kv[0] == "all"):
            print(f"  {key:24} {n:5d} {wall:11.1f} {own:10.1f} {wall / own:6.2f} {calibrated:8.1f} "
                  f"{wall / calibrated:6.2f}")


if __name__ == "__main__":
    main()
