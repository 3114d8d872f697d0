"""`rankcollapse analyze`: layer-by-layer collapse measures of a model on real text."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rankcollapse.cli.app import app
from rankcollapse.cli.options import (
    apply_download,
    apply_threads,
    device_option,
    download_option,
    dtype_option,
    out_option,
    overwrite_option,
    progress_option,
    seed_option,
    threads_option,
)
from rankcollapse.core.names import quantity as q
from rankcollapse.edge.errors import RankCollapseError

if TYPE_CHECKING:
    from rankcollapse.models.analyze.result import AnalyzeRun


def note_line(message: str) -> None:
    """One ``rankcollapse: note: ...`` line on stderr (:func:`rankcollapse.edge.messages.note`)."""
    from rankcollapse.edge.messages import note

    note(message)


@app.command("analyze")
def analyze_command(
    model: str = typer.Option("minilm", "--model", help=q("model").help(
                              "a paper checkpoint when cached (bert-base-uncased, "
                              "openai-community/gpt2, google-t5/t5-base, albert/albert-base-v2), "
                              "random:<bert-base-uncased|gpt2|t5-base|albert-base-v2|"
                              "google/vit-base-patch16-224> (that config, random init), minilm, smollm2, "
                              "mpnet, tiny:<model_type> (e.g. "
                              "tiny:gemma3_text, tiny:vit: a vision encoder reading images), "
                              "or a local model folder (undissected architectures: full mode only)")),
    model_label: str = typer.Option(None, "--model-label", help=q("model_label").help(
                                    "in the figures' titles, config.json and the progress line; default: "
                                    "what it is, e.g. SmolLM2-135M-Instruct Q4_1 (pretrained), as "
                                    "rankcollapse models lists it")),
    mode: str = typer.Option("full", "--mode", help=q("mode").help("here attn (SAN), attn+skip (SAN + skip), "
                             "attn+ln (SAN + LayerNorm), attn+skip+ln (SAN + skip + LayerNorm), full "
                             "(transformer)")),
    mask: str = typer.Option(None, "--mask", help=q("mask").help(
                             "one for every layer, overriding each layer's own (complete / causal / the "
                             "config's sliding windows), or a schedule 'A;B*2' (one mask per layer, period "
                             "dividing the depth)")),
    d_qk: float = typer.Option(None, "--d-qk", help=q("d_qk").help("default: the model's own, its "
                               "head_dim; T5: 1")),
    layers: int = typer.Option(None, "--layers", help=q("layers").help("default: the model's; past it, "
                               "its layers cycle")),
    corpus: str = typer.Option(None, "--corpus", help="wikipedia (default), shakespeare, kjv or pydocs."),
    text_file: Path = typer.Option(None, "--text-file", help=q("text_file").help()),
    samples: int = typer.Option(None, "--samples", help=q("samples").help(
                                "here excerpts of the text, or the first images of --pixel-values; "
                                "default 16")),
    batch_size: int = typer.Option(None, "--batch-size", help=q("batch_size").help(
                                   "default: all --samples at once; more is clamped. Memory holds one "
                                   "batch")),
    device: str = device_option("cpu", "the model, inputs and metrics"),
    tokens: int = typer.Option(None, "--tokens", help=q("tokens").help(
                               "default 128; a vision encoder's is set by its image and patch size")),
    pixel_values: Path = typer.Option(None, "--pixel-values", help=q("pixel_values").help(
                                      "float32/64 [b, C, H, W]; H and W multiples of the patch size "
                                      "(another size than the model's reads its positions interpolated); "
                                      "default for a vision encoder (ViT): --samples white-noise images "
                                      "seeded by --seed")),
    dtype: str = dtype_option("float32", "float32, float64, bfloat16 or float16 (bf16, fp16): the model's "
                              "weights and hidden states; a half-precision run is measured in float32 "
                              "against the floor of its own dtype (32 eps: 0.25 for bfloat16, 0.031 for "
                              "float16)"),
    seed: int = seed_option("the excerpts, and random-init weights"),
    backend: str = typer.Option("auto", "--backend", help="auto, hf (model's own modules, full mode "
                                "only) or parts (generic blocks)."),
    metrics: str = typer.Option(None, "--metrics", help="Comma-separated metric columns to compute per "
                                "layer (default all; mu,mu_rel is the cheapest; see rankcollapse.metrics)."),
    metric_threads: str = typer.Option("auto", "--metric-threads", help="torch threads while measuring: "
                                       "a number, or auto (1 below 1,024 tokens, fastest on a loaded "
                                       "machine; torch's own from there)."),
    cos_rows: str = typer.Option("256", "--cos-rows", help=q("cos_rows").help(
                                 "default 256: sampled from 1,024 tokens on; all: every pair")),
    threads: int = threads_option(),
    diagnostics: bool = typer.Option(False, "--diagnostics", help="Also measure, per layer: attention "
                                     "entropy (per head), sink rate, first-token attention and norm, largest "
                                     "activations, massive ratio: exactly, from each layer's fused "
                                     "attention call and its row log-normaliser (any model whose attention "
                                     "goes through Hugging Face's AttentionInterface); soft-capped and "
                                     "position-biased logits form their weights in blocks of query rows."),
    diagnostics_chunk: int = typer.Option(None, "--diagnostics-chunk", help="With --diagnostics: form each "
                                          "layer's attention weights this many query rows at a time "
                                          "instead of reading the kernel's statistics (a dissected family; "
                                          "the default where the logits have no lse form: a 128 MiB block "
                                          "per sample). --save-attention forms whole maps."),
    sink_threshold: float = typer.Option(0.3, "--sink-threshold", help="A head is a sink when its mean "
                                         "attention on the first token exceeds this (with --diagnostics)."),
    ablation: str = typer.Option(None, "--ablation", help="sinks: damp every query's attention on the first "
                                 "token by --sink-damping and renormalise."),
    sink_damping: float = typer.Option(None, "--sink-damping", help="Factor on the first token's attention "
                                       "with --ablation sinks (0: removed, the default; 1: unchanged)."),
    check_masks: bool = typer.Option(False, "--check-masks", help="Check, per layer, that the mask the "
                                     "model's attention kernel really applies (probed through its own "
                                     "attention function with the layer's own mask arguments, O(n e) per "
                                     "row) is exactly the mask its config defines; writes mask_check.json, "
                                     "exit 1 on a mismatch."),
    out: Path = out_option("config.json, metrics.csv (+ the figures with --plot)"),
    overwrite: bool = overwrite_option("analyze"),
    plot: bool = typer.Option(False, "--plot", help="Also draw the figures (one paper column wide): mu.png "
                              "(mu and mu_rel per layer with the precision floor), geometry.png (ranks, "
                              "full-rank share, sigma_min, mean |cos|) and, with --diagnostics, "
                              "diagnostics.png (first-token attention per layer x head, sink rate, entropy, "
                              "massive ratio)."),
    plot_format: str = typer.Option(None, "--plot-format", help="With --plot: the figures' formats, png, pdf "
                                    "or svg, separated by commas (default png)."),
    tokenizer: str = typer.Option(None, "--tokenizer", help="A Hugging Face tokenizer name or folder to read "
                                  "the text with (default: the model's own; random models: bundled BERT)."),
    per_sample: bool = typer.Option(False, "--per-sample", help="Also write per_sample.csv: one row per "
                                    "layer and sample (the values metrics.csv summarises)."),
    save_attention: bool = typer.Option(False, "--save-attention", help="With --diagnostics: write each "
                                        "layer's attention weights to attention/layer_<t>.npy, float32 "
                                        "[samples, heads, tokens, tokens]."),
    table: bool = typer.Option(True, "--table/--no-table", help="Print a short table per layer (mu_rel, "
                               "rank, cosines; with --diagnostics entropy, sink heads, massive ratio)."),
    progress: bool = progress_option(),
    download: bool = download_option("fetch a hub name or a paper checkpoint not in the local Hugging Face "
                                     "cache (config, safetensors, tokenizer; announced on stderr, 10 s "
                                     "timeouts)"),
) -> None:
    """Measure collapse layer by layer (one metrics.csv row per hidden state; row 0 = embeddings)."""
    apply_download(download)
    from rankcollapse.models.analyze import AnalyzeConfig, AnalyzeOutputs, analyze_into

    config = AnalyzeConfig(model=model, mode=mode, mask=mask, d_qk=d_qk, layers=layers, corpus=corpus,
                           text_file=None if text_file is None else str(text_file), samples=samples,
                           tokens=tokens, dtype=dtype, seed=seed, backend=backend, metrics=metrics,
                           metric_threads=_word_or_number("--metric-threads", metric_threads),
                           cos_rows=_word_or_number("--cos-rows", cos_rows, "all"), diagnostics=diagnostics,
                           diagnostics_chunk=diagnostics_chunk, sink_threshold=sink_threshold,
                           ablation=ablation, sink_damping=sink_damping, device=device, batch_size=batch_size)
    outputs = AnalyzeOutputs(config, plot=plot, plot_format=plot_format, per_sample=per_sample,
                             save_attention=save_attention, check_masks=check_masks)
    apply_threads(threads)
    run = analyze_into(out, outputs, overwrite=overwrite, model_label=model_label, tokenizer=tokenizer,
                       pixel_values=pixel_values, progress=progress)
    if table:
        from rankcollapse.models.diagnose import layer_table

        typer.echo(layer_table(run.result.rows))
        typer.echo(_floor_line(run.result.config.dtype, run.result.rows))
    typer.echo(_summary_line(run))
    for note in run.result.notes:
        if note == run.result.model_info.get("note"):
            note_line(note)
    for check in run.mask_checks:
        typer.echo(("ok       " if check.matches else "MISMATCH ") + check.describe())
    if not run.masks_match:
        raise typer.Exit(1)


def _summary_line(run: AnalyzeRun) -> str:
    """The console's last line: the rows written, where, their state, the forward and metrics seconds
    (and the figures drawn on a line of their own)."""
    result = run.result
    bad = result.overflow_layers
    zero = [int(r["layer"]) for r in result.rows if r["status"] == "underflow"]
    state = "all finite" if not bad else (f"NON-FINITE (overflow) in {len(bad)} rows from layer {bad[0]} on; "
                                          "their metrics cover finite samples only, NaN where none")
    if zero:
        state += f"; EXACTLY ZERO (underflow) in {len(zero)} rows from layer {zero[0]} on: mu_rel undefined"
    last = result.rows[-1] if result.rows else {}
    if "mu_rel_docs_max" in last:
        state += (f"; final mu_rel {last['mu_rel']:.3g}, largest per-document mu_rel "
                  f"{last['mu_rel_docs_max']:.3g}")
    line = (f"wrote {len(result.rows)} rows to {run.out / 'metrics.csv'} ({state}; "
            f"forward {result.seconds['forward']:.2f} s, metrics {result.seconds['metrics']:.2f} s)")
    return line + (f"\nfigures: {', '.join(p.name for p in run.figures)} in {run.out}" if run.figures else "")


def _floor_line(dtype: str, rows: list[dict[str, object]]) -> str:
    """The console's line under the table: the run's dtype, ``mu_rel``'s precision floor in it
    (``32 eps``: :func:`rankcollapse.core.precision.floor_rel`) and the rows where every sample is at it."""
    from rankcollapse.core.precision import FLOOR_FACTOR, floor_rel, is_half

    at = sum(1 for r in rows if r.get("at_floor") == 1.0)
    where = f"; every sample at it in {at} of {len(rows)} rows" if rows and "at_floor" in rows[0] else ""
    how = ", hidden states measured in float32" if is_half(dtype) else ""
    return f"{dtype}: mu_rel's precision floor {FLOOR_FACTOR:g} eps = {floor_rel(dtype):.2g}{where}{how}"


def _word_or_number(flag: str, text: str, word: str = "auto") -> int | str:
    """``--metric-threads`` (``auto``) or ``--cos-rows`` (``all``): the word or a whole number (its range
    checked by the config)."""
    if text == word:
        return text
    try:
        return int(text)
    except ValueError:
        from rankcollapse.edge.validate import quote

        got = quote(text, 40)
        raise RankCollapseError(f"{flag} {got} is not a number; allowed: {word} or a whole number") from None
