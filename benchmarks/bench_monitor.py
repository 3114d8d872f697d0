"""What collapse telemetry costs a training run: a small GPT-2 trained on CPU with and without a Monitor.

A GPT-2-style model (4 layers, d = 128, 4 heads, the bundled BERT tokenizer's 30,522-token vocabulary)
is trained with AdamW on Shakespeare (``rankcollapse.models.corpora``: excerpts of 128 tokens, batches
of 8) for ``--steps`` steps, from the same initial weights on the same batches, once without telemetry
and once with ``Monitor.step`` after every optimiser step (a probe every ``--every`` steps, on a
held-out probe batch of 8 King James Bible excerpts, the default metrics). The two arms alternate,
in both orders, ``--repeats`` times; the added wall time is the median over repeats of
``t_with / t_without - 1`` (between runs: on a loaded machine the load moves between them) and of
``probes / (t_with - probes)`` (inside the run with telemetry: the time of the probing ``Monitor.step``
calls over the rest of that run). The cost per probe is the median wall time of those calls. Other
settings (every metric, the diagnostics) are given as a cost per probe and the added time it makes at
k = 10. Target (issue 29): at most 5 % added wall time at k = 10 with the
default metrics.

    python benchmarks/bench_monitor.py            # 40 steps x 3 repeats (about 10 minutes here)
    python benchmarks/bench_monitor.py --quick    # 15 steps x 2 repeats

``--threads`` (default 1) sets torch's threads: on a shared, oversubscribed machine two-thread ops wait
for scheduler slices and a training step's time says more about the load than about the model.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import torch


def loadavg() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "unknown"


def build(seed: int = 0) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=4,
        n_embd=128,
        n_head=4,
        n_positions=128,
        vocab_size=30522,
        bos_token_id=101,
        eos_token_id=102,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config)


def batches(corpus: str, count: int, batch: int, tokens: int, seed: int) -> list[torch.Tensor]:
    from rankcollapse.models.corpora import sample_token_batches, token_stream
    from rankcollapse.models.loading import bert_tokenizer

    tok = bert_tokenizer()
    stream = token_stream(corpus, tok)
    ids = sample_token_batches(stream, count * batch, tokens, seed, start_token=tok.cls_token_id)
    return list(ids.split(batch))


def train(
    init: torch.nn.Module, data: list[torch.Tensor], monitor: object | None
) -> tuple[float, list[float]]:
    """Wall time of ``len(data)`` AdamW steps from a copy of ``init``; the times of the probing steps."""
    model = copy.deepcopy(init)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    probes: list[float] = []
    start = time.perf_counter()
    for ids in data:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if monitor is not None:
            t0 = time.perf_counter()
            rows = monitor.step(model, ids)
            if rows:
                probes.append(time.perf_counter() - t0)
    return time.perf_counter() - start, probes


def main() -> None:
    from rankcollapse.monitor import Monitor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="15 steps x 2 repeats")
    args = parser.parse_args()
    steps, repeats = (15, 2) if args.quick else (args.steps, args.repeats)
    torch.set_num_threads(args.threads)

    print(
        f"bench_monitor: {os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} "
        f"threads, load average {loadavg()} at start"
    )
    init = build()
    data = batches("shakespeare", steps, 8, 128, seed=0)
    probe = batches("kjv", 1, 8, 128, seed=1)[0]
    train(init, data[:3], None)  # warm-up: allocator, kernels, imports
    Monitor(every=1, probe=probe).step(init, None)

    ratios, inside, per_probe, plain_times = [], [], [], []
    for r in range(repeats):
        monitor = Monitor(every=args.every, probe=probe)
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        times: dict[str, float] = {}
        probes: list[float] = []
        for arm in order:
            times[arm], found = train(init, data, monitor if arm == "on" else None)
            per_probe += found
            probes = found if arm == "on" else probes
        ratios.append(times["on"] / times["off"] - 1.0)
        inside.append(sum(probes) / (times["on"] - sum(probes)))
        plain_times.append(times["off"])
        print(
            f"  repeat {r + 1}: without {times['off']:.2f} s, with {times['on']:.2f} s "
            f"({100 * ratios[-1]:+.1f} %), {len(monitor.failures)} failures"
        )
    step_s = statistics.median(plain_times) / steps
    probe_s = statistics.median(per_probe)
    print(f"training step (no telemetry): {1000 * step_s:.1f} ms median")
    print(f"default metrics ({', '.join(Monitor().config.metrics)}), every {args.every} steps:")
    print(
        f"  added wall time, run with against run without: {100 * statistics.median(ratios):+.1f} % "
        f"(median of {repeats}; min {100 * min(ratios):+.1f} %, max {100 * max(ratios):+.1f} %)"
    )
    print(
        f"  added wall time inside the run with: probes / the rest of the run = "
        f"{100 * statistics.median(inside):.1f} % (median of {repeats}; min {100 * min(inside):.1f} %, "
        f"max {100 * max(inside):.1f} %)"
    )
    print(
        f"  {1000 * probe_s:.1f} ms per probe (median of {len(per_probe)}) = "
        f"{100 * probe_s / (args.every * step_s):.1f} % of {args.every} median steps"
    )

    for label, fields in (
        ("every metric", {"metrics": "all"}),
        ("default metrics + diagnostics", {"diagnostics": True}),
    ):
        monitor = Monitor(every=1, probe=probe, **fields)
        model = copy.deepcopy(init)
        costs = []
        for _ in range(5):
            t0 = time.perf_counter()
            monitor.step(model, None)
            costs.append(time.perf_counter() - t0)
        cost = statistics.median(costs)
        print(
            f"{label}: {1000 * cost:.1f} ms per probe = {100 * cost / (args.every * step_s):.1f} % of "
            f"{args.every} steps"
        )
    print(f"load average {loadavg()} at end")


if __name__ == "__main__":
    main()
