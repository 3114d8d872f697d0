"""The kernel path of ``--diagnostics`` on a lent GPU (issue 41): prepared, not run here (no GPU in the
sessions that wrote it). One short script, about 5 minutes on one H100:

    .venv/bin/python benchmarks/gpu_diagnostics.py [--tokens 4096,8192,32768] [--skip-flex]

1. ``kernels``: ``models.lse_attention.attention_lse`` with the CUDA memory-efficient kernel
   (``cuda-efficient``: ``compute_log_sumexp``) against the ``blocks`` kernel in float64 on the same GPU,
   out and lse, for a causal call, a bool sliding window and an additive padding mask (GQA 8/2, 1,024
   tokens); ``attention_with_stats`` (the rows: entropy, first-token attention) against the rows of the
   float64 map; and, unless ``--skip-flex``, FlexAttention's ``return_lse`` with a value width of 2e
   (``V' = [V, K]`` without padding q and k: the path planned for GPUs) against the same rows.
2. ``families``: tiny Llama, Mistral, GPT-2 and BERT on ``cuda``, float32: every diagnostic column of the
   kernel path against the materialising reference (bar ``n L eps32``).
3. ``speed``: a SmolLM2-shaped Llama (d 576, 30 layers, 9 / 3 heads, random weights: the timing does not
   depend on them) built in memory on ``cuda``, float32, one sequence of each ``--tokens``: the plain
   ``analyze`` forward (``--metrics mu``) against ``--diagnostics``, wall seconds (synchronised) and
   ``torch.cuda.max_memory_allocated``; the targets of the CPU table (1.3 x, 1.1 x) printed beside.

Every part prints its table or the one-line error that stopped it, then the next part runs.
"""

from __future__ import annotations

import argparse
import math
import time
import traceback

import torch

EPS32 = torch.finfo(torch.float32).eps


def part_kernels(skip_flex: bool) -> None:
    from rankcollapse.core.attention import masked_softmax
    from rankcollapse.metrics.diagnostics import attention_rows
    from rankcollapse.models.lse_attention import attention_lse, attention_with_stats, kernel_mask

    dev = torch.device("cuda")
    b, h, g, n, e = 2, 8, 2, 1024, 64
    gen = torch.Generator(device="cpu").manual_seed(0)
    q = (2 * torch.randn(b, h, n, e, generator=gen)).to(dev)
    k = torch.randn(b, g, n, e, generator=gen).to(dev)
    v = torch.randn(b, g, n, e, generator=gen).to(dev)
    i, j = torch.arange(n, device=dev)[:, None], torch.arange(n, device=dev)[None]
    padded = torch.ones(b, 1, n, n, dtype=torch.bool, device=dev)
    padded[1, :, :, 700:] = False
    padded[1, :, 700:, 700:] |= torch.eye(n - 700, dtype=torch.bool, device=dev)
    window = ((j <= i) & (j > i - 128))[None, None]
    additive = torch.zeros(b, 1, n, n, device=dev).masked_fill(~padded, torch.finfo(torch.float32).min)
    cases = {"causal": (None, True, (j <= i).expand(b, 1, n, n)),
             "window": (window, False, window.expand(b, 1, n, n)),
             "padded": (additive, False, padded)}
    scale = e ** -0.5
    kk, vv = k.repeat_interleave(h // g, 1), v.repeat_interleave(h // g, 1)
    print("kernels: cuda-efficient (float32) against blocks (float64), and the rows against the float64 map")
    print(f"{'mask':>8} {'out dev':>9} {'lse dev':>9} {'entropy dev':>12} {'first dev':>10} "
          f"{'flex H dev':>11}")
    for name, (given, causal, allowed) in cases.items():
        m32 = kernel_mask(given, causal, n, n, torch.float32, dev)
        m64 = kernel_mask(None if given is None else given.double() if given.is_floating_point() else given,
                          causal, n, n, torch.float64, dev)
        out, lse = attention_lse(q, kk, vv, m32, scale, kernel="cuda-efficient")
        ref_out, ref_lse = attention_lse(q.double(), kk.double(), vv.double(), m64, scale, kernel="blocks")
        _, rows = attention_with_stats(q, k, v, m32, scale)
        a = masked_softmax(scale * q.double() @ kk.double().transpose(-1, -2), allowed)
        ref = attention_rows(a, allowed)
        flex = float("nan")
        if not skip_flex:
            try:
                flex = _flex_entropy(q, kk, allowed, scale, ref.entropy)
            except Exception as err:  # a torch without GPU flex: say so, go on
                print(f"  flex: {type(err).__name__}: {str(err).splitlines()[0][:100]}")
        print(f"{name:>8} {float((out.double() - ref_out).abs().max()):>9.2e} "
              f"{float((lse.double() - ref_lse).abs().max()):>9.2e} "
              f"{float((rows.entropy - ref.entropy).abs().max()):>12.2e} "
              f"{float((rows.first - ref.first).abs().max()):>10.2e} {flex:>11.2e}")


def _flex_entropy(q: torch.Tensor, k: torch.Tensor, allowed: torch.Tensor, scale: float,
                  want: torch.Tensor) -> float:
    """FlexAttention with ``return_lse`` on values ``[K]`` only (q and k unpadded): the entropy rows'
    largest deviation from ``want``."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    b, _, n, _ = q.shape
    dense = allowed.expand(b, 1, n, n)

    def mask_mod(bi, hi, qi, ki):
        return dense[bi, 0, qi, ki]

    block = create_block_mask(mask_mod, b, None, n, n, device=q.device)
    fn = torch.compile(flex_attention)
    ak, lse = fn(q, k, k, block_mask=block, scale=scale, return_lse=True)
    entropy = lse.double() - scale * (q.double() * ak.double()).sum(-1)
    return float((entropy - want).abs().max())


def part_families() -> None:
    from rankcollapse.models import AnalyzeConfig, analyze, load_model

    ids = torch.randint(0, 30000, (3, 64), generator=torch.Generator().manual_seed(1))
    print("families: cuda, float32, 3 x 64 tokens, kernel path against the whole maps")
    for arch in ("llama", "mistral", "gpt2", "bert"):
        model = load_model(f"tiny:{arch}", "float32", seed=0, device="cuda")
        cfg = dict(model=f"tiny:{arch}", samples=3, tokens=64, metrics=("mu",), diagnostics=True,
                   device="cuda")
        ref = analyze(AnalyzeConfig(**cfg), model=model, ids=ids, on_attention=lambda t, a: None)
        got = analyze(AnalyzeConfig(**cfg), model=model, ids=ids)
        worst = 0.0
        for a, b in zip(ref.rows, got.rows, strict=True):
            for key, want in a.items():
                if key.startswith(("attention_entropy", "first_token_attention", "normalized", "sink_rate")):
                    if isinstance(want, float) and not math.isnan(want):
                        worst = max(worst, abs(b[key] - want) / max(abs(want), 1e-3))
        bar = 64 * (len(ref.rows) - 1) * EPS32
        print(f"  {arch:>8}: {got.model_info['diagnostics_path'][:6]} {got.model_info['backend']:>5} "
              f"max rel dev {worst:.2e} (bar {bar:.1e}) {'PASS' if worst <= bar else 'FAIL'}")


def part_speed(tokens: list[int]) -> None:
    from transformers import LlamaConfig, LlamaModel

    from rankcollapse.models import AnalyzeConfig, analyze

    print("speed: SmolLM2-shaped Llama (random weights), cuda, float32, 1 sequence, --metrics mu")
    print(f"{'N':>6} {'plain s':>8} {'diag s':>8} {'ratio':>6} {'plain GiB':>10} {'diag GiB':>9} "
          f"{'ratio':>6}")
    for n in tokens:
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                             num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                             max_position_embeddings=max(n, 8192), tie_word_embeddings=True)
        model = LlamaModel(config).to("cuda").eval()
        ids = torch.randint(0, 49152, (1, n), generator=torch.Generator().manual_seed(0))
        got = {}
        for kind in ("plain", "diagnostics", "plain", "diagnostics"):  # the first pair warms up
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            analyze(AnalyzeConfig(model="smollm2-shaped", samples=1, tokens=n, metrics=("mu",),
                                  diagnostics=kind == "diagnostics", device="cuda"), model=model, ids=ids)
            torch.cuda.synchronize()
            got[kind] = (time.perf_counter() - start, torch.cuda.max_memory_allocated())
        (p, pm), (d, dm) = got["plain"], got["diagnostics"]
        gib = 2**30
        print(f"{n:>6} {p:>8.2f} {d:>8.2f} {d / p:>6.2f} {pm / gib:>10.2f} {dm / gib:>9.2f} {dm / pm:>6.2f}")
        del model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="4096,8192,32768")
    parser.add_argument("--skip-flex", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this script is for a lent GPU")
    print(torch.cuda.get_device_name(0), torch.__version__)
    for part in (lambda: part_kernels(args.skip_flex), part_families,
                 lambda: part_speed([int(t) for t in args.tokens.split(",")])):
        try:
            part()
        except Exception:
            print(traceback.format_exc().splitlines()[-1])


if __name__ == "__main__":
    main()
