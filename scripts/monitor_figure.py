"""The figure of docs/monitor.md: collapse telemetry of a small GPT-2 trained from random init on Shakespeare.

A GPT-2-style model (4 layers, d = 128, 4 heads, the bundled BERT tokenizer's vocabulary) is trained
with AdamW (lr 1e-3) on excerpts of 64 tokens from the first 90 % of the Shakespeare corpus, batches
of 8; a :class:`rankcollapse.monitor.Monitor` probes every 10 steps (and at step 0) on 16 held-out
excerpts from the last 10 %, default metrics and diagnostics. Writes ``docs/monitor.png`` (and the rows
to ``--out``, default a temporary folder: results are not committed).

    python scripts/monitor_figure.py --steps 400
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from rankcollapse.models.corpora import sample_token_batches, token_stream
    from rankcollapse.models.loading import bert_tokenizer
    from rankcollapse.monitor import Monitor, plot_monitor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="folder for the rows (default: a temporary one)")
    parser.add_argument("--figure", default=str(ROOT / "docs" / "monitor.png"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    tok = bert_tokenizer()
    ids = token_stream("shakespeare", tok).ids
    cut = int(0.9 * ids.numel())
    train_ids, held_out = ids[:cut], ids[cut:]
    data = sample_token_batches(train_ids, 8 * args.steps, 64, seed=0, start_token=tok.cls_token_id).split(8)
    probe = sample_token_batches(held_out, 16, 64, seed=1, start_token=tok.cls_token_id)

    config = GPT2Config(
        n_layer=4,
        n_embd=128,
        n_head=4,
        n_positions=64,
        vocab_size=len(tok),
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = args.out or tempfile.mkdtemp(prefix="monitor-figure-")
    start = time.perf_counter()
    with Monitor(every=args.every, diagnostics=True, probe=probe, out=out) as monitor:
        monitor.measure(model, step=0)  # the initialisation
        for step, batch in enumerate(data, start=1):
            loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            monitor.step(model)
            if step % 50 == 0:
                took = time.perf_counter() - start
                print(f"step {step}: loss {float(loss.detach()):.3f} ({took:.0f} s)", flush=True)
    title = f"GPT-2, 4 layers, d = 128, trained from random init on Shakespeare ({args.steps} steps)"
    panels = [
        "mu_rel",
        "effective_rank",
        "mean_abs_cos",
        "first_token_attention",
        "sink_rate",
        "massive_ratio",
    ]
    plot_monitor(monitor, args.figure, metrics=panels, title=title)
    frame = monitor.to_frame()
    print(
        frame[frame["step"].isin([0, args.steps])]
        .pivot_table(index=["step", "layer"], columns="metric", values="value")
        .round(4)
        .to_string()
    )
    print(f"rows: {out}; figure: {args.figure}; {len(monitor.failures)} failures")


if __name__ == "__main__":
    main()
