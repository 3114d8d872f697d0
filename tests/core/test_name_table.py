"""One name per quantity (``core.names``): the CLI's help and the CSV columns read the one table; the
spellings 0.2.0 retired (tests/retired.py) are refused in one line; stored data keeps its keys, read
silently, and run identities stay those of the stored params."""

from __future__ import annotations

import csv
import dataclasses
import re
import warnings
from pathlib import Path

import pytest

from rankcollapse.cli.main import main
from rankcollapse.core import names
from rankcollapse.core.names import QUANTITIES, column_of, from_stored, read
from rankcollapse.edge.errors import RankCollapseError
from retired import FIELDS, FLAGS


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
        for spelling in (q.key, q.flag, *q.stored):
            if spelling is not None:
                assert seen.setdefault(spelling, q.key) == q.key, spelling
    assert not hasattr(names, "renamed") and not hasattr(names, "owner")  # no alias path left


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_help_text_names_the_tables_flags_and_no_old_spelling(command: str, capsys) -> None:
    """Walk ``rankcollapse <command> --help``: no retired flag is shown or taken (hidden or not), and
    every option that is a quantity of the table is described by the table's own definition."""
    assert main([command, "--help"]) == 0
    shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", capsys.readouterr().out))
    assert not shown & set(FLAGS), f"{command} --help shows retired {sorted(shown & set(FLAGS))}"
    by_flag = {q.flag: q for q in QUANTITIES.values() if q.flag}
    for param in _commands()[command].params:
        for opt in getattr(param, "opts", []):
            assert opt not in FLAGS, f"{command} still takes the retired {opt}"
            if opt in by_flag:
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


def test_the_key_bias_columns_are_the_tables_with_their_per_head_columns() -> None:
    """Gu et al.'s key-bias diagnostics (metrics.diagnostics) are named once, in the table: a column each,
    its per-head columns the same quantity; a per-head suffix on a name the table lacks is no quantity."""
    from rankcollapse.metrics.diagnostics import DIAGNOSTIC_NAMES, QUERY_KEY_NAMES

    assert set(QUERY_KEY_NAMES) <= set(DIAGNOSTIC_NAMES)
    for name in QUERY_KEY_NAMES:
        assert column_of(name) is QUANTITIES[name] and QUANTITIES[name].flag is None
        assert column_of(f"{name}_h11") is QUANTITIES[name]
    assert column_of("key_cos_hx") is None and column_of("no_such_column_h0") is None


# ---- the spellings 0.2.0 retired: refused in one line ----------------------------------------------------
@pytest.mark.parametrize("old", sorted(FIELDS))
def test_a_retired_config_field_is_refused_in_one_line(old: str) -> None:
    from rankcollapse.dynamics import SimulationConfig

    base = {"tokens": 6, "d": 4, "layers": 1, "samples": 1}
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'") as info:
        SimulationConfig(**base, **{old: base.get(FIELDS[old], 2)})
    assert "\n" not in str(info.value)
    assert FIELDS[old] in {f.name for f in dataclasses.fields(SimulationConfig)}  # its replacement is there


def _args(command: str, flag: str, tmp_path: Path) -> list[str]:
    """A command line that would run but for the retired ``flag``."""
    value = {"--preset": "attn", "--text": str(tmp_path / "t.txt"), "--temperature": "2"}.get(flag, "6")
    lines = {
        "simulate": ["simulate", "--d", "4", "--layers", "1", "--no-progress", "--out", str(tmp_path / "o")],
        "analyze": ["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", "--layers", "1",
                    "--no-progress", "--no-table", "--out", str(tmp_path / "o")],
        "equilibria": ["equilibria", "--tokens", "2", "--d", "2", "--rank", "1", "--starts", "4"],
        "mask": ["mask", "causal"],
    }
    return [*lines[command], flag, value]


@pytest.mark.parametrize(("command", "old"), sorted((c, f) for f, (_, cs) in FLAGS.items() for c in cs))
def test_a_retired_flag_is_refused_in_one_line_exit_2(command: str, old: str, tmp_path: Path,
                                                      capsys) -> None:
    code = main(_args(command, old, tmp_path))
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1, captured.err
    assert err[0].startswith(f"rankcollapse: error: No such option: {old}"), err
    assert not (tmp_path / "o").exists()  # nothing written
    new = FLAGS[old][0]
    assert any(new in getattr(p, "opts", []) for p in _commands()[command].params), new  # what replaced it


@pytest.mark.parametrize(("old", "new"), [("name", "model_name"), ("label", "model_label"),
                                          ("kind", "model_kind"), ("n", "tokens"), ("preset", "mode"),
                                          ("batch", "samples"), ("steps", "layers")])
def test_a_record_an_earlier_release_wrote_is_read_under_its_stored_key_silently(old, new) -> None:
    assert old in QUANTITIES[new].stored
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stored data, not a user's spelling: no warning
        assert read({old: "x"}, new) == "x"
        assert read({new: "y", old: "x"}, new) == "y"  # the table's key first
        assert read({}, new) is None


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
    """The engine hands a task its params under the table's names (``RunSpec.named_params`` of its
    ``Task.names``); the identity hashes them as stored."""
    from rankcollapse.experiments.engine.grid import RunSpec
    from rankcollapse.experiments.kit.tasks.curves import SIMULATE_CURVES, simulation_config

    stored = {"n": 6, "batch": 2, "preset": "attn+sphere", "d": 4, "layers": 1}
    spec = RunSpec("e", SIMULATE_CURVES.name, stored, names=SIMULATE_CURVES.names)
    assert spec.run_id == RunSpec("e", SIMULATE_CURVES.name, dict(stored)).run_id  # names: not the identity
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = simulation_config(spec.named_params, None)
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
    """``--text-file`` is ``AnalyzeConfig.text_file`` (the flag is the field's)."""
    import json

    assert QUANTITIES["text_file"].flag == "--text-file"
    args = ["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", "--layers", "1",
            "--no-progress", "--no-table"]
    path = tmp_path / "t.txt"
    path.write_text("one name per quantity, in Python and on the command line alike. " * 20)
    assert main([*args, "--text-file", str(path), "--out", str(tmp_path / "new")]) == 0
    assert not capsys.readouterr().err.strip()
    config = json.loads((tmp_path / "new" / "config.json").read_text())["config"]["analyze"]
    assert config["text_file"] == str(path) and config["corpus"] is None
