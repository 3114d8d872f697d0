"""The paper-scale model workload per layer, every variant, against Hugging Face's own forward.

Workload: a BERT-base-sized model (default ``random:bert-base-uncased``: d = 768, 12 heads,
MLP 3072, 12 layers), batches of ``--samples`` Wikipedia excerpts of ``--tokens`` = 128 tokens
(the paper's N). For each of the paper's five variants (modes ``attn``, ``attn+skip``,
``attn+ln``, ``attn+skip+ln``, ``full``) it times our layer stream (``iter_hidden_states``,
12 layers; ``full`` on both backends) and Hugging Face's own forward
(``hf_model(ids, output_hidden_states=True)``) on the same batch. Runs are interleaved; seconds
are minima over repeats (the least noisy estimate on a shared CPU).

Printed per variant: seconds per layer, the ratio to HF's seconds per layer (the bar for ``full``
is <= 1.1), the FLOPs per layer (multiply-adds x 2: Q/K/V/O projections ``8 b n d^2``, scores and
weighted values ``4 b n^2 d``, MLP ``4 b n d d_ff``) and the time per FLOP relative to HF's full
layer and, for BERT, to HF's own attention sub-layer (``BertAttention``: attention, output dense,
skip, LayerNorm — the same work as ``attn+skip+ln``); the bar for the surgery modes is <= 1, "no
slower per FLOP". The last line estimates the paper's profile (3000 samples) per layer from the
measured seconds per sample-layer.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_models.py [--samples 4] [--repeats 3]
        [--model random:bert-base-uncased] [--dtype float32] [--threads 1] [--mask complete]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from rankcollapse.masks import parse_mask
from rankcollapse.models import PAPER_VARIANTS, excerpts, iter_hidden_states, load_model

PAPER_SAMPLES = 3000


def interleaved_seconds(fns: dict[str, Callable[[], None]], repeats: int) -> dict[str, tuple[float, float]]:
    """(min, median) seconds of each function, run in rotation so that load from other processes
    hits all of them alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()  # warm-up
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {k: (min(v), statistics.median(v)) for k, v in times.items()}


def layer_flops(mode: str, b: int, n: int, d: int, d_ff: int) -> float:
    """FLOPs of one layer in ``mode`` (2 per multiply-add; norms, softmax and biases left out)."""
    attn = 8.0 * b * n * d * d + 4.0 * b * n * n * d
    return attn + (4.0 * b * n * d * d_ff if mode == "full" else 0.0)


def bench(name: str, samples: int, tokens: int, repeats: int, dtype: str, mask: str | None) -> None:
    model = load_model(name, dtype, seed=0)
    ids = excerpts(model, "wikipedia", samples=samples, tokens=tokens, seed=0)
    the_mask = parse_mask(mask) if mask else None
    n_layers = len(model.layers)
    d, d_ff = model.d_model, int(getattr(model.hf_model.config, "intermediate_size", 4 * model.d_model))

    def hf() -> None:
        with torch.inference_mode():
            model.hf_model(input_ids=ids, output_hidden_states=True)

    def ours(mode: str, backend: str) -> Callable[[], None]:
        def run() -> None:
            for _ in iter_hidden_states(model, ids, mode=mode, mask=the_mask, backend=backend):
                pass
        return run

    def hf_attention() -> None:  # HF's own attention sub-layers, one after the other (BERT)
        with torch.inference_mode():
            x = model.embed(ids)
            for layer in model.hf_model.encoder.layer:
                out = layer.attention(x)
                x = out[0] if isinstance(out, tuple) else out

    fns: dict[str, Callable[[], None]] = {"hf": hf}
    if model.arch == "bert" and the_mask is None:
        fns["hf_attention"] = hf_attention
    for mode in PAPER_VARIANTS.values():
        fns[mode] = ours(mode, "parts")
    if the_mask is None:
        fns["full (hf backend)"] = ours("full", "hf")
    t = interleaved_seconds(fns, repeats)
    hf_layer = t["hf"][0] / n_layers
    hf_per_flop = hf_layer / layer_flops("full", samples, tokens, d, d_ff)
    attn_flops = layer_flops("attn", samples, tokens, d, d_ff)
    hf_attn_per_flop = t["hf_attention"][0] / n_layers / attn_flops if "hf_attention" in t else None
    print(f"{model.label}, {dtype}, batch {samples} x {tokens} tokens, mask {mask or model.own_mask}, "
          f"{n_layers} layers; torch threads {torch.get_num_threads()}; {repeats} interleaved repeats; "
          "minima (median ratio in the last column)")
    print(f"{'variant':<26}{'mode':<14}{'s/layer':>9}{'x HF':>7}{'GFLOP':>8}{'per FLOP':>10}"
          f"{'vs HF attn':>12}{'med x HF':>10}")
    print(f"{'HF forward (own layers)':<26}{'':<14}{hf_layer:>9.4f}{1.0:>7.2f}"
          f"{layer_flops('full', samples, tokens, d, d_ff) / 1e9:>8.2f}{1.0:>10.2f}{'':>12}{1.0:>10.2f}")
    if hf_attn_per_flop is not None:
        per, med = t["hf_attention"][0] / n_layers, t["hf_attention"][1] / t["hf"][1]
        print(f"{'HF attention sub-layer':<26}{'':<14}{per:>9.4f}{per / hf_layer:>7.2f}"
              f"{attn_flops / 1e9:>8.2f}{hf_attn_per_flop / hf_per_flop:>10.2f}{1.0:>12.2f}{med:>10.2f}")
    names = {mode: variant for variant, mode in PAPER_VARIANTS.items()}
    for key, (best, median) in t.items():
        if key in ("hf", "hf_attention"):
            continue
        mode = "full" if key.startswith("full") else key
        suffix = " (HF modules)" if key != mode else " (from parts)" if mode == "full" else ""
        variant = names[mode] + suffix
        per_layer = best / n_layers
        flops = layer_flops(mode, samples, tokens, d, d_ff)
        vs_attn = (f"{(per_layer / flops) / hf_attn_per_flop:>12.2f}"
                   if hf_attn_per_flop is not None and mode != "full" else f"{'':>12}")
        print(f"{variant:<26}{mode:<14}{per_layer:>9.4f}{per_layer / hf_layer:>7.2f}{flops / 1e9:>8.2f}"
              f"{(per_layer / flops) / hf_per_flop:>10.2f}{vs_attn}{median / t['hf'][1]:>10.2f}")
    best_full = min(v[0] for k, v in t.items() if k.startswith("full"))
    total = best_full / n_layers / samples * PAPER_SAMPLES
    print(f"paper profile estimate ({PAPER_SAMPLES} samples, full mode, {dtype}, these threads): "
          f"{total:.1f} s per layer, {total * n_layers / 60:.1f} min per {n_layers}-layer run "
          "(metrics apart)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="random:bert-base-uncased")
    parser.add_argument("--samples", type=int, default=4, help="excerpts per batch (paper: 3000 in all)")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per excerpt (paper: 128)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--mask", default=None, help="mask spec (default: the model's own)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: stable under load)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bench(args.model, args.samples, args.tokens, args.repeats, args.dtype, args.mask)


if __name__ == "__main__":
    main()
