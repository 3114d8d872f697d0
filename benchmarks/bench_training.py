"""What the story ``training`` costs: CPU seconds of its runs, and the wall time of a profile on 2 cores.

Each run of ``stories/training.yaml`` (``rankcollapse.monitor.trajectory.train_trajectory``: one small
byte-level LM trained from random init, probed by a Monitor) runs one torch thread. This script runs
``--sample`` of each arm's runs of a profile in this process (the decoders' ``trained`` arm: one per
variant, causal mask, seed 0, by default; the ``encoder`` arm: one per variant, seed 0) and measures
each run's CPU time (``time.process_time``: on a shared machine its wall time says more
about the load than about the run; the corpus is read before the first). The wall time of the whole
profile on ``--workers`` idle cores is then estimated as ``sum over arms of mean CPU per run x runs /
workers`` (the runs are independent and about equally long).
Target (issue 29): the ``quick`` profile (``make reproduce``) in about 3 minutes on 2 idle cores: its 38 runs
(decoders under the causal mask, 8 networks per block; encoders 3 per block) at about 10 CPU-s each,
measured in docs/monitor.md, are about 3.2 minutes.

    python benchmarks/bench_training.py                 # the quick profile, 4 sample runs
    python benchmarks/bench_training.py --profile tiny  # the tests' profile
"""

from __future__ import annotations

import argparse
import statistics
import time


def loadavg() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--sample", type=int, default=4, help="runs to time (default 4)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from rankcollapse.experiments.engine.tasks import config_from
    from rankcollapse.experiments.stories import load_experiments
    from rankcollapse.monitor.trajectory import TrajectoryConfig, corpus_bytes, train_trajectory

    total_cpu = 0.0
    for exp in load_experiments(args.profile, ["training"]):
        runs = exp.runs()
        first = ("causal", "complete")  # each arm's first mask
        picked = [r for r in runs if r.params.get("mask") in first and r.params.get("seed") == 0]
        picked = (picked or runs)[: args.sample]
        print(f"{exp.name}, profile {args.profile}: {len(runs)} runs; timing {len(picked)}; load {loadavg()}")
        corpus_bytes(str(picked[0].params.get("corpus", "shakespeare")))  # read once, before the first run
        cpu = []
        for spec in picked:
            config = config_from(TrajectoryConfig, dict(spec.params))
            c0, w0 = time.process_time(), time.perf_counter()
            train_trajectory(config)
            c, w = time.process_time() - c0, time.perf_counter() - w0
            cpu.append(c)
            print(f"  {config.variant:8s} {config.mask:20s} CPU {c:6.1f} s  wall {w:6.1f} s  "
                  f"(load {loadavg()})")
        per = statistics.mean(cpu)
        total_cpu += per * len(runs)
        print(f"  mean CPU per run {per:.1f} s x {len(runs)} runs = {per * len(runs):.0f} CPU-s")
    total = total_cpu / args.workers
    print(
        f"the {args.profile} profile: about {total_cpu:.0f} CPU-s -> on {args.workers} idle cores about "
        f"{total:.0f} s ({total / 60:.1f} min) of wall time; load after {loadavg()}"
    )


if __name__ == "__main__":
    main()
