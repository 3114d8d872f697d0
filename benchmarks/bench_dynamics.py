"""Speed of the dynamics simulator's attention paths, with a PASS/FAIL line per target.

    .venv/bin/python benchmarks/bench_dynamics.py [--threads N] [--quick] [--device cpu|cuda]

Setting: batch 16, n = 512, d = 64, one head, 128 layers, fresh Gaussian weights,
only mu/mu_rel measured per layer, no attention-weight tracking. Figures:

- torch matmul GFLOP/s on the attention's own shapes (``Q K^T``: [b,n,e]x[b,e,n], ``A V``:
  [b,n,n]x[b,n,d]), the machine's reference throughput, same dtype and threads;
- complete mask (SDPA path): useful GFLOP/s of whole layers (projections + ``QK^T`` + ``AV``,
  i.e. ``2bnd(2e+d) + 4bn^2 e`` per layer, counted dense) and its share of the matmul figure.
  Target: float32 share >= 70 %;
- ``window:w=16``: blocked-band path against the dense masked reference, ms per layer and
  speed-up. Targets: >= 2.5x at n = 512 (both dtypes) and >= 10x at n = 4096 (float32; the dense
  path there is timed over a few layers only, it costs about a second each).

Each comparison runs its contenders in turn, ``--rounds`` times (e.g. 16 band layers, 2 dense
layers, 16 band layers, ...), and reports median times per layer: fair ratios while the load of
a shared machine drifts. Expect noise anyway; the load average is printed. On a GPU
(``--device cuda``, or automatically when one is present) the same figures are printed for it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections.abc import Callable

import torch

from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.edge.runtime import raise_mmap_threshold


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_pair(b: int, n: int, d: int, dtype: torch.dtype, device: str) -> Callable[[int], list[float]]:
    """Timer of torch.bmm on the attention's shapes (S = Q K^T, then A V): k calls -> k durations."""
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(b, n, d, dtype=dtype, device=device, generator=g)
    kt = torch.randn(b, d, n, dtype=dtype, device=device, generator=g)
    a = torch.randn(b, n, n, dtype=dtype, device=device, generator=g)

    def run(k: int) -> list[float]:
        out = []
        for _ in range(k):
            sync(device)
            t0 = time.perf_counter()
            torch.bmm(q, kt)
            torch.bmm(a, q)
            sync(device)
            out.append(time.perf_counter() - t0)
        return out

    run(1)
    return run


def layer_flops(b: int, n: int, d: int, keys_per_query: float) -> float:
    """Useful flops of one single-head layer: QKV projection + scores + weighted values."""
    e = d
    return 2 * b * n * d * (2 * e + d) + 2 * b * n * keys_per_query * e + 2 * b * n * keys_per_query * d


def sim_layers(
    mask: str, n: int, d: int, b: int, dtype: str, kernel: str, device: str, used: list[str]
) -> Callable[[int], list[float]]:
    """Timer of simulate(): k layers -> k per-layer durations (whole layers: weights, attention, mu).

    Each layer is timed from one ``on_layer`` call to the next; set-up and the first layer of each
    call (fresh buffers) are excluded.
    """
    base = {"mask": mask, "tokens": n, "d": d, "samples": b, "dtype": dtype, "kernel": kernel,
            "device": device,
            "metrics": ("mu",), "track_min_weight": False, "seed": 0}
    simulate(SimulationConfig(**base, layers=1))  # warm-up (mask, plan, allocator)

    def run(k: int) -> list[float]:
        stamps: list[float] = []

        def stamp(_row: dict[str, float]) -> None:
            sync(device)
            stamps.append(time.perf_counter())

        used.append(simulate(SimulationConfig(**base, layers=k + 1), on_layer=stamp).kernel)
        return [t1 - t0 for t0, t1 in itertools.pairwise(stamps)][1:]  # first layer: cold buffers

    return run


def interleaved(timers: dict[str, tuple[Callable[[int], list[float]], int]], rounds: int) -> dict[str, float]:
    """Median per-call seconds of each timer, the timers run in turn ``rounds`` times (k calls each).

    Interleaving at the sub-second scale makes the ratios fair on a machine whose load drifts;
    medians ignore bursts.
    """
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, (timer, k) in timers.items():
            samples[name].extend(timer(k))
    return {name: statistics.median(v) for name, v in samples.items()}


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present, and cpu)")
    parser.add_argument("--layers", type=int, default=128)
    parser.add_argument("--big-dense-layers", type=int, default=4, help="dense layers timed at n = 4096")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds (n = 512)")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, no targets judged")
    args = parser.parse_args(argv)
    raise_mmap_threshold()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = [args.device] if args.device else (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    b, n, d, big_n = (2, 64, 16, 256) if args.quick else (16, 512, 64, 4096)
    layers = 4 if args.quick else args.layers
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, cpus {os.cpu_count()}, "
          f"load average {load[0]:.1f} (shared machine: figures are noisy; rerun when quiet)")
    print(f"setting: batch {b}, n {n}, d {d}, 1 head, {layers} layers of the fast paths; "
          "median time per layer")
    if load[0] > (os.cpu_count() or 1) and torch.get_num_threads() > 1:
        print("note: the machine is oversubscribed; intra-op threads then wait for each other on every "
              "op, which hurts multi-op layers more than a bare matmul: --threads 1 gives steadier ratios")
    if "cuda" not in devices:
        print("GPU: none visible to torch; GPU figures skipped")
    failures = 0
    for device in devices:
        if device.startswith("cuda") and not torch.cuda.is_available():
            print(f"[{device}] skipped: torch sees no GPU")
            continue
        name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
        print(f"\n== device {device} ({name}) ==")
        rounds = 2 if args.quick else args.rounds
        per = max(1, layers // rounds)  # layers per round of the fast paths
        for dtype, tdt in (("float32", torch.float32), ("float64", torch.float64)):
            used: list[str] = []
            t = interleaved({"sim": (sim_layers("complete", n, d, b, dtype, "auto", device, used), per),
                             "mm": (matmul_pair(b, n, d, tdt, device), per)}, rounds)
            ref = 4 * b * n * n * d / t["mm"] / 1e9
            useful = layer_flops(b, n, d, n) / t["sim"] / 1e9
            share = useful / ref
            line = (f"complete {dtype}: {t['sim'] * 1e3:8.2f} ms/layer, {useful:6.1f} GFLOP/s useful "
                    f"({used[-1]}); torch matmul {ref:6.1f} GFLOP/s; share {share:5.1%}")
            if dtype == "float32" and not args.quick:
                line += f"  [target >= 70%: {verdict(share >= 0.70)}]"
                failures += share < 0.70
            print(line, flush=True)
        for dtype in ("float32", "float64"):
            used = []
            t = interleaved({"band": (sim_layers("window:w=16", n, d, b, dtype, "auto", device, used), per),
                             "dense": (sim_layers("window:w=16", n, d, b, dtype, "dense", device, []),
                                       max(1, per // 8))}, rounds)
            speed = t["dense"] / t["band"]
            gf = layer_flops(b, n, d, 33) / t["band"] / 1e9
            line = (f"window:w=16 n={n} {dtype}: {used[-1]} {t['band'] * 1e3:7.2f} ms/layer "
                    f"({gf:5.1f} GFLOP/s useful), dense {t['dense'] * 1e3:7.2f} ms/layer, "
                    f"speed-up {speed:5.1f}x")
            if not args.quick:
                line += f"  [target >= 2.5x: {verdict(speed >= 2.5)}]"
                failures += speed < 2.5
            print(line, flush=True)
        used = []
        big_rounds = 2 if args.quick else args.big_dense_layers
        band_timer = sim_layers("window:w=16", big_n, d, b, "float32", "auto", device, used)
        dense_timer = sim_layers("window:w=16", big_n, d, b, "float32", "dense", device, [])
        t = interleaved({"band": (band_timer, 8), "dense": (dense_timer, 1)}, big_rounds)
        speed = t["dense"] / t["band"]
        line = (f"window:w=16 n={big_n} float32: {used[-1]} {t['band'] * 1e3:7.2f} ms/layer, dense "
                f"{t['dense'] * 1e3:7.2f} ms/layer, speed-up {speed:5.1f}x")
        if not args.quick:
            line += f"  [target >= 10x: {verdict(speed >= 10)}]"
            failures += speed < 10
        print(line, flush=True)
    print(f"\n{'all targets PASS' if not failures else f'{failures} target(s) FAIL'}"
          + (" (quick run: targets not judged)" if args.quick else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
