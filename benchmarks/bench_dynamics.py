"""Speed of the dynamics simulator's attention paths, with a PASS/FAIL line per target.

    .venv/bin/python benchmarks/bench_dynamics.py [--threads N] [--quick] [--device cpu|cuda]

Setting (issue 3): batch 16, n = 512, d = 64, one head, 128 layers, fresh Gaussian weights,
only mu/mu_rel measured per layer, no attention-weight tracking. Figures:

- torch matmul GFLOP/s on the attention's own shapes (``Q K^T``: [b,n,e]x[b,e,n], ``A V``:
  [b,n,n]x[b,n,d]), the machine's reference throughput, same dtype and threads;
- complete mask (SDPA path): useful GFLOP/s of whole layers (projections + ``QK^T`` + ``AV``,
  i.e. ``2bnd(2e+d) + 4bn^2 e`` per layer, counted dense) and its share of the matmul figure.
  Target: float32 share >= 70 %;
- ``window:w=16``: blocked-band path against the dense masked reference, ms per layer and
  speed-up. Targets: >= 2.5x at n = 512 (both dtypes) and >= 10x at n = 4096 (float32; the dense
  path there is timed over a few layers only, it costs about a second each).

Times are medians per layer (and of ``--repeats`` matmul pairs): the CPU is shared, expect noise;
the load average is printed. On a GPU (``--device cuda`` or auto when present) the same figures
are printed for it.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import os
import statistics
import time
from collections.abc import Callable

import torch

from rankcollapse.dynamics import SimulationConfig, simulate


def raise_mmap_threshold() -> None:
    """As the CLI does: keep big temporaries mapped (glibc), ~2x faster float64 here."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_time(fn: Callable[[], object], repeats: int, device: str) -> float:
    """Median seconds of ``fn`` over ``repeats`` calls (medians resist bursts of other users' load)."""
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def matmul_gflops(b: int, n: int, d: int, dtype: torch.dtype, device: str, repeats: int) -> float:
    """torch matmul throughput on the attention's shapes: S = Q K^T then A V (median of repeats)."""
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(b, n, d, dtype=dtype, device=device, generator=g)
    kt = torch.randn(b, d, n, dtype=dtype, device=device, generator=g)
    a = torch.randn(b, n, n, dtype=dtype, device=device, generator=g)

    def run() -> None:
        torch.bmm(q, kt)
        torch.bmm(a, q)

    run()
    return 4 * b * n * n * d / median_time(run, repeats, device) / 1e9


def layer_flops(b: int, n: int, d: int, keys_per_query: float) -> float:
    """Useful flops of one single-head layer: QKV projection + scores + weighted values."""
    e = d
    return 2 * b * n * d * (2 * e + d) + 2 * b * n * keys_per_query * e + 2 * b * n * keys_per_query * d


def time_sim(
    mask: str, n: int, d: int, b: int, layers: int, dtype: str, kernel: str, device: str
) -> tuple[float, str]:
    """Median seconds per layer of simulate() (whole layers: weights, attention, mu) and its kernel.

    Each layer is timed from one ``on_layer`` call to the next, so the median over the run's
    layers ignores bursts of load from other users of the machine.
    """
    cfg = SimulationConfig(mask=mask, n=n, d=d, layers=layers, batch=b, dtype=dtype, kernel=kernel,
                           device=device, metrics=("mu",), track_min_weight=False, seed=0)
    simulate(SimulationConfig(**{**cfg.__dict__, "layers": 1}))  # warm-up (mask, plan, allocator)
    stamps: list[float] = []

    def stamp(_row: dict[str, float]) -> None:
        sync(device)
        stamps.append(time.perf_counter())

    result = simulate(cfg, on_layer=stamp)
    return statistics.median(t1 - t0 for t0, t1 in itertools.pairwise(stamps)), result.kernel


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present, and cpu)")
    parser.add_argument("--layers", type=int, default=128)
    parser.add_argument("--big-dense-layers", type=int, default=4, help="layers timed for dense at n=4096")
    parser.add_argument("--repeats", type=int, default=40, help="matmul reference repetitions")
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
    print(f"setting: batch {b}, n {n}, d {d}, 1 head, {layers} layers; median time per layer")
    if "cuda" not in devices:
        print("GPU: none visible to torch; GPU figures skipped")
    failures = 0
    for device in devices:
        if device.startswith("cuda") and not torch.cuda.is_available():
            print(f"[{device}] skipped: torch sees no GPU")
            continue
        name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
        print(f"\n== device {device} ({name}) ==")
        for dtype, tdt in (("float32", torch.float32), ("float64", torch.float64)):
            ref = matmul_gflops(b, n, d, tdt, device, args.repeats)
            sec, kern = time_sim("complete", n, d, b, layers, dtype, "auto", device)
            useful = layer_flops(b, n, d, n) / sec / 1e9
            share = useful / ref
            target = dtype == "float32" and not args.quick
            line = (f"complete {dtype}: {sec * 1e3:8.2f} ms/layer, {useful:7.1f} GFLOP/s useful ({kern}); "
                    f"torch matmul {ref:7.1f} GFLOP/s; share {share:5.1%}")
            if target:
                line += f"  [target >= 70%: {verdict(share >= 0.70)}]"
                failures += share < 0.70
            print(line)
        for dtype in ("float32", "float64"):
            band, kb = time_sim("window:w=16", n, d, b, layers, dtype, "auto", device)
            dense, _ = time_sim("window:w=16", n, d, b, max(2, layers // 8), dtype, "dense", device)
            speed = dense / band
            gf = layer_flops(b, n, d, 33) / band / 1e9
            line = (f"window:w=16 n={n} {dtype}: band ({kb}) {band * 1e3:8.2f} ms/layer ({gf:5.1f} GFLOP/s "
                    f"useful), dense {dense * 1e3:8.2f} ms/layer, speed-up {speed:5.1f}x")
            if not args.quick:
                line += f"  [target >= 2.5x: {verdict(speed >= 2.5)}]"
                failures += speed < 2.5
            print(line)
        band, kb = time_sim("window:w=16", big_n, d, b, max(4, layers // 4), "float32", "auto", device)
        dense, _ = time_sim("window:w=16", big_n, d, b, args.big_dense_layers if not args.quick else 2,
                            "float32", "dense", device)
        speed = dense / band
        line = (f"window:w=16 n={big_n} float32: band ({kb}) {band * 1e3:8.2f} ms/layer, dense "
                f"{dense * 1e3:8.2f} ms/layer, speed-up {speed:5.1f}x")
        if not args.quick:
            line += f"  [target >= 10x: {verdict(speed >= 10)}]"
            failures += speed < 10
        print(line)
    print(f"\n{'all targets PASS' if not failures else f'{failures} target(s) FAIL'}"
          + (" (quick run: targets not judged)" if args.quick else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
