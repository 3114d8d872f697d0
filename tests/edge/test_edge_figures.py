"""The one figure path, ``rankcollapse.edge.figures``: no module sets a backend or saves a figure on its
own; a figure is written in its suffix's format at the one DPI, atomically; a write error is one line
naming the path (the same line for every figure writer of the package), a bad suffix is refused before
anything is written; pyplot's figures are closed even when the save fails; importing the module chooses
no backend."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.figures import DPI, new_figure, pyplot, save_figure
from readonly import read_only

SRC = Path(__file__).resolve().parents[2] / "src" / "rankcollapse"
HOME = SRC / "edge" / "figures.py"


def _backend_or_save_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """``matplotlib.use(...)`` and ``<anything>.savefig(...)`` calls of a module: (line, what)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr == "savefig":
                found.append((node.lineno, "savefig"))
            elif node.func.attr == "use" and isinstance(owner, ast.Name) and owner.id == "matplotlib":
                found.append((node.lineno, "matplotlib.use"))
    return found


def test_no_module_but_edge_figures_sets_a_backend_or_saves_a_figure():
    calls = [
        f"{path.relative_to(SRC.parent)}:{line}: {what}"
        for path in sorted(SRC.rglob("*.py"))
        if path != HOME
        for line, what in _backend_or_save_calls(ast.parse(path.read_text(), str(path)))
    ]
    assert calls == [], "set up and save figures through rankcollapse.edge.figures: " + "; ".join(calls)
    home = _backend_or_save_calls(ast.parse(HOME.read_text()))
    assert sorted(w for _, w in home) == ["matplotlib.use", "savefig"]  # the one of each


def test_importing_edge_figures_imports_no_matplotlib_and_pyplot_chooses_agg():
    code = (
        "import sys, rankcollapse.edge.figures as f\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported at import'\n"
        "plt = f.pyplot()\n"
        "import matplotlib\n"
        "print(matplotlib.get_backend().lower(), f.pyplot() is plt)\n"
    )
    env = {"PYTHONPATH": str(SRC.parent), "MPLBACKEND": "pdf", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["agg", "True"]


def test_each_path_is_written_in_its_suffixs_format_at_the_one_dpi(tmp_path):
    import matplotlib

    fig = new_figure(2.0, 1.0)
    fig.subplots().plot([0, 1], [1, 0])
    paths = [tmp_path / n for n in ("a.png", "a.PDF", "a.svg", "bare")]
    with matplotlib.rc_context({"savefig.bbox": "tight"}):  # a style set elsewhere does not cut it
        written = save_figure(fig, *paths)
    assert written == paths
    png = (tmp_path / "a.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # the IHDR chunk
    assert (width, height) == (2 * DPI, 1 * DPI)
    assert (tmp_path / "a.PDF").read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in (tmp_path / "a.svg").read_bytes()[:2000]
    assert (tmp_path / "bare").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # no suffix: PNG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.PDF", "a.png", "a.svg", "bare"]  # no temporary
    fig = new_figure(2.0, 1.0)
    fig.subplots().plot([0, 1], [1, 0])
    oracle = io.BytesIO()
    fig.savefig(oracle, format="png", dpi=DPI, bbox_inches="tight")  # matplotlib's own cut
    save_figure(fig, tmp_path / "tight.png", tight=True)
    assert (tmp_path / "tight.png").read_bytes()[16:24] == oracle.getvalue()[16:24] != png[16:24]


def test_a_suffix_matplotlib_does_not_write_is_one_line_and_nothing_is_written(tmp_path):
    fig = new_figure(1, 1)
    with pytest.raises(RankCollapseError) as err:
        save_figure(fig, tmp_path / "a.png", tmp_path / "b.foo")
    line = str(err.value)
    assert "\n" not in line and "'foo'" in line and "b.foo" in line and "png" in line
    assert list(tmp_path.iterdir()) == []  # a.png neither: every suffix is checked first


def test_a_read_only_folder_is_one_line_naming_the_path_and_pyplots_figure_is_closed(tmp_path, monkeypatch):
    plt = pyplot()
    fig = plt.figure()
    assert fig.number in plt.get_fignums()
    out = read_only(tmp_path / "ro", monkeypatch)
    with pytest.raises(RankCollapseError) as err:
        save_figure(fig, out / "x.png", what="plot")
    line = str(err.value)
    assert line.startswith("cannot write plot ") and "x.png" in line and "(EACCES)" in line
    assert "\n" not in line
    assert fig.number not in plt.get_fignums()
    assert list(out.iterdir()) == []


def test_a_missing_folder_says_so(tmp_path):
    cut = r"( \([0-9]+ characters\))?"  # a long tmp path is quoted cut, with its length
    words = rf"cannot write figure '.*x\.png'{cut}: its folder does not exist"
    with pytest.raises(RankCollapseError, match=words):
        save_figure(new_figure(1, 1), tmp_path / "absent" / "x.png")


def test_a_new_figure_is_not_pyplots_and_its_title_is_drawn_literally(tmp_path):
    plt = pyplot()
    before = plt.get_fignums()
    fig = new_figure(3, 2, layout="constrained", title=r"mask $\foo{$ run", title_size=7)
    fig.subplots(1, 2)
    assert plt.get_fignums() == before and fig.canvas.manager is None
    assert fig.get_suptitle() == r"mask \$\foo{\$ run" and fig._suptitle.get_fontsize() == 7
    save_figure(fig, tmp_path / "t.png")  # mathtext would raise at save
    assert fig.get_size_inches().tolist() == [3, 2]


def _rows() -> list[dict[str, float]]:
    from rankcollapse.dynamics import SimulationConfig, simulate

    return simulate(SimulationConfig(tokens=4, d=3, layers=3, mask="causal", seed=0)).rows


def _kit(out: Path) -> object:
    import pandas as pd

    from rankcollapse.experiments.contract.story import FigureSpec
    from rankcollapse.experiments.kit import plots

    return plots.save_figure(FigureSpec("f", new_figure(1, 1), pd.DataFrame(), ""), out, "x")


def _mask(out: Path) -> object:
    from rankcollapse.masks import parse_mask
    from rankcollapse.masks.picture import plot_mask

    return plot_mask(parse_mask("causal"), 6, [0], out / "f.png", "causal")


def _mu(out: Path) -> object:
    from rankcollapse.dynamics.plot import plot_mu

    return plot_mu(_rows(), out / "f.png", dtype="float32")


def _collapse(out: Path) -> object:
    from rankcollapse.models.plots import plot_collapse

    return plot_collapse(_rows(), out / "f.png", dtype="float32")


def _monitor(out: Path) -> object:
    import pandas as pd

    from rankcollapse.monitor.plot import plot_monitor

    rows = [dict(step=s, layer=t, hidden_state="h", hook="h", metric="mu_rel", value=0.5) for s in (0, 1)
            for t in (0, 1)]
    return plot_monitor(pd.DataFrame(rows), out / "f.png")


def _portrait(out: Path) -> object:
    from rankcollapse.equilibria.plots_paper import write_paper_portrait

    return write_paper_portrait(out)


#: Every figure writer of the package, writing into a folder.
WRITERS: dict[str, Callable[[Path], object]] = {
    "experiments.kit.plots.save_figure": _kit,
    "masks.picture.plot_mask": _mask,
    "dynamics.plot.plot_mu": _mu,
    "models.plots.plot_collapse": _collapse,
    "monitor.plot.plot_monitor": _monitor,
    "equilibria.plots_paper.write_paper_portrait": _portrait,
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_figure_writer_says_a_read_only_folder_in_one_line(tmp_path, monkeypatch, writer):
    out = read_only(tmp_path / "ro", monkeypatch)
    with pytest.raises(RankCollapseError) as err:
        WRITERS[writer](out)
    line = str(err.value)
    # the path is cut in the middle where it is long, its folder and file name kept
    shape = r"cannot write [\w ]+ '[^']*ro/[\w.]+'( \(\d+ characters\))?: Permission denied \(EACCES\)"
    assert re.fullmatch(shape, line), line
    assert list(out.iterdir()) == []
