"""The Typer application object shared by all sub-command modules."""

import typer

app = typer.Typer(
    name="rankcollapse",
    help="Rank collapse in transformers: masks as graphs, attention dynamics, LayerNorm "
    "equilibria, pretrained models, and the paper's reproduction.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
