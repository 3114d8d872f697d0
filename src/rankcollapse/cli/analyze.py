"""`rankcollapse analyze`: layer-by-layer collapse measures of a pretrained model on real text."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer

from rankcollapse.cli.app import app
from rankcollapse.errors import RankCollapseError


@app.command("analyze")
def analyze_command(
    model: str = typer.Option("minilm", "--model", help="minilm, smollm2, random:<bert|albert|gpt2|llama>, "
                              "a local model folder or a cached hub name."),
    mode: str = typer.Option("full", "--mode", help="full, attn, attn+ln, attn+skip, attn+skip+ln."),
    mask: str = typer.Option(None, "--mask", help="Mask spec overriding the model's own "
                             "(complete for encoders, causal for decoders)."),
    temperature: float = typer.Option(1.0, "--temperature", help="T dividing the attention logits: "
                                      "S = scaling / T * q k^T (1: the model's own)."),
    layers: int = typer.Option(None, "--layers", help="Depth L (default: the model's); cycles its layers."),
    corpus: str = typer.Option("shakespeare", "--corpus", help="shakespeare, kjv or pydocs."),
    text: Path = typer.Option(None, "--text", help="UTF-8 text file to sample from instead of --corpus."),
    samples: int = typer.Option(16, "--samples", help="Number of token windows (batch size)."),
    tokens: int = typer.Option(64, "--tokens", help="Tokens per window (no special tokens added)."),
    dtype: str = typer.Option("f32", "--dtype", help="f32 or f64."),
    seed: int = typer.Option(0, "--seed", help="Seed of the windows (and of random:<arch> weights)."),
    backend: str = typer.Option("auto", "--backend", help="auto, hf (model's own modules, full mode "
                                "only) or parts (generic blocks)."),
    metric_threads: int = typer.Option(1, "--metric-threads", help="torch threads while measuring "
                                       "(1: fastest on a loaded machine; the forward uses torch's setting)."),
    threads: int = typer.Option(None, "--threads", help="torch intra-op threads for the whole run "
                                "(default: torch's; 1 is much faster on a loaded machine or small batches)."),
    out: Path = typer.Option(..., "--out", help="Output folder: config.json, metrics.csv (+ plot)."),
    plot: bool = typer.Option(False, "--plot", help="Also draw token_geometry.png (paper Figure 4 panels)."),
) -> None:
    """Measure collapse layer by layer (one metrics.csv row per hidden state; row 0 = embeddings)."""
    import torch

    from rankcollapse.io import RunWriter
    from rankcollapse.models.analyze import AnalyzeConfig, analyze, model_info, token_batch
    from rankcollapse.models.loading import load_model

    config = AnalyzeConfig(model=model, mode=mode, mask=mask, temperature=temperature, layers=layers,
                           corpus=corpus, text_file=str(text) if text is not None else None, samples=samples,
                           tokens=tokens, dtype=dtype, seed=seed, backend=backend,
                           metric_threads=metric_threads)
    if threads is not None:
        if threads < 1:
            raise RankCollapseError(f"--threads must be a positive integer, got {threads}")
        torch.set_num_threads(threads)
    loaded = load_model(config.model, config.dtype, seed=config.seed)
    ids = token_batch(config, loaded)
    info = model_info(loaded, config)
    with RunWriter(out, {"analyze": asdict(config), "model": info}) as writer:
        result = analyze(config, model=loaded, ids=ids, on_row=writer.write_row)
    if plot:
        from rankcollapse.models.plot import plot_token_geometry

        try:
            plot_token_geometry(result.rows, Path(out) / "token_geometry.png",
                                title=f"{model} — {mode}, mask {mask or loaded.own_mask}, {dtype}")
        except OSError as err:
            raise RankCollapseError(f"cannot write plot into {out}: {err.strerror}") from err
    typer.echo(f"wrote {len(result.rows)} rows to {Path(out) / 'metrics.csv'} "
               f"(forward {result.seconds['forward']:.2f} s, metrics {result.seconds['metrics']:.2f} s)")
