"""The Typer application object shared by all sub-command modules, and where each command lives.

A sub-command module registers its command on ``app`` when imported (``@app.command("name")``).
``main.py`` imports only the module of the command being run (every module for ``--help``), so a
command never pays for another's imports. To add a command: write its module, add one line to
``COMMAND_MODULES``.
"""

import typer

app = typer.Typer(
    name="rankcollapse",
    help="Rank collapse in transformers: masks as graphs, attention dynamics, LayerNorm "
    "equilibria, pretrained models, and the paper's reproduction.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts are plain: "[[a, s], [0, 1]]" is a matrix, not markup
)


def _version(value: bool) -> None:
    if value:
        from rankcollapse import __version__

        typer.echo(f"rankcollapse {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Rank collapse in transformers: masks as graphs, attention dynamics, LayerNorm equilibria,
    pretrained models, and the paper's reproduction."""


#: command name -> the module that registers it (imported lazily by ``main.py``).
COMMAND_MODULES: dict[str, str] = {
    "mask": "rankcollapse.cli.mask",
    "simulate": "rankcollapse.cli.simulate",
    "equilibria": "rankcollapse.cli.equilibria",
    "portrait": "rankcollapse.cli.equilibria",
    "counterexample": "rankcollapse.cli.counterexample",
    "analyze": "rankcollapse.cli.analyze",
    "plot": "rankcollapse.cli.plot",
    "models": "rankcollapse.cli.models",
    "reproduce": "rankcollapse.cli.reproduce",
}
