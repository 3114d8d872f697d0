"""`rankcollapse simulate`: run a deep self-attention network and measure collapse at every layer."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from rankcollapse.cli.app import app
from rankcollapse.cli.options import (
    apply_threads,
    device_option,
    dtype_option,
    existing,
    out_option,
    overwrite_option,
    progress_option,
    seed_option,
    threads_option,
)
from rankcollapse.core.names import quantity as q
from rankcollapse.edge.messages import warning


@app.command("simulate")
def simulate_command(
    mask: str = typer.Option("complete", "--mask", help=q("mask").help(
                             "e.g. complete, causal, window:w=8, causal-window:w=1, block:size=8 (see "
                             "'rankcollapse mask')")),
    tokens: int = typer.Option(None, "--tokens", help=q("tokens").help("default 32, at least 2")),
    d: int = typer.Option(16, "--d", help=q("d").help()),
    layers: int = typer.Option(128, "--layers", help=q("layers").help()),
    mode: str = typer.Option(None, "--mode", help=q("mode").help(
        "here attn (default), attn+sphere (tokens renormalised to the sphere), attn+layernorm, "
        "attn+rmsnorm, attn+skip, attn+skip+sphere, attn+skip+layernorm, transformer, transformer-pre, "
        "transformer-peri (Peri-LN), transformer-mix (Mix-LN), transformer-ngpt (nGPT), transformer-no-ln, "
        "transformer-no-skip (docs/dynamics.md)")),
    heads: int = typer.Option(1, "--heads", help=q("heads").help("outputs averaged")),
    d_qk: float = typer.Option(None, "--d-qk", help=q("d_qk").help("default 1")),
    alibi_slope: float = typer.Option(None, "--alibi-slope", help=q("alibi_slope").help(
        "default none (no bias); runs the dense kernel")),
    rope_base: float = typer.Option(None, "--rope-base", help=q("rope_base").help(
        "default none (no rotation); needs an even query/key width")),
    rope_scale: float = typer.Option(1.0, "--rope-scale", help=q("rope_scale").help(
        "default 1; only with --rope-base")),
    tied_qk: bool = typer.Option(False, "--tied-qk", help="W_K = W_Q in every layer (queries equal keys)."),
    value: str = typer.Option("gaussian", "--value", help="W_V family: gaussian, orthogonal, identity, "
                              "scaled-identity."),
    value_scale: float = typer.Option(None, "--value-scale", help="sigma of the W_V family (default 1; "
                                      "gaussian entries N(0, sigma^2/d)); not for identity."),
    qk_scale: float = typer.Option(1.0, "--qk-scale", help="W_Q, W_K entries N(0, s^2/d)."),
    shared_weights: bool = typer.Option(False, "--shared-weights", help="Reuse one layer's weights at every "
                                        "depth (default: fresh weights per layer)."),
    inputs: str = typer.Option("gaussian", "--inputs", help="Initial tokens: gaussian, sphere, hemisphere, "
                               "repeated (one Gaussian token at every position)."),
    samples: int = typer.Option(None, "--samples", help=q("samples").help("default 8")),
    seed: int = seed_option("inputs and weights, >= 0"),
    dtype: str = dtype_option("float64", "float64 or float32 (f64, f32 accepted)"),
    device: str = device_option("cpu", "the simulation"),
    kernel: str = typer.Option("auto", "--kernel", help="auto, dense, sdpa, band."),
    metrics: str = typer.Option(None, "--metrics", help="Comma-separated metric columns to compute "
                                "(default all; mu and mu_rel always; opt-in: token_speed, the rollout and "
                                "rank columns)."),
    stop_below: float = typer.Option(None, "--stop-below", help="Stop once every sample's mu_rel is below."),
    threads: int = threads_option(),
    out: str = out_option("config.json, metrics.csv (+ mu.png); rows stream to metrics.partial.csv until the "
                          "run is complete"),
    overwrite: bool = overwrite_option("simulate"),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary (final mu_rel, floor, theory)."),
    plot: bool = typer.Option(False, "--plot", help="Draw mu against depth (log-log) into OUT/mu.png."),
    progress: bool = progress_option(),
) -> None:
    """Simulate X(t+1) = layer(X(t)) and write one metrics.csv row per layer (row 0 = the input)."""
    from rankcollapse.edge.folder import check_output_folder

    policy = existing(overwrite)
    out = check_output_folder(out, "simulate", existing=policy)
    apply_threads(threads)
    from rankcollapse.dynamics.plot import plot_mu
    from rankcollapse.dynamics.simulate import SimulationConfig, simulate
    from rankcollapse.edge.folder import OutputFolder
    from rankcollapse.edge.inputs import os_error
    from rankcollapse.edge.runs import RunWriter

    given = {"tokens": tokens, "mode": mode, "d_qk": d_qk, "samples": samples}  # None: the config's default
    config = SimulationConfig(
        mask=mask, d=d, layers=layers, heads=heads, value=value, value_scale=value_scale, qk_scale=qk_scale,
        shared_weights=shared_weights, inputs=inputs, seed=seed, dtype=dtype, device=device, kernel=kernel,
        metrics=metrics, stop_below=stop_below, alibi_slope=alibi_slope, rope_base=rope_base,
        rope_scale=rope_scale, tied_qk=tied_qk, **{k: v for k, v in given.items() if v is not None},
    )
    from rankcollapse.edge.progress import progress as progress_lines

    bar = progress_lines(config.layers + 1, f"simulate {config.mask}", "layers", enabled=progress)
    # what simulate wrote before the marker listed a run's files (a folder from then is replaced by these)
    outputs = ("config.json", RunWriter.FINAL, RunWriter.PARTIAL, "mu.png")
    with OutputFolder(out, "simulate", existing=policy, outputs=outputs) as folder:
        try:
            with RunWriter(folder, {"simulate": config.to_dict()}) as writer:
                def on_layer(row: dict[str, float]) -> None:
                    writer.write_row(row)
                    bar.update(1)

                result = simulate(config, on_layer=on_layer)
        except OSError as err:
            raise os_error("--out", out, err, verb="write into") from None
        finally:
            bar.close()
        if plot:
            plot_mu(result.rows, folder.file("mu.png"), dtype=config.dtype, theory=result.theory,
                    title=f"{config.mask}, {config.mode}, N={config.tokens}, d={d}, {config.dtype}")
    if result.nonfinite_layer is not None:
        warning(f"the run turned non-finite at layer {result.nonfinite_layer} ({config.dtype} overflow); "
                "its rows carry overflow > 0 and NaN metrics")
    summary = result.summary()
    summary["out"] = str(out)
    if plot:
        summary["plot"] = str(Path(out) / "mu.png")
    if as_json:
        typer.echo(json.dumps(_finite(summary), indent=2))
        return
    note = f"; stopped: {result.stopped}" if result.stopped else ""
    floor = {"collapsed": " (at the precision floor)", "overflow": " (overflow)",
             "undefined": " (undefined: every token vanished)"}.get(summary["state"], "")
    docs = (f"; largest per-document mu_rel {summary['final_mu_rel_docs_max']:.3g}"
            if "final_mu_rel_docs_max" in summary else "")
    typer.echo(f"wrote {len(result.rows)} rows to {Path(out) / 'metrics.csv'}; final mu_rel "
               f"{summary['final_mu_rel']:.3g}{floor}{docs}; kernel {result.kernel}{note}")


def _finite(obj: Any) -> Any:
    """JSON has no NaN/inf: replace them by None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj
