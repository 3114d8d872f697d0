"""Start-up time of the ``rankcollapse`` command: wall time of each command, median of 5 runs.

    .venv/bin/python benchmarks/bench_startup.py [--runs 5] [--target 1.0] [--analyze-target 2.0]

Commands (each a fresh process, ``python -m rankcollapse``, output discarded):

- ``rankcollapse --help`` and ``rankcollapse mask causal --tokens 32``: target under ``--target`` seconds
  (1 s); none of torch, transformers, matplotlib, pandas, dask, scipy is needed by either;
- ``rankcollapse analyze --model minilm --samples 4 --tokens 64 --out DIR`` (the README's first command,
  a fresh folder each run): the time from the command to ``metrics.csv``, target under
  ``--analyze-target`` seconds (2 s) on a quiet machine; the heavy libraries it imports, and where its
  time goes (one more process, timed phase by phase: torch, ``rankcollapse``'s command line and analyze
  modules, transformers with the family's modeling module, loading the weights and tokenizer, the
  excerpts, the forward pass and the metrics, writing the run).

A PASS/FAIL line each, with the CPU time (user + system, which grows less with the machine's load than
the wall time does) and the load average: under load the wall time is not the quiet machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS: tuple[tuple[str, ...], ...] = (("--help",), ("mask", "causal", "--tokens", "32"))
ANALYZE: tuple[str, ...] = ("analyze", "--model", "minilm", "--samples", "4", "--tokens", "64", "--no-table",
                            "--no-progress")
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

#: The analyze command timed phase by phase, in one fresh process (what each phase imports included).
_PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
marks = {}
def mark(name):
    marks[name] = time.perf_counter() - t0 - sum(marks.values())
import torch
mark("torch")
import rankcollapse.cli.main, rankcollapse.models.analyze
mark("rankcollapse's command line and analyze modules")
import transformers.models.bert.modeling_bert
mark("transformers + modeling_bert (the family's module)")
from rankcollapse.models import AnalyzeConfig, analyze, load_model, write_run
from rankcollapse.models.analyze import token_batch
model = load_model("minilm", "float32")
mark("load_model (weights, tokenizer, dissection)")
config = AnalyzeConfig(model="minilm", samples=4, tokens=64)
ids = token_batch(config, model)
mark("the excerpts (token cache)")
result = analyze(config, model=model, ids=ids)
mark("forward and metrics")
write_run(result, sys.argv[1])
mark("writing the run")
print(json.dumps(marks))
"""


def wall_time(args: tuple[str, ...]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + system) for one fresh ``python -m rankcollapse ARGS`` process.

    The CPU figure does not grow with the machine's load as the wall figure does.
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


def _with_out(args: tuple[str, ...], root: Path) -> tuple[str, ...]:
    """``args`` with a fresh ``--out`` folder under ``root`` when the command writes one."""
    if args[0] != "analyze":
        return args
    return (*args, "--out", tempfile.mkdtemp(dir=root, prefix="run-") + "/out")


def measure(args: tuple[str, ...], runs: int, target: float, root: Path) -> bool:
    wall_time(_with_out(args, root))  # warm the file cache (and, for analyze, the bundled model's cache)
    results = [wall_time(_with_out(args, root)) for _ in range(runs)]
    times = [w for w, _ in results]
    median = statistics.median(times)
    cpu = statistics.median(c for _, c in results)
    ok = median < target
    heavy = ", ".join(heavy_imports(_with_out(args, root))) or "none"
    print(f"rankcollapse {' '.join(args[:7]):<52} median {median:.3f} s wall (min {min(times):.3f}, max "
          f"{max(times):.3f}; CPU {cpu:.3f} s)  heavy imports: {heavy}  {'PASS' if ok else 'FAIL'} "
          f"(< {target:g} s)", flush=True)
    return ok


def phases(root: Path) -> None:
    """Where the analyze command's time goes, one fresh process (imports counted where they happen)."""
    out = tempfile.mkdtemp(dir=root, prefix="phases-") + "/out"
    proc = subprocess.run([sys.executable, "-c", _PHASES, out], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"phases: failed ({proc.stderr.strip().splitlines()[-1:]})")
        return
    marks = json.loads(proc.stdout.strip().splitlines()[-1])
    total = sum(marks.values())
    print(f"analyze, phase by phase (one process, {total:.2f} s after the interpreter started):")
    for name, sec in marks.items():
        print(f"  {sec:6.2f} s  {100 * sec / total:3.0f}%  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", type=float, default=1.0)
    parser.add_argument("--analyze-target", type=float, default=2.0)
    parser.add_argument("--no-analyze", action="store_true", help="Only --help and mask.")
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {opts.runs} runs each")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        root = Path(tmp)
        for args in COMMANDS:
            failed |= not measure(args, opts.runs, opts.target, root)
        if not opts.no_analyze:
            failed |= not measure(ANALYZE, opts.runs, opts.analyze_target, root)
            phases(root)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
