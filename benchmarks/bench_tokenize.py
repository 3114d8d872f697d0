"""Peak memory of encoding a large ``--text-file``: pieces (``corpora.tokenize``) against one tokenizer call.

    .venv/bin/python benchmarks/bench_tokenize.py [--mb 60] [--one-call-mb 8] [--model tiny:bert]

Each figure is one fresh process (``ru_maxrss`` of the child: its peak resident memory) that loads the
model's tokenizer, builds a text of ``--mb`` MB (lines of words, whitespace runs of every kind; seeded),
and encodes it: ``pieces`` through :func:`rankcollapse.models.corpora.tokenize` (pieces of at most
``TOKENIZE_CHARS`` characters), ``one call`` through the tokenizer itself (the old way; run on
``--one-call-mb`` only, as 60 MB in one call took 10.6 GB and aborted). The baseline is the same process
with the text built but not encoded. Prints MB of peak memory above the baseline, per MB of text, and the
wall and CPU seconds; nothing is judged.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

_CHILD = """
import json, random, resource, sys, time
from rankcollapse.models.loading import load_model
from rankcollapse.models.corpora import tokenize
mode, mb, model = sys.argv[1], float(sys.argv[2]), sys.argv[3]
tok = load_model(model).tokenizer
rng = random.Random(0)
words = ["the", "Cat", "sat", "on", "mat.", "don't", "1234", "x\\u00e9", "a", "l'\\u00e9t\\u00e9", "'s", "12",
         "Zz"]
runs = ["\\n", "\\n\\n", " \\n ", "\\t\\n"]
line = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + rng.choice(runs)
        for _ in range(5000)]
block = "".join(line)
text = (block * (int(mb * 1e6) // len(block) + 1))[: int(mb * 1e6)]
start, cpu = time.perf_counter(), time.process_time()
n = 0
if mode == "pieces":
    n = int(tokenize(text, tok).numel())
elif mode == "one call":
    n = len(tok(text, add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"peak": peak, "tokens": n, "wall": time.perf_counter() - start,
                  "cpu": time.process_time() - cpu}))
"""


def measure(mode: str, mb: float, model: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(mb), model], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=60.0)
    parser.add_argument("--one-call-mb", type=float, default=8.0)
    parser.add_argument("--model", default="tiny:bert")
    args = parser.parse_args()
    with open("/proc/loadavg") as fh:
        print(f"load average: {fh.read().split()[0]} ({args.model})")
    for mode, mb in (("pieces", args.mb), ("one call", args.one_call_mb), ("pieces", args.one_call_mb)):
        base = measure("baseline", mb, args.model)["peak"]
        t0 = time.perf_counter()
        got = measure(mode, mb, args.model)
        extra = (got["peak"] - base) / 1e6
        print(f"{mode:>8} on {mb:g} MB: {got['tokens']} tokens, peak {got['peak'] / 1e6:.0f} MB "
              f"({extra:.0f} MB above the text alone, {extra / mb:.1f} MB per MB of text), "
              f"{got['wall']:.1f} s wall, {got['cpu']:.1f} s CPU (process {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
