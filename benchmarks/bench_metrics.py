"""Where the per-layer metrics' time goes at long context (issue 28): one hidden state [1, N, d].

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_metrics.py [--tokens 512,2048,8192] [--d 576]
        [--threads 1,2] [--dtype float32] [--repeats 5]

The input is synthetic and seeded: an anisotropic token matrix shaped like SmolLM2-135M's hidden states
(d = 576; one shared direction plus Gaussian noise, so that |cos| is far from 0), in ``--dtype``. The
metrics' cost depends on the shapes, not on the values. Per N and thread count, each contender is run
in turn ``--repeats`` times (interleaved, so that a shared machine's drifting load hits them alike) and
the minimum is printed, in milliseconds:

- ``every``: ``collapse_metrics(x)``, every column of ``METRIC_NAMES`` (what ``analyze`` runs per hidden
  state and sample);
- ``spectrum``: ``collapse_metrics(x, SVD_METRICS)``: num_rank, full_rank, sigma_min, sigma_max,
  stable_rank and effective_rank, read from one spectrum;
- ``|cos|``: ``collapse_metrics(x, ("mean_abs_cos",))``, every pair;
- ``|cos| 256``: the same with ``cos_rows=256`` (``analyze``'s default: from 1,024 tokens on, the pairs of
  256 sampled query tokens, ``256 N d`` multiply-adds, and the standard error);
- ``analyze``: ``collapse_metrics(x, cos_rows=256)``, every column as ``analyze`` runs it by default;
- ``cheap``: ``collapse_metrics(x, CHEAP_METRICS)`` (mu, mu_rel, at_floor, mean_signed_cos,
  dong_residual: O(N d));
- the spectrum split in its two steps: ``gram`` = forming the float64 Gram matrix (``3 N d k / 4``
  float64 multiply-adds, ``k = min(N, d)``) and ``eigvalsh`` = its k x k eigenvalues (LAPACK's
  tridiagonal reduction, ``2 k^3 / 3`` multiply-adds, half of them matrix-vector products: bound by
  memory, not by the multiply-adds);
- yardsticks: ``svdvals`` = ``torch.linalg.svdvals(x)`` (LAPACK's float32 SVD, what the rank columns
  read before) and ``gemm n^2 d/2`` = the multiply-adds every pair's cosine needs once, as matmuls of
  [256, d] x [d, 256] tiles into one buffer in x's dtype (so ``|cos| / gemm`` is how far the |cos|
  kernel is from bare matmuls).

The share columns say which metric dominates. ``analyze`` measures with ``metric_threads``
threads (``auto``: 1 below 1,024 tokens); its forward runs with torch's threads. A first table counts
multiply-adds, each metric's against one layer of the forward of a model of d features (default
SmolLM2-135M: ``--d-ff 1536``, ``--d-kv 192``, 3 key-value heads of 64; causal): ``N d (2 d + 2 d_kv)``
for Q, K, V and O, ``3 N d d_ff`` for the gated MLP, ``N^2 d`` for the scores and the weighted sum
(half of the square each, as a causal kernel skips the rest). That share is a floor no kernel of the
same exact metric can go below.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

from rankcollapse.core.precision import parse_dtype
from rankcollapse.edge.runtime import raise_mmap_threshold
from rankcollapse.metrics import CHEAP_METRICS, SVD_METRICS, collapse_metrics


def hidden_like(n: int, d: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """[1, n, d]: one shared direction (norm ~ the noise's) plus Gaussian tokens: mean |cos| ~ 0.5."""
    g = torch.Generator().manual_seed(seed)
    shared = torch.randn(d, generator=g, dtype=torch.float64)
    x = torch.randn(1, n, d, generator=g, dtype=torch.float64) + shared
    return x.to(dtype)


def tile_gemms(x: torch.Tensor, side: int = 256) -> Callable[[], object]:
    """``ceil(n^2 / (2 side^2))`` matmuls [side, d] x [d, side] into one buffer: the multiply-adds of every
    pair's cosine once, at the machine's best (the buffer stays in cache)."""
    n = x.shape[-2]
    side = min(side, n)
    a = x[0, :side].contiguous()
    b = a.mT.contiguous()
    out = torch.empty(side, side, dtype=x.dtype)
    calls = -(-n * n // (2 * side * side))

    def run() -> None:
        for _ in range(calls):
            torch.mm(a, b, out=out)

    return run


def gram_only(x: torch.Tensor) -> tuple[Callable[[], object], Callable[[], object]]:
    """(forming the float64 Gram matrix of x [1, n, d] as ``gram_singular_values`` does, its eigenvalues)."""
    y = x[0] if x.shape[-2] >= x.shape[-1] else x[0].mT
    g = (y.mT.to(torch.float64) @ y.to(torch.float64))[None]

    def gram() -> None:
        out = torch.zeros_like(g[0])
        for first in range(0, y.shape[0], 1024):
            block = y[first : first + 1024].to(torch.float64)
            out.addmm_(block.mT, block)

    return gram, lambda: torch.linalg.eigvalsh(g, UPLO="L")


def contenders(x: torch.Tensor) -> dict[str, Callable[[], object]]:
    gram, eig = gram_only(x)
    return {
        "every": lambda: collapse_metrics(x),
        "spectrum": lambda: collapse_metrics(x, tuple(sorted(SVD_METRICS))),
        "|cos|": lambda: collapse_metrics(x, ("mean_abs_cos",)),
        "|cos| 256": lambda: collapse_metrics(x, ("mean_abs_cos",), cos_rows=256),
        "analyze": lambda: collapse_metrics(x, cos_rows=256),
        "cheap": lambda: collapse_metrics(x, CHEAP_METRICS),
        "gram": gram,
        "eigvalsh": eig,
        "svdvals": lambda: torch.linalg.svdvals(x),
        "gemm n^2 d/2": tile_gemms(x),
    }


def profile(n: int, d: int, dtype: torch.dtype, threads: int, repeats: int) -> dict[str, float]:
    """Minimum seconds per contender over ``repeats`` interleaved rounds."""
    x = hidden_like(n, d, dtype)
    fns = contenders(x)
    best = {k: float("inf") for k in fns}
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            for fn in fns.values():  # warm-up: first-call allocations and library start-up
                fn()
            for _ in range(repeats):
                for key, fn in fns.items():
                    start = time.perf_counter()
                    fn()
                    best[key] = min(best[key], time.perf_counter() - start)
    finally:
        torch.set_num_threads(before)
    return best


def multiply_adds(n: int, d: int, d_ff: int, d_kv: int) -> dict[str, float]:
    """Multiply-adds per hidden state [n, d] of one layer's forward (causal) and of each metric."""
    k = min(n, d)
    return {"forward layer": n * d * (2 * d + 2 * d_kv) + 3 * n * d * d_ff + n * n * d,
            "gram (f64)": 3 * n * d * k / 4, "eigvalsh (f64)": 2 * k**3 / 3, "|cos|": n * n * d / 2,
            "cheap": 6 * n * d}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="512,2048,8192")
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--d-ff", type=int, default=1536)
    ap.add_argument("--d-kv", type=int, default=192)
    args = ap.parse_args()
    raise_mmap_threshold()
    dtype = parse_dtype(args.dtype)
    print(f"load average {os.getloadavg()[0]:.2f} (start), torch {torch.__version__}, d = {args.d}, "
          f"{args.dtype}, min of {args.repeats} interleaved rounds, ms")
    print(f"multiply-adds per hidden state, d = {args.d}, d_ff = {args.d_ff}, d_kv = {args.d_kv}, causal "
          "(share of one layer's forward)")
    for n in (int(t) for t in args.tokens.split(",")):
        m = multiply_adds(n, args.d, args.d_ff, args.d_kv)
        print(f"{n:>6} " + "  ".join(f"{k} {v:.2e}" + ("" if k == "forward layer" else
                                                          f" ({v / m['forward layer']:.0%})")
                                     for k, v in m.items()))
    cols = ("every", "analyze", "spectrum", "gram", "eigvalsh", "|cos|", "|cos| 256", "cheap", "svdvals",
            "gemm n^2 d/2")
    print(f"{'N':>6} {'thr':>3} " + " ".join(f"{c:>12}" for c in cols)
          + f" {'spectrum %':>10} {'|cos| %':>8} {'|cos|/gemm':>10}")
    for n in (int(t) for t in args.tokens.split(",")):
        for threads in (int(t) for t in args.threads.split(",")):
            t = profile(n, args.d, dtype, threads, args.repeats)
            print(f"{n:>6} {threads:>3} " + " ".join(f"{1e3 * t[c]:>12.1f}" for c in cols)
                  + f" {t['spectrum'] / t['every']:>10.0%} {t['|cos|'] / t['every']:>8.0%}"
                  + f" {t['|cos|'] / t['gemm n^2 d/2']:>10.2f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} (end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
