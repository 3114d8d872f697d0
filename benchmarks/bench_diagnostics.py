"""``--diagnostics`` and ``--check-masks`` at the kernel's speed (issue 41): time, memory and exactness.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_diagnostics.py
        [--part speed|long|verify|masks|all] [--model smollm2] [--tokens 4096,8192] [--repeats 1]
        [--long-tokens 32768] [--verify-tokens 2048] [--threads 1]

Every run is ``analyze`` of Wikipedia excerpts (seed 0), float32, mode ``full``, ``--metrics mu`` (the
cheapest collapse column: what is timed is the forward), each in a fresh process (a process's peak
resident set only grows) on ``--threads`` torch threads; set ``OMP_NUM_THREADS`` to the same number for
both arms of a pair (the table says which). Each part prints a table and a PASS/FAIL line per target.

``speed``: per N, ``--repeats`` pairs back to back, ``plain`` (no diagnostics) then ``diagnostics``: the
forward seconds ``analyze`` reports (``seconds["forward"]``: the layers, their attention and, with
diagnostics, each layer's statistics; the activation columns are ``seconds["metrics"]``), the process's
peak resident set (sampled every 2 ms; absolute: model, input and run) and the peak above the loaded
state. Targets: forward <= 1.3 x plain, peak <= 1.1 x plain.

``long``: one excerpt of ``--long-tokens`` (32,768) tokens with ``--diagnostics``, and ``check_masks``
on it, and the plain forward (no diagnostics) for the ratio. SmolLM2's config says 8,192 positions: its
``max_position_embeddings`` is raised in memory (rotary positions are computed, not stored; this measures
time and memory, not quality). Targets: the diagnostics run completes within 24 GiB; the mask check
fits too and takes < 2 x the plain forward.

``verify``: every diagnostic column of the kernel path against the reference that forms each layer's
whole map (``on_attention``), on every bundled model installed (MiniLM, MPNet, SmolLM2; Gemma 3, Qwen2.5
with ``make models-extra``), 2 excerpts of ``--verify-tokens`` tokens in float32 (bar ``n L eps32``) and
of 256 tokens in float64 (bar 1e-12): the largest deviation, ``|a - b| / max(|b|, 1)`` for the attention
columns (entropies in nats, shares of a row: absolute below 1) and ``|a - b| / |b|`` for the activations.
The absolute floor is the lse form's own: a row whose weights are one-hot to float64 precision has
``H = 0`` exactly in the map and ``lse_i - scale q_i . (A K)_i``, a difference of two numbers of the
logits' size ``|s|``, about ``eps |s|`` (SmolLM2: ``|s|`` up to ~100, 1e-14 nats). MPNet keeps the
blocks path (a relative-position bias); it is compared all the same.

``masks``: ``check_masks`` on every tiny text family under ``eager``, ``sdpa`` and ``flex_attention``
(compiled by torch on the CPU: about 30 s a shape the first time), 3 excerpts of 12 tokens: the layers
that differ from their config's mask (0 everywhere: no false alarm), and a window one key too wide
planted in Hugging Face's mask code (``sliding_window_overlay``): the layers caught and their offsets.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from typing import Any

import torch

EPS32 = torch.finfo(torch.float32).eps
BUNDLED = ("minilm", "mpnet", "smollm2", "gemma3-270m", "qwen2.5-coder-0.5b")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _Peak:
    """The process's resident set, sampled every 2 ms by a thread while inside."""

    def __enter__(self) -> _Peak:
        self.peak = _rss()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.002)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _model(name: str, tokens: int) -> Any:
    from rankcollapse.models import load_model

    model = load_model(name, "float32", seed=0)
    if tokens > model.max_tokens:  # the long part: positions beyond the config's, computed by the rotary
        model.max_tokens = tokens
        model.hf_model.config.max_position_embeddings = tokens
    return model


def child(kind: str, name: str, tokens: int, threads: int) -> None:
    """One arm in this process: prints {"forward", "metrics", "wall", "peak", "base"} as JSON."""
    from rankcollapse.models import AnalyzeConfig, analyze, excerpts
    from rankcollapse.models.diagnose import check_masks

    torch.set_num_threads(threads)
    model = _model(name, tokens)
    ids = excerpts(model, "wikipedia", samples=1, tokens=tokens, seed=0)
    base = _rss()
    start = time.perf_counter()
    with _Peak() as peak:
        if kind == "masks":
            checks = check_masks(model, ids)
            seconds = {"forward": time.perf_counter() - start, "metrics": 0.0}
            assert all(c.matches for c in checks), [c.describe() for c in checks if not c.matches]
        else:
            config = AnalyzeConfig(model=name, samples=1, tokens=tokens, metrics=("mu",),
                                   diagnostics=kind == "diagnostics")
            result = analyze(config, model=model, ids=ids)
            seconds = dict(result.seconds)
    print(json.dumps({"forward": seconds["forward"], "metrics": seconds["metrics"],
                      "wall": time.perf_counter() - start, "peak": peak.peak, "base": base}))


def _run(kind: str, name: str, tokens: int, threads: int) -> dict[str, float]:
    argv = [sys.executable, __file__, "--child", kind, "--model", name, "--tokens", str(tokens),
            "--threads", str(threads)]
    out = subprocess.run(argv, capture_output=True, text=True, env=os.environ.copy())
    if out.returncode != 0:
        raise SystemExit(f"{kind} at {tokens} tokens failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _verdict(what: str, ok: bool) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}: {what}")
    return ok


def _threads_note(threads: int) -> str:
    return f"torch threads {threads}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"


def part_speed(name: str, tokens: list[int], repeats: int, threads: int) -> bool:
    ok = True
    print(f"speed: {name}, float32, 1 excerpt, --metrics mu, each arm a fresh process, "
          f"{_threads_note(threads)}")
    print(f"{'N':>6} {'pair':>4} {'plain fwd s':>11} {'diag fwd s':>10} {'ratio':>6} {'plain peak MB':>13} "
          f"{'diag peak MB':>12} {'ratio':>6} {'plain +MB':>9} {'diag +MB':>8} {'diag metrics s':>14}")
    for n in tokens:
        for r in range(repeats):
            plain = _run("plain", name, n, threads)
            diag = _run("diagnostics", name, n, threads)
            fwd = diag["forward"] / plain["forward"]
            mem = diag["peak"] / plain["peak"]
            mb = 2**20
            print(f"{n:>6} {r + 1:>4} {plain['forward']:>11.1f} {diag['forward']:>10.1f} {fwd:>6.2f} "
                  f"{plain['peak'] / mb:>13.0f} {diag['peak'] / mb:>12.0f} {mem:>6.2f} "
                  f"{(plain['peak'] - plain['base']) / mb:>9.0f} {(diag['peak'] - diag['base']) / mb:>8.0f} "
                  f"{diag['metrics']:>14.1f}", flush=True)
            ok &= _verdict(f"N = {n}, pair {r + 1}: diagnostics forward {fwd:.2f} x plain (<= 1.3)",
                           fwd <= 1.3)
            ok &= _verdict(f"N = {n}, pair {r + 1}: peak {mem:.2f} x plain (<= 1.1)", mem <= 1.1)
    return ok


def part_long(name: str, tokens: int, threads: int) -> bool:
    print(f"long: {name}, {tokens} tokens, float32, 1 excerpt, --metrics mu, {_threads_note(threads)}")
    got = {kind: _run(kind, name, tokens, threads) for kind in ("diagnostics", "masks", "plain")}
    gib = 2**30
    print(f"{'run':>12} {'forward s':>10} {'wall s':>8} {'peak GiB':>9} {'+GiB':>6}")
    for kind, r in got.items():
        print(f"{kind:>12} {r['forward']:>10.1f} {r['wall']:>8.1f} {r['peak'] / gib:>9.2f} "
              f"{(r['peak'] - r['base']) / gib:>6.2f}")
    ratio = got["masks"]["wall"] / got["plain"]["forward"]
    peak = got["diagnostics"]["peak"]
    ok = _verdict(f"diagnostics at {tokens} tokens completes, peak {peak / gib:.2f} GiB (<= 24)",
                  peak <= 24 * gib)
    ok &= _verdict(f"check_masks at {tokens} tokens: peak {got['masks']['peak'] / gib:.2f} GiB (<= 24), "
                   f"{ratio:.2f} x the plain forward (< 2)", got["masks"]["peak"] <= 24 * gib and ratio < 2)
    print(f"diagnostics forward / plain forward at {tokens}: "
          f"{got['diagnostics']['forward'] / got['plain']['forward']:.2f}")
    return ok


def _deviation(ref: list[dict[str, Any]], got: list[dict[str, Any]]) -> tuple[float, str]:
    from rankcollapse.metrics.diagnostics import DIAGNOSTIC_NAMES

    names = set(DIAGNOSTIC_NAMES) | {"top_activation"}
    attention = ("attention_entropy", "normalized_attention_entropy", "first_token_attention", "sink_rate")
    worst, where = 0.0, ""
    for a, b in zip(ref, got, strict=True):
        for key, want in a.items():
            if not (key in names or key.startswith(("attention_entropy_h", "first_token_attention_h"))):
                continue
            have = b[key]
            if isinstance(want, float) and not math.isnan(want):
                floor = 1.0 if key.startswith(attention) else 1e-300
                dev = abs(have - want) / max(abs(want), floor)
                if dev > worst:
                    worst, where = dev, f"layer {a['layer']} {key}"
    return worst, where


def part_verify(tokens: int, threads: int) -> bool:
    from rankcollapse.models import AnalyzeConfig, analyze, excerpts, load_model

    torch.set_num_threads(threads)
    ok = True
    print(f"verify: the kernel path against the whole maps (on_attention), 2 excerpts, "
          f"{_threads_note(threads)}")
    print(f"{'model':>20} {'dtype':>8} {'N':>5} {'path':>7} {'max rel dev':>12} {'bar':>9}  where")
    for name in BUNDLED:
        for dtype, n in (("float32", tokens), ("float64", 256)):
            try:
                model = load_model(name, dtype, seed=0)
            except Exception as err:  # an opt-in model not installed here
                print(f"{name:>20} {dtype:>8} {'-':>5} (not here: {str(err).splitlines()[0][:60]})")
                break
            n = min(n, model.max_tokens)
            ids = excerpts(model, "wikipedia", samples=2, tokens=n, seed=0)
            cfg = AnalyzeConfig(model=name, dtype=dtype, samples=2, tokens=n, metrics=("mu",),
                                diagnostics=True)
            ref = analyze(cfg, model=model, ids=ids, on_attention=lambda t, a: None)
            got = analyze(cfg, model=model, ids=ids)
            dev, where = _deviation(ref.rows, got.rows)
            bar = 1e-12 if dtype == "float64" else n * (len(ref.rows) - 1) * EPS32
            path = got.model_info["diagnostics_path"].split(":")[0]
            print(f"{name:>20} {dtype:>8} {n:>5} {path:>7} {dev:>12.2e} {bar:>9.1e}  {where}", flush=True)
            ok &= _verdict(f"{name} {dtype} N = {n}: {dev:.2e} <= {bar:.1e}", dev <= bar)
            del model
    return ok


def part_masks(threads: int) -> bool:
    from unittest import mock

    import transformers.masking_utils as hf_masks

    from rankcollapse.models import load_model
    from rankcollapse.models.diagnose import check_masks

    torch.set_num_threads(threads)
    families = ["bert", "roberta", "distilbert", "albert", "mpnet", "t5", "gpt2", "gpt_neox", "llama",
                "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text"]
    ids = torch.randint(0, 30000, (3, 12), generator=torch.Generator().manual_seed(1))
    wider = hf_masks.sliding_window_overlay
    ok = True
    print(f"masks: check_masks on the tiny families, 3 x 12 tokens, {_threads_note(threads)}")
    print(f"{'family':>12} {'implementation':>15} {'false alarms':>13} "
          f"{'window + 1 caught (layer: offset)':>40} {'s':>5}")
    for arch in families:
        model = load_model(f"tiny:{arch}", "float32", seed=0)
        for impl in ("eager", "sdpa", "flex_attention"):
            start = time.perf_counter()
            clean = check_masks(model, ids, implementation=impl)
            with mock.patch.object(hf_masks, "sliding_window_overlay", lambda w: wider(w + 1)):
                planted = check_masks(model, ids, implementation=impl)
            alarms = [c.layer for c in clean if not c.matches]
            caught = " ".join(f"{c.layer}:{c.offset[0]:+d},{c.offset[1]:+d}" for c in planted
                              if not c.matches and c.offset is not None) or "-"
            print(f"{arch:>12} {impl:>15} {len(alarms):>13} {caught:>40} {time.perf_counter() - start:>5.0f}",
                  flush=True)
            ok &= _verdict(f"{arch} {impl}: no false alarm", not alarms)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="all", choices=("speed", "long", "verify", "masks", "all"))
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tokens", default="4096,8192")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--long-tokens", type=int, default=32768)
    parser.add_argument("--verify-tokens", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    from rankcollapse.edge.runtime import raise_mmap_threshold

    raise_mmap_threshold()
    if args.child is not None:
        child(args.child, args.model, int(args.tokens), args.threads)
        return
    ok = True
    if args.part in ("speed", "all"):
        ok &= part_speed(args.model, [int(t) for t in args.tokens.split(",")], args.repeats, args.threads)
    if args.part in ("verify", "all"):
        ok &= part_verify(args.verify_tokens, args.threads)
    if args.part in ("masks", "all"):
        ok &= part_masks(args.threads)
    if args.part in ("long", "all"):
        ok &= part_long(args.model, args.long_tokens, args.threads)
    print("ALL PASS" if ok else "SOME FAIL")


if __name__ == "__main__":
    main()
