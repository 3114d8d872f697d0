"""One name per quantity (``core.names``): the CLI's help, the CSV columns and the deprecation lines read
the one table; every old spelling is accepted for one release with exactly one warning; run identities
stay those of the stored params."""

from __future__ import annotations

import csv
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from rankcollapse.cli.main import main
from rankcollapse.core import names
from rankcollapse.core.names import QUANTITIES, column_of, from_stored, owner, read
from rankcollapse.edge.deprecation import RankCollapseDeprecation
from rankcollapse.edge.errors import RankCollapseError

ALIASES = {alias for q in QUANTITIES.values() for alias in q.aliases}


def _commands() -> dict[str, object]:
    """Every sub-command's click object (each command module imported, as ``rankcollapse --help`` does)."""
    import typer

    from rankcollapse.cli.app import app
    from rankcollapse.cli.main import load_commands

    load_commands(["--help"])
    return dict(typer.main.get_command(app).commands)


def test_the_table_names_each_spelling_once_and_every_key_is_ascii() -> None:
    seen: dict[str, str] = {}
    for q in QUANTITIES.values():
        assert q.key.isascii() and "\n" not in q.definition
        for spelling in (q.key, q.flag, *q.aliases):
            if spelling is not None:
                assert seen.setdefault(spelling, q.key) == q.key, spelling
    assert owner("--temperature").key == "d_qk" and owner("batch").key == "samples"


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_help_text_names_the_tables_flags_and_no_old_spelling(command: str, capsys) -> None:
    """Walk ``rankcollapse <command> --help``: no deprecated flag is shown, and every option that is a
    quantity of the table is described by the table's own definition."""
    assert main([command, "--help"]) == 0
    shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", capsys.readouterr().out))
    assert not shown & ALIASES, f"{command} --help shows deprecated {sorted(shown & ALIASES)}"
    by_flag = {q.flag: q for q in QUANTITIES.values() if q.flag}
    for param in _commands()[command].params:
        for opt in getattr(param, "opts", []):
            if opt in ALIASES:
                assert param.hidden, f"{command} {opt} is deprecated: hidden, never listed"
            elif opt in by_flag:
                text = " ".join(str(param.help).split())
                assert text.startswith(by_flag[opt].help().rstrip(".")), f"{command} {opt}: {text!r}"


def _columns(path: Path) -> list[str]:
    with path.open() as f:
        return next(csv.reader(f))


def test_every_column_of_a_tiny_simulate_and_analyze_run_is_the_tables(tmp_path: Path, capsys) -> None:
    assert main(["simulate", "--tokens", "6", "--d", "4", "--layers", "2", "--samples", "2", "--no-progress",
                 "--out", str(tmp_path / "sim")]) == 0
    assert main(["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", "--layers", "1",
                 "--no-progress", "--no-table", "--per-sample", "--out", str(tmp_path / "an")]) == 0
    capsys.readouterr()
    files = [tmp_path / "sim" / "metrics.csv", tmp_path / "an" / "metrics.csv",
             tmp_path / "an" / "per_sample.csv"]
    for path in files:
        for name in _columns(path):
            where = f"{path.parent.name}/{path.name}"
            assert column_of(name) is not None, f"{where}: column {name!r} is not the table's"
    from rankcollapse.metrics import METRIC_NAMES

    assert all(column_of(m) is QUANTITIES[m] for m in METRIC_NAMES)  # a metric's column is its name


# ---- every alias and its deprecation line ---------------------------------------------------------------
FIELDS = {"n": ("tokens", 8), "batch": ("samples", 2), "preset": ("mode", "attn"), "temperature": ("d_qk",
                                                                                                   2.0)}


@pytest.mark.parametrize("old", sorted(FIELDS))
def test_a_deprecated_config_field_warns_once_and_sets_the_tables_field(old: str) -> None:
    from rankcollapse.dynamics import SimulationConfig

    new, value = FIELDS[old]
    base = {"tokens": 6, "d": 4, "layers": 1, "samples": 1}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = SimulationConfig(**{k: v for k, v in base.items() if k != new}, **{old: value})
    assert [type(w.message) for w in caught] == [RankCollapseDeprecation]
    assert str(caught[0].message).startswith(f"{old} is deprecated; use {new}")
    assert getattr(cfg, new) == value and getattr(cfg, old) is None and old not in cfg.to_dict()


def _npy(tmp_path: Path) -> str:
    path = tmp_path / "w.npy"
    np.save(path, np.eye(2))
    return str(path)


def _text(tmp_path: Path) -> str:
    path = tmp_path / "t.txt"
    path.write_text("one name per quantity, in Python and on the command line alike. " * 20)
    return str(path)


CLI = {
    "--n": lambda t: ["simulate", "--n", "6", "--d", "4", "--layers", "1", "--out", str(t / "o")],
    "--batch": lambda t: ["simulate", "--batch", "2", "--d", "4", "--layers", "1", "--out", str(t / "o")],
    "--preset": lambda t: ["simulate", "--preset", "attn", "--d", "4", "--layers", "1", "--out",
                           str(t / "o")],
    "--temperature": lambda t: ["simulate", "--temperature", "2", "--d", "4", "--layers", "1", "--out",
                                str(t / "o")],
    "--steps": lambda t: ["equilibria", "--tokens", "2", "--d", "2", "--rank", "1", "--starts", "4",
                          "--steps", "50"],
    "--text": lambda t: ["analyze", "--model", "tiny:bert", "--text", _text(t), "--samples", "2", "--tokens",
                         "8", "--layers", "1", "--no-progress", "--no-table", "--out", str(t / "o")],
}
MORE = {  # the same alias on another command
    "mask --n": (["mask", "causal", "--n", "8"], "--n"),
    "equilibria --n": (["equilibria", "--n", "2", "--d", "2", "--rank", "1", "--starts", "4", "--layers",
                        "50"],
                       "--n"),
    "equilibria --temperature": (["equilibria", "--tokens", "2", "--d", "2", "--value", "NPY", "--starts",
                                  "2",
                                  "--layers", "20", "--temperature", "2"], "--temperature"),
}


def _one_warning(args: list[str], old: str, capsys) -> None:
    code = main(args)
    err = capsys.readouterr().err.splitlines()
    warned = [line for line in err if line.startswith("rankcollapse: warning: ")]
    assert code == 0, err
    assert len(warned) == 1 and warned[0].startswith(f"rankcollapse: warning: {old} is deprecated; use "
                                                     f"{owner(old).flag}"), err


@pytest.mark.parametrize("old", sorted(CLI))
def test_a_deprecated_flag_prints_one_warning_line_and_exits_0(old: str, tmp_path: Path, capsys) -> None:
    _one_warning(CLI[old](tmp_path), old, capsys)


@pytest.mark.parametrize("case", sorted(MORE))
def test_the_same_deprecated_flag_on_another_command_warns_the_same_way(case: str, tmp_path: Path,
                                                                          capsys) -> None:
    args, old = MORE[case]
    _one_warning([_npy(tmp_path) if a == "NPY" else a for a in args], old, capsys)


def test_a_deprecated_flag_beside_its_new_name_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    code = main(["simulate", "--tokens", "6", "--n", "6", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["rankcollapse: error: give --tokens or its old name --n, not both"]


@pytest.mark.parametrize(("old", "new"), [("name", "model_name"), ("label", "model_label"),
                                          ("kind", "model_kind"), ("n", "tokens"), ("preset", "mode")])
def test_a_record_an_earlier_release_wrote_is_read_under_its_old_key_with_one_warning(old, new) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read({old: "x"}, new) == "x"
    assert len(caught) == 1 and isinstance(caught[0].message, RankCollapseDeprecation)
    assert f"key {old!r} is deprecated" in str(caught[0].message) and repr(new) in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read({new: "y", old: "x"}, new) == "y"  # the table's key: no warning


def test_every_alias_has_a_deprecation_test() -> None:
    tested = set(CLI) | {a for _, a in MORE.values()} | set(FIELDS) | {"name", "label", "kind"}
    assert ALIASES <= tested, f"untested aliases: {sorted(ALIASES - tested)}"


# ---- run identity: the stored keys are kept -------------------------------------------------------------
#: Run ids computed before the names changed (the main branch at be95f28): a simulator grid point stored
#: under n / batch / preset, and a model grid point.
KNOWN_IDS = {"theorem1.bound": "d3cf22b20edb", "fig2.gaussian_san": "f8548ae60526",
             "fig2.paper": "26dc75389065"}


def test_known_grid_points_keep_their_run_ids() -> None:
    from rankcollapse.experiments.stories import load_experiments

    experiments = load_experiments("tiny", ["theorem1", "fig2"], None)
    ids = {e.name: e.runs()[0].run_id for e in experiments if e.runs()}
    assert {k: ids[k] for k in KNOWN_IDS} == KNOWN_IDS


def test_stored_params_reach_the_simulator_under_the_tables_names_without_a_warning() -> None:
    from rankcollapse.experiments.kit.tasks import simulation_config

    stored = {"n": 6, "batch": 2, "preset": "attn+sphere", "d": 4, "layers": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = simulation_config(stored, None)
    assert (cfg.tokens, cfg.samples, cfg.mode) == (6, 2, "attn+sphere")
    assert from_stored({"steps": 5}, ("layers",)) == {"layers": 5}
    with pytest.raises(RankCollapseError, match="not both"):
        from_stored({"n": 6, "tokens": 6}, ("tokens",))


# ---- the glossary reads the table ---------------------------------------------------------------------
def test_the_glossary_glosses_a_line_that_writes_the_symbol() -> None:
    from rankcollapse.experiments.kit.glossary import terms_used

    used = terms_used(["raw μ follows the norm while μ_rel stays"])
    assert any(t.startswith("mu_rel") for t in used) and any(t.startswith("mu /") for t in used)
    assert used[next(t for t in used if t.startswith("mu_rel"))].startswith(QUANTITIES["mu_rel"].definition)
    assert names.label("mu_rel") == QUANTITIES["mu_rel"].label


def test_analyze_reads_a_text_file_under_one_name_in_python_and_on_the_command_line(tmp_path: Path,
                                                                                    capsys) -> None:
    """``--text-file`` is ``AnalyzeConfig.text_file`` (the flag is the field's); ``--text``, its old
    spelling, reaches the same field, and both at once is one line."""
    import json

    assert QUANTITIES["text_file"].flag == "--text-file" and owner("--text").key == "text_file"
    args = ["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", "--layers", "1",
            "--no-progress", "--no-table"]
    text = _text(tmp_path)
    assert main([*args, "--text-file", text, "--out", str(tmp_path / "new")]) == 0
    assert not [line for line in capsys.readouterr().err.splitlines() if "deprecated" in line]
    config = json.loads((tmp_path / "new" / "config.json").read_text())["config"]["analyze"]
    assert config["text_file"] == text and config["corpus"] is None
    code = main([*args, "--text-file", text, "--text", text, "--out", str(tmp_path / "both")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["rankcollapse: error: give --text-file or its old name --text, not both"]
