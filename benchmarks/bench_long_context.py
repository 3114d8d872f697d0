"""Long context: ``analyze``'s full mode against the model's own forward, and ``simulate``'s default metrics.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_long_context.py
        [--part analyze|memory|diagnostics|simulate|all] [--model smollm2] [--tokens 512,2048,8192]
        [--repeats 2] [--eager-up-to 2048]

Parts (each prints a table and a PASS/FAIL line per target of issue 28):

``analyze``: one Wikipedia excerpt of N tokens through SmolLM2-135M, float32, ``full`` mode, no
diagnostics. Interleaved, minimum over ``--repeats`` (the least noisy estimate on a shared CPU):
``hf`` = Hugging Face's own default forward, ``hf_model(ids, output_hidden_states=True)`` with its
default attention (SDPA); ``hf eager`` = the same with the eager attention ``analyze`` used before (up
to ``--eager-up-to`` tokens: it materialises [h, N, N] per layer); ``ours`` = ``analyze(...)``'s own
``seconds["forward"]`` and ``seconds["metrics"]`` (default metrics: every column of
``rankcollapse.metrics.METRIC_NAMES``, mean |cos| from 256 sampled query tokens from 1,024 tokens on;
``--cos-rows all``: every pair). Targets: forward <= 1.1 x hf; metrics <= 25 % of the forward.

``memory``: each contender in a fresh process, the resident set sampled every 2 ms by a thread: the
peak above the process's size once the model is loaded and the input made. ``hf + metrics by hand``
= the HF default forward with ``output_hidden_states`` (every layer's state kept), then the same
metrics per state; ``ours`` = ``analyze``. Target: ours <= 1.2 x hf + metrics by hand.

``diagnostics``: ``analyze --diagnostics`` (``AnalyzeConfig(diagnostics=True)``, the default chunk:
:func:`rankcollapse.models.parts.chunk_rows`) in a fresh process, its peak measured as in ``memory``,
against ``hf + metrics by hand`` (as in ``memory``) plus one chunk's workspace (``CHUNK_BYTES`` per
sample). Up to ``--eager-up-to`` tokens also ``reference``: the same run forming every layer's whole
map (the path ``on_attention`` takes), what ``--diagnostics`` needed before. Target: diagnostics <=
hf + metrics by hand + one chunk.

``simulate``: ``simulate --mask window:w=8 --tokens 16384 --d 16`` (samples 8, float64), seconds per layer
with the default metrics and with ``--metrics mu,mu_rel``, from the difference of a 4-layer and a
1-layer run (start-up and the input row cancel). Target: default <= 2 x mu,mu_rel.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import torch

from rankcollapse.edge.runtime import raise_mmap_threshold
from rankcollapse.models.analyze.config import DEFAULT_COS_ROWS


def _loaded(name: str, tokens: int) -> tuple[object, torch.Tensor]:
    from rankcollapse.models import excerpts, load_model

    model = load_model(name, "float32", seed=0)
    return model, excerpts(model, "wikipedia", samples=1, tokens=tokens, seed=0)


def _hf_forward(model: object, ids: torch.Tensor, impl: str) -> None:
    hf = model.hf_model  # type: ignore[attr-defined]
    hf.set_attn_implementation(impl)
    try:
        with torch.inference_mode():
            hf(input_ids=ids, output_hidden_states=True)
    finally:
        hf.set_attn_implementation("eager")  # as load_model leaves it


def _ours(name: str, model: object, tokens: int, diagnostics: str = "",
          cos_rows: int | str = DEFAULT_COS_ROWS) -> dict[str, float]:
    """``analyze`` of one excerpt; ``diagnostics``: "" (none), "chunked" (the default) or "reference"
    (every layer's whole map formed: an ``on_attention`` that keeps nothing)."""
    from rankcollapse.models import AnalyzeConfig, analyze

    config = AnalyzeConfig(model=name, samples=1, tokens=tokens, diagnostics=bool(diagnostics),
                           cos_rows=cos_rows)
    hook = (lambda t, a: None) if diagnostics == "reference" else None
    result = analyze(config, model=model, on_attention=hook)
    return dict(result.seconds)


def part_analyze(name: str, tokens: list[int], repeats: int, eager_up_to: int,
                 cos_rows: int | str = DEFAULT_COS_ROWS) -> bool:
    ok = True
    print(f"analyze, full mode, no diagnostics: {name}, float32, 1 excerpt, --cos-rows {cos_rows}")
    print(f"{'N':>6} {'hf (sdpa) s':>12} {'hf eager s':>11} {'ours fwd s':>11} {'fwd/hf':>7} "
          f"{'metrics s':>10} {'metrics/fwd':>12}")
    for n in tokens:
        model, ids = _loaded(name, n)
        fns: dict[str, Callable[[], object]] = {"hf": lambda m=model, i=ids: _hf_forward(m, i, "sdpa")}
        if n <= eager_up_to:
            fns["eager"] = lambda m=model, i=ids: _hf_forward(m, i, "eager")
        times: dict[str, list[float]] = {k: [] for k in fns}
        ours: list[dict[str, float]] = []
        for _ in range(repeats):
            for key, fn in fns.items():
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
            ours.append(_ours(name, model, n, cos_rows=cos_rows))
        hf = min(times["hf"])
        eager = min(times["eager"]) if "eager" in times else float("nan")
        fwd = min(o["forward"] for o in ours)
        met = min(o["metrics"] for o in ours)
        print(f"{n:>6} {hf:>12.2f} {eager:>11.2f} {fwd:>11.2f} {fwd / hf:>7.2f} {met:>10.2f} "
              f"{met / fwd:>12.0%}")
        ok &= _verdict(f"N = {n}: forward {fwd / hf:.2f} x hf", fwd / hf <= 1.1)
        ok &= _verdict(f"N = {n}: metrics {met / fwd:.0%} of the forward", met / fwd <= 0.25)
    return ok


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(kind: str, name: str, tokens: int) -> None:
    """One contender in this process; prints {"peak": bytes above the loaded state, "base": bytes}."""
    model, ids = _loaded(name, tokens)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.002)

    base = _rss()
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    if kind == "hf":
        from rankcollapse.metrics import per_sample_metrics

        hf = model.hf_model  # type: ignore[attr-defined]
        hf.set_attn_implementation("sdpa")
        with torch.inference_mode():
            states = hf(input_ids=ids, output_hidden_states=True).hidden_states
            for x in states:
                per_sample_metrics(x)
    else:
        _ours(name, model, tokens, {"ours": "", "diagnostics": "chunked", "reference": "reference"}[kind])
    done.set()
    thread.join()
    print(json.dumps({"peak": max(peak[0], _rss()) - base, "base": base}))


def _peak(kind: str, name: str, n: int) -> tuple[int, float]:
    """(peak bytes, wall seconds) of one contender in a fresh process (:func:`child`)."""
    argv = [sys.executable, __file__, "--child", kind, "--model", name, "--tokens", str(n)]
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=os.environ.copy())
    return json.loads(out.stdout.strip().splitlines()[-1])["peak"], time.perf_counter() - start


def part_memory(name: str, tokens: list[int]) -> bool:
    ok = True
    print(f"memory: peak resident set above the loaded model and input, {name}, float32, 1 excerpt")
    print(f"{'N':>6} {'hf + metrics MB':>16} {'ours MB':>8} {'ratio':>6}")
    for n in tokens:
        got = {kind: _peak(kind, name, n)[0] for kind in ("hf", "ours")}
        ratio = got["ours"] / max(got["hf"], 1)
        print(f"{n:>6} {got['hf'] / 2**20:>16.0f} {got['ours'] / 2**20:>8.0f} {ratio:>6.2f}")
        ok &= _verdict(f"N = {n}: peak {ratio:.2f} x hf + metrics by hand", ratio <= 1.2)
    return ok


def part_diagnostics(name: str, tokens: list[int], eager_up_to: int) -> bool:
    from rankcollapse.models import load_model
    from rankcollapse.models.parts import CHUNK_BYTES, chunk_rows

    heads = load_model(name, "float32", seed=0).layers[0].n_heads
    ok = True
    print(f"diagnostics: peak resident set above the loaded model and input, {name}, float32, 1 excerpt; "
          f"chunk = CHUNK_BYTES {CHUNK_BYTES / 2**20:.0f} MiB per sample")
    print(f"{'N':>6} {'rows':>5} {'map/layer MB':>13} {'hf + metrics MB':>16} {'+ chunk MB':>11} "
          f"{'diagnostics MB':>15} {'s':>5} {'reference MB':>13} {'s':>5}")
    for n in tokens:
        hf, _ = _peak("hf", name, n)
        diag, secs = _peak("diagnostics", name, n)
        ref, ref_s = _peak("reference", name, n) if n <= eager_up_to else (float("nan"), float("nan"))
        bound = hf + CHUNK_BYTES
        mb = 2**20
        print(f"{n:>6} {chunk_rows(heads, n):>5} {heads * n * n * 4 / mb:>13.0f} {hf / mb:>16.0f} "
              f"{bound / mb:>11.0f} {diag / mb:>15.0f} {secs:>5.0f} {ref / mb:>13.0f} {ref_s:>5.0f}")
        ok &= _verdict(f"N = {n}: diagnostics peak {diag / mb:.0f} MB <= hf + metrics by hand + one chunk "
                       f"{bound / mb:.0f} MB", diag <= bound)
    return ok


def part_simulate(repeats: int) -> bool:
    from rankcollapse.dynamics import SimulationConfig, simulate

    def seconds(metrics: str | None, layers: int) -> float:
        cfg = SimulationConfig(mask="window:w=8", tokens=16384, d=16, layers=layers, seed=0, metrics=metrics)
        start = time.perf_counter()
        simulate(cfg)
        return time.perf_counter() - start

    per: dict[str, list[float]] = {"default": [], "mu,mu_rel": []}
    for _ in range(repeats):
        for label, metrics in (("default", None), ("mu,mu_rel", "mu,mu_rel")):
            per[label].append((seconds(metrics, 4) - seconds(metrics, 1)) / 3)
    med = {k: statistics.median(v) for k, v in per.items()}
    print("simulate --mask window:w=8 --tokens 16384 --d 16 (samples 8, float64): seconds per layer")
    for k, v in med.items():
        print(f"  {k:>10}: {v:.2f} s/layer")
    ratio = med["default"] / med["mu,mu_rel"]
    return _verdict(f"default metrics {ratio:.2f} x mu,mu_rel per layer", ratio <= 2.0)


def _verdict(what: str, passed: bool) -> bool:
    print(f"{'PASS' if passed else 'FAIL'}: {what}")
    return passed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="all", choices=("analyze", "memory", "diagnostics", "simulate", "all"))
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tokens", default="512,2048,8192")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--eager-up-to", type=int, default=2048)
    ap.add_argument("--cos-rows", default=str(DEFAULT_COS_ROWS),
                    help="analyze's --cos-rows (all: every pair)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    raise_mmap_threshold()
    tokens = [int(t) for t in str(args.tokens).split(",")]
    if args.child:
        child(args.child, args.model, tokens[0])
        return 0
    threads = torch.get_num_threads()
    print(f"load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}, {threads} threads")
    ok = True
    if args.part in ("analyze", "all"):
        cos_rows = args.cos_rows if args.cos_rows == "all" else int(args.cos_rows)
        ok &= part_analyze(args.model, tokens, args.repeats, args.eager_up_to, cos_rows)
    if args.part in ("memory", "all"):
        ok &= part_memory(args.model, tokens)
    if args.part in ("diagnostics", "all"):
        ok &= part_diagnostics(args.model, tokens, args.eager_up_to)
    if args.part in ("simulate", "all"):
        ok &= part_simulate(args.repeats)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
