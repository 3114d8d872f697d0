"""One quantity, one figure label: every axis label of a quantity of the names table comes from
``core.names.label`` (mu_rel's was written four ways: ``mu_rel = mu / ||X||_F``, a mathtext formula,
``mu_rel = ||X - 1 mean(X)||_F / ||X||_F``, ``mu_rel (mean ± std)``). Checked on the source of every module
that draws (a label written by hand for mu, mu_rel, the layer t or the tokens N fails) and on the label
tables the plotting modules keep."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rankcollapse
from rankcollapse.core.names import label

SRC = Path(rankcollapse.__file__).parent
#: The calls that set an axis (or colour bar) label, and which positional arguments are labels.
LABEL_CALLS: dict[str, tuple[int, ...]] = {
    "set_xlabel": (0,), "set_ylabel": (0,), "supxlabel": (0,), "supylabel": (0,), "set_label": (0,),
    "curve_axes": (2,), "label_axes": (1, 2),  # kit.plots.label_axes(ax, x, y): give a quantity its key
}
#: A label that spells a quantity of the table by hand: mu, mu_rel (raw or not), the layer, the tokens.
BY_HAND = re.compile(r"^(raw )?(mu_rel|mu)\b|^layer [tL]\b|^tokens [nN]\b")


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
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and BY_HAND.match(arg.value):
                bad.append(f"{node.lineno}: {arg.value!r}")
    return bad


def test_the_check_finds_a_label_written_by_hand() -> None:
    source = 'ax.set_ylabel("mu_rel (mean)")\nax.set_xlabel(f"layer t (N = {n})")\n'
    source += 'ax.set_xlabel(label("layer"))\nlabel_axes(ax, "layer", "mu_rel, float32")\n'
    assert hand_written(source) == ["1: 'mu_rel (mean)'", "2: 'layer t (N = '", "4: 'mu_rel, float32'"]


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_writes_a_quantitys_axis_label_by_hand(path: Path) -> None:
    bad = hand_written(path.read_text(encoding="utf-8"))
    assert not bad, f"{path.relative_to(SRC)}: labels by hand ({'; '.join(bad)}); use core.names.label"


def test_the_plotting_modules_label_tables_read_the_names_table() -> None:
    from rankcollapse.experiments.kit.plots import LAYER_PLUS_ONE
    from rankcollapse.models.plots import COLLAPSE, LAYER_LABEL
    from rankcollapse.monitor.plot import LABELS

    assert dict(COLLAPSE) == {"mu": label("mu"), "mu_rel": label("mu_rel")}
    assert {k: LABELS[k] for k in ("mu", "mu_rel", "effective_rank", "num_rank", "mean_abs_cos")} == {
        k: label(k) for k in ("mu", "mu_rel", "effective_rank", "num_rank", "mean_abs_cos")
    }
    assert LAYER_LABEL.startswith(label("layer")) and LAYER_PLUS_ONE.startswith(label("layer"))
