"""mu_rel and effective rank per layer of a model on 8 texts: rankcollapse, TransformerLens 4.3, HF by hand.

    HF_HUB_OFFLINE=1 PYTHONPATH=src .venv/bin/python benchmarks/bench_vs_transformerlens.py \\
        [--tl-python /tmp/tlvenv/bin/python] [--repeats 3] [--tokens 128]

TransformerLens lives in its own virtual environment (it pins other packages than ours)::

    python3.11 -m venv /tmp/tlvenv && /tmp/tlvenv/bin/pip install torch==2.13.0 transformer-lens==4.3.0

The task: "mu_rel and effective rank per layer of my model on 8 texts". The model is SmolLM2-135M as
``rankcollapse`` converts it once (a Llama folder on disk: ``config.json``, ``model.safetensors``, the
tokenizer), the texts the first 8 Wikipedia lead sections of our corpus, each cut to ``--tokens``
tokens after the BOS token; float32 on the CPU. Each user snippet below is a string, executed as
written in a fresh process (``MODEL_DIR`` and ``TEXTS`` given), in two timed parts: ``load`` (imports
and the model) and ``measure`` (the 8 texts). A row's ``lines`` counts the snippet's non-blank,
non-comment lines; ``seconds`` are medians over ``--repeats`` fresh processes (the rounds interleave the
three, so the machine's load falls on all alike); ``peak RSS`` is the largest ``ru_maxrss`` of those
processes (the whole process: Python, torch, the model, the activations).

Rows: row 0 is the embeddings output (TransformerLens ``blocks.0.hook_resid_pre``), row t the residual
stream after t layers (``blocks.{t-1}.hook_resid_post``), before the final norm; each value is the mean
over the 8 texts of the per-text value on its real tokens. The script asserts that the three agree to
``RTOL`` in every row, then prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RTOL = 1e-3
"""Largest relative difference allowed between two contenders' values (float32; SDPA vs eager kernels)."""

OURS_LOAD = """
from transformers import AutoModel
from rankcollapse.models import AnalyzeConfig, analyze
model = AutoModel.from_pretrained(MODEL_DIR)
"""

OURS_MEASURE = """
config = AnalyzeConfig(tokens=TOKENS, metrics="mu_rel,effective_rank")
rows = analyze(config, model=model, texts=TEXTS, tokenizer=MODEL_DIR).rows
values = [(r["mu_rel"], r["effective_rank"]) for r in rows]
"""

# Shared by both hand-written snippets (counted in each): the two measures, per text [n, d].
MEASURES = """
def mu_rel(x):
    return ((x - x.mean(0)).norm() / x.norm()).item()
def effective_rank(x):
    s = torch.linalg.svdvals(x)
    p = s / s.sum()
    return torch.exp(-(p * p.log()).sum()).item()
def mean_over_texts(per_text):
    return [tuple(sum(v[k] for v in layer) / len(layer) for k in range(2)) for layer in zip(*per_text)]
"""

TL_LOAD = """
import torch
from transformers import AutoTokenizer, LlamaForCausalLM
from transformer_lens.model_bridge import TransformerBridge
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
hf_model = LlamaForCausalLM.from_pretrained(MODEL_DIR)
model = TransformerBridge.boot_transformers(MODEL_DIR, hf_model=hf_model, tokenizer=tokenizer)
"""

TL_MEASURE = MEASURES + """
names = ["blocks.0.hook_resid_pre"] + [f"blocks.{l}.hook_resid_post" for l in range(model.cfg.n_layers)]
per_text = []
with torch.no_grad():
    for text in TEXTS:
        tokens = model.to_tokens(text)[:, :TOKENS]  # BOS first
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
        per_text.append([(mu_rel(cache[name][0]), effective_rank(cache[name][0])) for name in names])
values = mean_over_texts(per_text)
"""

HF_LOAD = """
import torch
from transformers import AutoModel, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModel.from_pretrained(MODEL_DIR).eval()
"""

HF_MEASURE = MEASURES + """
last = {}  # HF's last hidden state is after the final norm: keep the norm's input instead
hook = model.norm.register_forward_pre_hook(lambda module, args: last.update(x=args[0]))
per_text = []
with torch.no_grad():
    for text in TEXTS:
        ids = [tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False).input_ids
        states = model(input_ids=torch.tensor([ids[:TOKENS]]), output_hidden_states=True).hidden_states
        xs = [h[0] for h in states[:-1]] + [last["x"][0]]
        per_text.append([(mu_rel(x), effective_rank(x)) for x in xs])
hook.remove()
values = mean_over_texts(per_text)
"""

CONTENDERS = {
    "rankcollapse analyze": (OURS_LOAD, OURS_MEASURE),
    "TransformerLens 4.3 run_with_cache": (TL_LOAD, TL_MEASURE),
    "HF by hand (output_hidden_states + a hook)": (HF_LOAD, HF_MEASURE),
}


def lines_of_code(*snippets: str) -> int:
    """Non-blank lines that are not only a comment."""
    lines = [line.strip() for s in snippets for line in s.splitlines()]
    return sum(1 for line in lines if line and not line.startswith("#"))


def child(name: str, spec_path: str) -> None:
    """Run one contender's snippet as written; print one JSON line (seconds, peak RSS, values)."""
    spec = json.loads(Path(spec_path).read_text())
    load, measure = CONTENDERS[name]
    namespace = {"MODEL_DIR": spec["model_dir"], "TEXTS": spec["texts"], "TOKENS": spec["tokens"]}
    t0 = time.perf_counter()
    exec(compile(load, f"<{name}: load>", "exec"), namespace)
    t1 = time.perf_counter()
    exec(compile(measure, f"<{name}: measure>", "exec"), namespace)
    t2 = time.perf_counter()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"load_s": t1 - t0, "measure_s": t2 - t1, "peak_mib": peak_kib / 1024,
                      "values": namespace["values"]}))


def _spec(tokens: int) -> dict:
    from rankcollapse.models import load_model
    from rankcollapse.models.corpora import wikipedia_articles

    model = load_model("smollm2", "float32")
    texts = list(wikipedia_articles()[:8])
    return {"model_dir": str(model.hf_model.name_or_path), "texts": texts, "tokens": tokens}


def _run(python: str, name: str, spec_path: str) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([python, __file__, "--child", name, "--spec", spec_path], capture_output=True,
                          text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(results: dict[str, list[dict]]) -> float:
    """Every contender's values equal the first one's to RTOL in every row; the largest difference."""
    names = list(results)
    ref = results[names[0]][0]["values"]
    worst = 0.0
    for name in names[1:]:
        got = results[name][0]["values"]
        assert len(got) == len(ref), f"{name}: {len(got)} rows, {names[0]}: {len(ref)}"
        for t, (a, b) in enumerate(zip(ref, got, strict=True)):
            for k, what in enumerate(("mu_rel", "effective_rank")):
                rel = abs(a[k] - b[k]) / abs(a[k])
                worst = max(worst, rel)
                assert rel <= RTOL, f"row {t} {what}: {names[0]} {a[k]!r}, {name} {b[k]!r} (rel {rel:.2e})"
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--spec")
    parser.add_argument("--tl-python", default="/tmp/tlvenv/bin/python")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.spec)
        return
    pythons = dict.fromkeys(CONTENDERS, sys.executable)
    pythons["TransformerLens 4.3 run_with_cache"] = args.tl_python
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = str(Path(tmp) / "spec.json")
        spec = _spec(args.tokens)
        Path(spec_path).write_text(json.dumps(spec))
        results: dict[str, list[dict]] = {name: [] for name in CONTENDERS}
        for _ in range(args.repeats):
            for name in CONTENDERS:
                results[name].append(_run(pythons[name], name, spec_path))
    worst = _check(results)
    load_after = os.getloadavg()
    print(f"model {spec['model_dir']} (SmolLM2-135M, 30 layers, float32, CPU), 8 texts cut to {args.tokens} "
          f"tokens; {time.strftime('%Y-%m-%d')}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(f"values agree: largest relative difference {worst:.1e} (allowed {RTOL:g}); "
          f"{len(results[next(iter(results))][0]['values'])} rows")
    print("| way | lines | load s | measure s | total s | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        load = statistics.median(r["load_s"] for r in runs)
        measure = statistics.median(r["measure_s"] for r in runs)
        total = statistics.median(r["load_s"] + r["measure_s"] for r in runs)
        peak = max(r["peak_mib"] for r in runs)
        print(f"| {name} | {lines_of_code(*CONTENDERS[name])} | {load:.1f} | {measure:.2f} | {total:.1f} | "
              f"{peak:.0f} |")


if __name__ == "__main__":
    main()
