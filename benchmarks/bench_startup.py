"""Start-up time of the ``rankcollapse`` command: wall time of two commands, median of 5 runs.

    .venv/bin/python benchmarks/bench_startup.py [--runs 5] [--target 1.0]

Commands: ``rankcollapse --help`` and ``rankcollapse mask causal --tokens 32`` (each a fresh process,
``python -m rankcollapse``, output discarded). Target: both under ``--target`` seconds (1 s);
a PASS/FAIL line each, with the CPU time (user + system, which does not grow with the machine's
load as the wall time does) and the heavy libraries each command imported (none of torch,
transformers, matplotlib, pandas, dask, scipy is needed by either command).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS: tuple[tuple[str, ...], ...] = (("--help",), ("mask", "causal", "--tokens", "32"))
HEAVY = ("torch", "transformers", "matplotlib", "pandas", "dask", "scipy")

_PROBE = """
import sys, runpy
sys.argv = ["rankcollapse", *{args!r}]
try:
    runpy.run_module("rankcollapse", run_name="__main__")
except SystemExit:
    pass
heavy = [m for m in {heavy!r} if m in sys.modules]
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
"""


def wall_time(args: tuple[str, ...]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + system) for one fresh ``python -m rankcollapse ARGS`` process.

    The CPU figure does not grow with the machine's load; the wall figure does.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rankcollapse", *args], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(args: tuple[str, ...]) -> list[str]:
    """The heavy libraries in ``sys.modules`` after running the command in a fresh process."""
    code = _PROBE.format(args=list(args), heavy=HEAVY)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    for line in proc.stderr.splitlines():
        if line.startswith("HEAVY="):
            return [m for m in line[6:].split(",") if m]
    return ["?"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", type=float, default=1.0)
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {opts.runs} runs each")
    failed = False
    for args in COMMANDS:
        wall_time(args)  # warm the file cache
        runs = [wall_time(args) for _ in range(opts.runs)]
        times = [w for w, _ in runs]
        median = statistics.median(times)
        cpu = statistics.median(c for _, c in runs)
        ok = median < opts.target
        failed |= not ok
        heavy = ", ".join(heavy_imports(args)) or "none"
        print(f"rankcollapse {' '.join(args):<24} median {median:.3f} s wall (min {min(times):.3f}, max "
              f"{max(times):.3f}; CPU {cpu:.3f} s)  heavy imports: {heavy}  "
              f"{'PASS' if ok else 'FAIL'} (< {opts.target:g} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
