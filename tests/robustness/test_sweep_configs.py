"""A custom sweep runs the config the user wrote or nothing (issue 39): unknown YAML keys were ignored
(``grd:`` for ``grid:`` ran one point, exit 0), a sweep of zero runs published a complete report with
exit 0, and an experiment named ``..`` (a file ``...yaml``) wrote its run records at the top of ``--out``.
Each is one line, exit 2, and nothing written."""

from __future__ import annotations

import pytest

from rankcollapse.cli.main import main

TOY = "title: t\ntask: toy\nbase: {sleep_s: 0, layers: 2, rate: 0.5}\n"


def run(tmp_path, capsys, name: str, text: str, profile: str = "quick") -> tuple[int, list[str]]:
    configs = tmp_path / "cfg"
    configs.mkdir()
    (configs / name).write_text(text)
    code = main(["reproduce", "--config-dir", str(configs), "--profile", profile, "--no-progress", "--out",
                 str(tmp_path / "out")])
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


#: name -> (the YAML, the words of its one line): the one schema of a config
UNKNOWN = {
    "a top-level key": (TOY + "grd: {seed: [0, 1, 2]}\n", ["unknown key 'grd'", "allowed: name, title"]),
    "a profile's name": (TOY + "grid: {seed: [0]}\nprofiles: {quik: {grid: {seed: [1]}}}\n",
                         ["profiles: unknown key 'quik'", "allowed: quick, tiny, paper"]),
    "the full profile (base + grid as written)": (TOY + "grid: {seed: [0]}\nprofiles: {full: {skip: true}}\n",
                                                  ["unknown key 'full'"]),
    "a key of a profile": (TOY + "grid: {seed: [0]}\nprofiles: {quick: {grd: {seed: [1, 2]}}}\n",
                           ["profiles.quick: unknown key 'grd'", "allowed: base, grid, skip"]),
}


@pytest.mark.parametrize("case", UNKNOWN, ids=list(UNKNOWN))
def test_an_unknown_yaml_key_is_one_line_and_nothing_runs(tmp_path, capsys, case):
    text, words = UNKNOWN[case]
    code, lines = run(tmp_path, capsys, "x.yaml", text)
    assert code == 2 and len(lines) == 1 and all(w in lines[0] for w in words), lines
    assert not (tmp_path / "out").exists()


def test_a_story_configs_unknown_key_is_one_line(tmp_path):
    from rankcollapse.edge.errors import RankCollapseError
    from rankcollapse.experiments.engine.config import load_arms

    path = tmp_path / "s.yaml"
    path.write_text("title: t\narms:\n  a:\n    title: t\n    grid: {seed: [0]}\n    opt-in: true\n")
    with pytest.raises(RankCollapseError, match=r"arm a: unknown key 'opt-in'; allowed: .*opt_in"):
        load_arms(path, "quick", "s", {"a": (None, False)})


def test_a_sweep_of_zero_runs_is_one_line_exit_2_and_never_a_finished_report(tmp_path, capsys):
    skipped = TOY + "grid: {seed: [0]}\nprofiles: {quick: {skip: true}}\n"
    code, lines = run(tmp_path, capsys, "x.yaml", skipped)
    assert code == 2 and len(lines) == 1 and "no run to do" in lines[0] and "profile quick" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_an_experiment_named_dot_dot_is_refused_and_writes_nothing_outside_runs(tmp_path, capsys):
    code, lines = run(tmp_path, capsys, "...yaml", TOY + "grid: {seed: [0]}\n")
    assert code == 2 and len(lines) == 1 and "experiment name '..'" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_record_counting_no_rows_whose_checksum_describes_a_file_is_measured_again(tmp_path, capsys):
    import json

    import pandas as pd

    from rankcollapse.experiments.engine.store import collect_index, collect_table

    code, lines = run(tmp_path, capsys, "x.yaml", TOY + "grid: {seed: [0, 1]}\n")
    assert code == 0, lines
    out = tmp_path / "out"
    before = collect_table(out)
    record = sorted((out / "runs" / "x").glob("*.json"))[0]
    edited = json.loads(record.read_text())
    assert edited["n_rows"] > 0 and edited["csv_bytes"] > 0
    edited["n_rows"] = 0  # its csv_bytes and csv_sha256 still describe the rows
    record.write_text(json.dumps(edited))
    index = collect_index(out).set_index("run_id")
    assert index.loc[edited["run_id"], "status"] != "ok"  # not trusted: flagged, not a finished run
    code = main(["reproduce", "--config-dir", str(tmp_path / "cfg"), "--profile", "quick", "--no-progress",
                 "--out", str(out)])
    assert code == 0 and "1 run now" in capsys.readouterr().out  # measured again
    pd.testing.assert_frame_equal(collect_table(out), before)  # every row back in runs.csv
