"""The options several commands share, declared once: ``--out``, ``--overwrite``, ``--progress``,
``--threads``, ``--seed``, ``--dtype``, ``--device`` and ``--download``, each a function of what differs
between the commands (the folder's contents, what the seed draws, the dtypes allowed); :func:`existing`
is the one ``--overwrite`` policy, :func:`apply_threads` the one ``--threads`` check and
:func:`apply_download` the one way ``--download`` opens the network.

A command writes ``out: Path = out_option("config.json, metrics.csv")``; its help names the command's
files, the rule (new, empty, or an earlier run of the same command with ``--overwrite``) is written here.
"""

from __future__ import annotations

from typing import Any

import typer

from rankcollapse.core.names import quantity as q


def out_option(files: str, *, default: Any = ..., optional: str = "") -> Any:
    """``--out DIR``: a new or empty folder, or an earlier run of this command with ``--overwrite``;
    ``files``: what the command writes there. ``optional``: the words for a command where it is
    optional (``default=None``)."""
    lead = f"{optional} " if optional else ""
    return typer.Option(default, "--out", metavar="DIR", help=f"{lead}Output folder (new or empty, or an "
                        f"earlier run of this command with --overwrite): {files}. One writer per folder.")


def overwrite_option(command: str) -> Any:
    """``--overwrite``: replace an earlier run of ``command`` in ``--out``."""
    return typer.Option(False, "--overwrite", help=f"Replace an earlier {command} run in --out (published "
                        "when this run is complete; without it an earlier finished run is refused; a "
                        "folder rankcollapse did not make is never replaced).")


def existing(overwrite: bool) -> str:
    """The one ``--overwrite`` policy of ``edge.folder``: ``replace`` with it, else ``refuse``."""
    return "replace" if overwrite else "refuse"


def progress_option() -> Any:
    """``--progress/--no-progress`` (the CLI's rule: on; the Python API's: off)."""
    return typer.Option(True, "--progress/--no-progress", help="Progress on stderr after 2 s: a bar on a "
                        "terminal, a plain line every 10 s otherwise.")


def threads_option(default: int | None = None) -> Any:
    """``--threads K``: torch intra-op threads, 1..CPUs (:func:`apply_threads`)."""
    shown = "torch's" if default is None else str(default)
    return typer.Option(default, "--threads", help=f"torch intra-op threads, 1..CPUs (default: {shown}; 1 is "
                        "much faster for small runs on a loaded machine).")


def apply_threads(threads: int | None) -> int | None:
    """Check ``--threads`` (``edge.validate.check_threads``: 1..CPUs, one line beyond) and set torch's."""
    if threads is None:
        return None
    import torch

    from rankcollapse.edge.validate import check_threads

    threads = check_threads("--threads", threads)
    torch.set_num_threads(threads)
    return threads


def seed_option(draws: str) -> Any:
    """``--seed S``: what the seed draws in this command (``draws``)."""
    return typer.Option(0, "--seed", help=q("seed").help(draws))


def dtype_option(default: str, allowed: str) -> Any:
    """``--dtype``: the precision the command computes in; ``allowed``: its names in words."""
    return typer.Option(default, "--dtype", help=q("dtype").help(allowed))


def device_option(default: str | None = "cpu", what: str = "the computation") -> Any:
    """``--device``: cpu, cuda or cuda:K."""
    return typer.Option(default, "--device", help=f"Where {what} runs: cpu, cuda or cuda:K.")


def download_option(what: str) -> Any:
    """``--download``: allow the network; ``what``: what the command then fetches, in words."""
    return typer.Option(False, "--download", help=f"Allow the network: {what}. Same as "
                        "RANKCOLLAPSE_DOWNLOAD=1. Without it nothing is downloaded.")


def apply_download(download: bool) -> None:
    """With ``--download``: open the network for this process and its workers
    (:func:`rankcollapse.edge.network.allow_downloads`)."""
    if download:
        from rankcollapse.edge.network import allow_downloads

        allow_downloads()
