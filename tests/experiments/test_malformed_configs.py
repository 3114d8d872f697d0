"""A custom sweep's YAML (``reproduce --config-dir``) with parameters of the wrong type, missing keys,
negative or absurd sizes, or parts that are not mappings: one line naming the file, the run and the
parameter, exit 2, before any run starts -- never a ValueError / TypeError / OverflowError / KeyError
traceback from the pre-sweep estimate (``Experiment.cost_s`` and the tasks' ``cost_s``, which read
parameters through ``validate.check_param``) or from applying a profile."""

from __future__ import annotations

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import PARAM_MAX, check_param

SIM = "title: t\ntask: simulate\n"
#: name -> (the YAML, the profile, words the one line must hold)
CASES = {
    "a word as a size": (SIM + "base: {n: 4, d: 2, layers: abc, batch: 1}\ngrid: {seed: [0]}\n", "full",
                         ["x.yaml", "parameter layers", "'abc'"]),
    "a negative size": (SIM + "base: {n: -4, d: 2, layers: 2, batch: 1}\ngrid: {seed: [0]}\n", "full",
                        ["parameter n", "-4"]),
    "a list as a size": (SIM + "base: {n: [1, 2], d: 2, layers: 2}\ngrid: {seed: [0]}\n", "full",
                         ["parameter n", "[1, 2]"]),
    "an infinite size": (SIM + "base: {n: .inf, d: 2, layers: 2}\ngrid: {seed: [0]}\n", "full",
                         ["parameter n", "inf"]),
    "a size of 10^200": (SIM + "base: {n: 1" + "0" * 200 + ", d: 2}\ngrid: {seed: [0]}\n", "full",
                         ["parameter n", "1e+15"]),
    "a bad size in the grid": (SIM + "base: {d: 2}\ngrid: {n: [4, -1]}\n", "full", ["parameter n", "-1"]),
    "a missing key a story's task needs": ("title: t\ntask: ln_bounds\nbase: {d: 2}\ngrid: {seed: [0]}\n",
                                           "full", ["parameter tokens is missing"]),
    "a negative sleep": ("title: t\ntask: toy\nbase: {sleep_s: -1, layers: 2}\ngrid: {seed: [0]}\n", "full",
                         ["parameter sleep_s", "-1"]),
    "masks not a list": ("title: t\ntask: model_curves\nbase: {masks: 3}\ngrid: {seed: [0]}\n", "full",
                         ["parameter masks", "list"]),
    "base a list": (SIM + "base: [1]\ngrid: {seed: [0]}\n", "full", ["base must be a mapping"]),
    "grid a list": (SIM + "base: {n: 4}\ngrid: [1]\n", "full", ["grid must be a mapping"]),
    "profiles a list": (SIM + "base: {n: 4}\ngrid: {seed: [0]}\nprofiles: [1]\n", "quick",
                        ["profiles must be a mapping"]),
    "a profile a number": (SIM + "base: {n: 4}\ngrid: {seed: [0]}\nprofiles: {quick: 3}\n", "quick",
                           ["profiles.quick must be a mapping"]),
    "a profile's base a list": (SIM + "grid: {seed: [0]}\nprofiles: {quick: {base: [1]}}\n", "quick",
                                ["profiles.quick.base must be a mapping"]),
    "task a list": ("title: t\ntask: [simulate]\ngrid: {seed: [0]}\n", "full", ["task must be a word"]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_malformed_custom_config_is_one_line_before_any_run(tmp_path, capsys, case):
    text, profile, words = CASES[case]
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "x.yaml").write_text(text)
    out = tmp_path / "out"
    code = main(["reproduce", "--config-dir", str(tmp_path / "cfg"), "--profile", profile, "--no-progress",
                 "--out", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error:"), err
    assert all(w in lines[0] for w in words), lines[0]
    assert not list(out.glob("runs/*/*.json"))  # nothing ran


def test_check_param_reads_defaults_and_bounds():
    assert check_param({"n": 4}, "n") == 4.0 and check_param({"n": None}, "n", 32) == 32.0
    assert check_param({}, "layers", 0, low=0) == 0.0
    assert check_param({"s": 0.5}, "s", low=0, integer=False) == 0.5
    with pytest.raises(RankCollapseError, match="parameter n must be an integer, got True"):
        check_param({"n": True}, "n")
    with pytest.raises(RankCollapseError, match="between 1 and"):
        check_param({"n": PARAM_MAX + 1}, "n")
