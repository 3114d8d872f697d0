"""Cost of `full` mode against a plain transformers forward pass with output_hidden_states=True.

Prints, per model: the seconds of (a) ``hf_model(ids, output_hidden_states=True)``,
(b) our ``full`` mode stream (``iter_hidden_states``, backend ``hf``: the model's own layer
modules), (c) the same from parts (backend ``parts``: generic blocks, reference softmax), and
(d) the metrics (``collapse_metrics`` + ``summarize`` on every hidden state), reported apart.
Runs are interleaved; seconds are minima over repeats. Ratios (b)/(a) and (c)/(a); the
quality bar is (b)/(a) <= 1.15.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_models.py [--repeats 7] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rankcollapse.models import iter_hidden_states, load_model
from rankcollapse.models.analyze import measure


def _interleaved_seconds(fns: dict[str, object], repeats: int) -> dict[str, tuple[float, float]]:
    """(min, median) seconds of each function, run in rotation so that load from other processes
    hits all of them alike; the minimum is the least noisy estimate on a shared CPU."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()  # warm-up
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {k: (min(v), statistics.median(v)) for k, v in times.items()}


def bench(name: str, samples: int, tokens: int, repeats: int, dtype: str = "f32") -> dict[str, float]:
    model = load_model(name, dtype)
    vocab = 30000 if name.startswith("random:") else len(model.tokenizer)
    ids = torch.randint(0, vocab, (samples, tokens), generator=torch.Generator().manual_seed(0))

    def plain() -> None:
        with torch.inference_mode():
            model.hf_model(input_ids=ids, output_hidden_states=True)

    def ours(backend: str) -> None:
        for _ in iter_hidden_states(model, ids, backend=backend):
            pass

    def metrics() -> None:
        for _, _, x in iter_hidden_states(model, ids):
            measure(x, None, threads=1)  # as analyze() does by default (metric_threads=1)

    t = _interleaved_seconds({"plain": plain, "ours_hf": lambda: ours("hf"),
                              "ours_parts": lambda: ours("parts"), "with_metrics": metrics}, repeats)
    out = {f"{k}_min": v[0] for k, v in t.items()} | {f"{k}_median": v[1] for k, v in t.items()}
    out["metrics_only"] = max(t["with_metrics"][0] - t["ours_hf"][0], 0.0)
    out["ratio_hf"] = t["ours_hf"][0] / t["plain"][0]
    out["ratio_parts"] = t["ours_parts"][0] / t["plain"][0]
    out["ratio_hf_median"] = t["ours_hf"][1] / t["plain"][1]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="random:llama and minilm only, small batches")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = [("random:llama", 8, 64), ("minilm", 8, 64)] if args.quick else [
        ("random:bert", 16, 128), ("random:gpt2", 16, 128), ("minilm", 16, 128), ("smollm2", 8, 128)]
    print(f"torch threads: {torch.get_num_threads()}; {args.repeats} interleaved repeats; "
          "seconds are minima (ratio of medians in the last column); CPU may be shared")
    print(f"{'model':<14}{'batch':>9}{'plain':>9}{'full/hf':>9}{'ratio':>7}{'full/parts':>11}{'ratio':>7}"
          f"{'metrics':>9}{'med.ratio':>10}")
    for name, samples, tokens in cases:
        r = bench(name, samples, tokens, args.repeats)
        print(f"{name:<14}{samples:>4}x{tokens:<4}{r['plain_min']:>9.4f}{r['ours_hf_min']:>9.4f}"
              f"{r['ratio_hf']:>7.3f}{r['ours_parts_min']:>11.4f}{r['ratio_parts']:>7.3f}"
              f"{r['metrics_only']:>9.4f}{r['ratio_hf_median']:>10.3f}")


if __name__ == "__main__":
    main()
