"""`rankcollapse mask` under demanding input: exit 2 with one short line, never a traceback or an OOM."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankcollapse.cli.main import main


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["mask", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_error(capsys, *args: str, fragment: str, max_len: int = 400) -> str:
    code, _, err = _run(capsys, *args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and len(lines[0]) <= max_len, err[:500]
    assert fragment in err, err
    return lines[0]


@pytest.mark.parametrize(("args", "fragment"), [
    (["(" * 400 + "causal" + ")" * 400, "--tokens", "4"], "nested deeper than 64"),
    (["x" * 100_000, "--tokens", "4"], "unknown mask family"),
    (["causal&window:w=" + "9" * 100_000, "--tokens", "4"], "too large"),
    (["causal&window:w=" + "a" * 100_000, "--tokens", "4"], "not an integer"),
    (["causal", "--tokens", "9" * 100_000], "too large"),
    (["random:p=0.5,seed=1", "--tokens", "200000"], "(estimate)"),
    (["causal", "--tokens", "99999999999999999999"], "(estimate)"),
    (["causal", "--tokens", "32", "--plot", ""], "plot '' is empty"),
    (["causal", "--tokens", "32", "--out", ""], "No such option: --out"),
    (["causal", "--tokens", "4", "--layers", "0"], "--layers 0 is invalid"),
    (["causal", "--tokens", "4", "--layers", "2.5"], "not an integer"),
    (["causal*0", "--tokens", "4"], "not an integer >= 1"),
    (["causal", "--tokens", "4", "--layers", "3", "--plot", "x.png"], "plot does not apply to a schedule"),
    (["random:p=0.5,seed=1", "--tokens", "30000", "--layers", "40"], "word operations"),
    (["document:lengths=3,5", "--tokens", "9"], "is 8 x 8 but n=9"),
    (["tree:parents=-1,0,2", "--tokens", "3"], "is not before token 2"),
])
def test_bad_input_is_one_short_line_and_exit_2(capsys, args: list[str], fragment: str) -> None:
    _one_line_error(capsys, *args, fragment=fragment)


def test_plot_into_a_directory_is_refused(capsys, tmp_path) -> None:
    line = _one_line_error(capsys, "causal", "--tokens", "8", "--plot", str(tmp_path),
                           fragment="is a directory")
    assert "mask.png" in line and list(tmp_path.iterdir()) == []


def test_plot_into_a_read_only_folder_is_one_line_naming_the_file(capsys, tmp_path, monkeypatch) -> None:
    from readonly import read_only

    out = read_only(tmp_path / "ro", monkeypatch)
    line = _one_line_error(capsys, "causal", "--tokens", "8", "--plot", str(out / "m.png"),
                           fragment="(EACCES)")
    assert "cannot write plot" in line and "m.png" in line and list(out.iterdir()) == []


def test_file_mask_whose_header_claims_a_huge_shape_is_refused_before_allocating(capsys, tmp_path) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|b1", "fortran_order": False,
                                                  "shape": (10**6, 10**6)})
    path = tmp_path / "huge.npy"
    path.write_bytes(header.getvalue() + b"\x01" * 100)
    _one_line_error(capsys, f"file:{path}", "--tokens", "4", fragment="claims shape (1000000, 1000000)")


def test_huge_interval_mask_is_analysed_and_plotted_from_its_runs(capsys, tmp_path) -> None:
    code, out, err = _run(capsys, "causal", "--tokens", "200000", "--json", "--plot", str(tmp_path / "c.png"))
    facts = json.loads(out)
    assert code == 0, err
    assert facts["radius"] == 1 and facts["center_nodes"] == [0] and facts["edges"] == 200000 * 200001 // 2
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_schedule_json_names_the_composed_graph_and_windows(capsys) -> None:
    code, out, err = _run(capsys, "causal-window:w=511*5;causal", "--tokens", "4096", "--layers", "26",
                          "--json")
    facts = json.loads(out)
    assert code == 0, err
    assert facts["schedule"] == "causal-window:w=511*5;causal"
    assert facts["layers"] == 26 and facts["period"] == 6
    assert facts["layers_to_center"] == 6 and facts["first_centers"] == [0]
    assert facts["windows"] == [[0, 6], [6, 12], [12, 18], [18, 24]]
    assert facts["layer_radii"][:6] == [9, 9, 9, 9, 9, 1]
    assert facts["product"]["radius"] == 1 and facts["theorem1_product"]["window_lengths"] == [6, 6, 6, 6]
    assert facts["theorem1_product"]["source"].startswith("ours")


def test_schedule_text_summary_says_when_no_center_is_reached(capsys) -> None:
    code, out, _ = _run(capsys, "document:lengths=3,5&causal", "--tokens", "8", "--layers", "4")
    assert code == 0 and "none within 4 layers" in out and "does not apply" in out


_ATOMS = ["causal", "complete", "window:w=2", "causal-window:w=1", "block:size=3", "prefix:k=2",
          "document:lengths=2,3", "tree:parents=-1,0", "random:p=0.3,seed=1", "strided:stride=2", "nope",
          "window:w=", "window", "file:/nonexistent.npy", "w=1", ":", ",", "9" * 30]
_GLUE = ["&", "|", "(", ")", ";", "*2", "*0", "[", "]", " ", "", "=", ","]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(_ATOMS + _GLUE), min_size=0, max_size=8),
       n=st.sampled_from(["1", "5", "6", "0", "-3", "x", "1e3"]),
       layers=st.sampled_from([None, "1", "3", "0", "y"]), as_json=st.booleans())
def test_generated_arguments_exit_0_or_2_with_one_error_line(capsys, parts, n, layers, as_json) -> None:
    args = ["".join(parts), "--tokens", n] + (["--layers", layers] if layers is not None else [])
    code, out, err = _run(capsys, *args, *(["--json"] if as_json else []))
    assert code in (0, 2), (args, err)
    assert "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, (args, err)
    elif as_json:
        json.loads(out)
