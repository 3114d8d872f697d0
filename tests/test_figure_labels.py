"""One quantity, one figure label: every axis label of a quantity of the names table comes from
``core.names.label`` (mu_rel's was written four ways: ``mu_rel = mu / ||X||_F``, a mathtext formula,
``mu_rel = ||X - 1 mean(X)||_F / ||X||_F``, ``mu_rel (mean ± std)``). Checked on the source of every module
that draws (a label written by hand fails: one that spells a quantity's table label, its column name or
its Greek symbol, or mu, mu_rel, the layer t or the tokens N) and on the label tables the plotting modules
keep."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rankcollapse
from rankcollapse.core.names import QUANTITIES, label

SRC = Path(rankcollapse.__file__).parent
#: The calls that set an axis (or colour bar) label, and which positional arguments are labels.
LABEL_CALLS: dict[str, tuple[int, ...]] = {
    "set_xlabel": (0,), "set_ylabel": (0,), "supxlabel": (0,), "supylabel": (0,), "set_label": (0,),
    "curve_axes": (2,), "label_axes": (1, 2),  # kit.plots.label_axes(ax, x, y): give a quantity its key
    "label_grid": (4,),  # kit.plots.label_grid(axes, ncols, rows, columns, x)
}
#: The calls that read a quantity's key as its label (``kit.plots.axis_label``): there a key is no label.
KEYED = frozenset({"label_axes", "label_grid"})
#: A label that spells a quantity of the table by hand: mu, mu_rel (raw or not), the layer, the tokens.
BY_HAND = re.compile(r"^(raw )?(mu_rel|mu)\b|^layer [tL]\b|^tokens [nN]\b")


def _spells(text: str, word: str) -> bool:
    """``text`` is ``word`` or starts with it, followed by no more of a word (``sink rate (...)`` spells
    ``sink rate``; ``masks`` does not spell ``mask``)."""
    return text.startswith(word) and not text[len(word):len(word) + 1].replace("_", "a").isalnum()


def _table_spelling(text: str, keyed: bool) -> str | None:
    """The quantity ``text`` writes by hand: its table label (equal to it or starting with it), its column
    name (a key with ``_``: ``stream_var (mean)``; bare in a keyed call it is the key itself) or its Greek
    symbol (``θ(t)``); None if none."""
    for q in QUANTITIES.values():
        if _spells(text, q.label):
            return q.key
        names = [n for n in (q.key, q.column) if n and "_" in n]
        if any(_spells(text, n) and not (keyed and text == n) for n in names):
            return q.key
        if not q.symbol.isascii() and _spells(text, q.symbol):
            return q.key
    return None


def hand_written(source: str) -> list[str]:
    """``line: text`` of each label call whose label starts with a quantity written by hand (a plain string,
    or the literal start of an f-string)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for at in LABEL_CALLS.get(name, ()):
            if len(node.args) <= at:
                continue
            arg = node.args[at]
            if isinstance(arg, ast.JoinedStr) and arg.values:
                arg = arg.values[0]
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                continue
            if BY_HAND.match(arg.value) or _table_spelling(arg.value, name in KEYED):
                bad.append(f"{node.lineno}: {arg.value!r}")
    return bad


def test_the_check_finds_a_label_written_by_hand() -> None:
    source = 'ax.set_ylabel("mu_rel (mean)")\nax.set_xlabel(f"layer t (N = {n})")\n'
    source += 'ax.set_xlabel(label("layer"))\nlabel_axes(ax, "layer", "mu_rel, float32")\n'
    assert hand_written(source) == ["1: 'mu_rel (mean)'", "2: 'layer t (N = '", "4: 'mu_rel, float32'"]


def test_the_check_finds_any_quantity_of_the_table_written_by_hand() -> None:
    """A label, a column name or a Greek symbol of the table, alone or with a suffix, by hand; a key given to
    a call that reads keys, a label from the table and prose that only starts like one are no finding."""
    source = "\n".join([
        'ax.set_xlabel("training step", fontsize=8)',  # 1: step's label
        'ax.set_ylabel("stream_var (mean, range over networks)")',  # 2: stream_var's column
        'ax.set_xlabel("θ(t)")',  # 3: theta's symbol
        'bar.set_label("sink rate")',  # 4: sink_rate's label
        'label_grid(axes, 2, rows, cols, "training step")',  # 5: by hand in a keyed call
        'label_axes(ax, "stream_var", "effective rank (last layer)")',  # 6: the key is fine, the y is not
        'ax.set_xlabel(label("step"))',
        'ax.set_ylabel(f"{label(\'stream_var\')} (mean)")',
        'ax.set_ylabel("share of starts at an equilibrium")',
        'ax.set_ylabel("keys attended")',  # starts like "key j"'s word, but is not its label
    ])
    assert hand_written(source) == [
        "1: 'training step'", "2: 'stream_var (mean, range over networks)'", "3: 'θ(t)'", "4: 'sink rate'",
        "5: 'training step'", "6: 'effective rank (last layer)'",
    ]


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_writes_a_quantitys_axis_label_by_hand(path: Path) -> None:
    bad = hand_written(path.read_text(encoding="utf-8"))
    assert not bad, f"{path.relative_to(SRC)}: labels by hand ({'; '.join(bad)}); use core.names.label"


def test_the_plotting_modules_label_tables_read_the_names_table() -> None:
    from rankcollapse.experiments.kit.plots import LAYER_PLUS_ONE
    from rankcollapse.experiments.stories.training import PER_LAYER, SHOWN
    from rankcollapse.models.plots import COLLAPSE, LAYER_LABEL
    from rankcollapse.monitor.plot import LABELS

    assert dict(COLLAPSE) == {"mu": label("mu"), "mu_rel": label("mu_rel")}
    for table in (LABELS, SHOWN, PER_LAYER):  # each metric under its table label, a unit or a scope after it
        assert all(_spells(text, label(key)) for key, text in table.items()), table
    assert LABELS["sink_rate"] == "sink rate (share of heads)"
    assert LABELS["attention_entropy"] == "attention entropy (nats)"
    assert LAYER_LABEL.startswith(label("layer")) and LAYER_PLUS_ONE.startswith(label("layer"))
