"""`rankcollapse mask`: JSON keys, readable summary, plot, and bad input -> one line + exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rankcollapse.cli.main import main


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["mask", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_has_documented_keys_and_values(capsys) -> None:
    code, out, _ = _run(capsys, "causal&window:w=4", "--tokens", "10", "--json")
    assert code == 0
    facts = json.loads(out)
    for key in ("spec", "n", "edges", "self_loops", "strongly_connected", "quasi_strongly_connected",
                "center_nodes", "radius", "center_eccentricities", "closed_components", "hop_distances",
                "hop_distance_histogram", "band", "theorem1_applies"):
        assert key in facts, key
    assert facts["spec"] == "causal&window:w=4" and facts["n"] == 10
    assert facts["edges"] == 40  # 1+2+3+4+5*6
    assert facts["center_nodes"] == [0] and facts["radius"] == 3
    assert facts["hop_distances"] == [0, 1, 1, 1, 1, 2, 2, 2, 2, 3]
    assert facts["closed_components"] == [[0]]
    assert facts["band"] == [-4, 0]


def test_json_without_center_has_null_radius(capsys) -> None:
    code, out, _ = _run(capsys, "block:size=3", "--tokens", "7", "--json")
    facts = json.loads(out)
    assert code == 0 and facts["radius"] is None and facts["center_nodes"] == []
    assert facts["closed_components"] == [[0, 1, 2], [3, 4, 5], [6]]
    assert facts["hop_distances"] is None and not facts["theorem1_applies"]


def test_json_summary_mode_for_large_n(capsys) -> None:
    code, out, _ = _run(capsys, "window:w=8", "--tokens", "5000", "--json")
    facts = json.loads(out)
    assert code == 0 and "hop_distances" not in facts and len(facts["center_nodes"]) == 5000
    assert facts["radius"] == 313
    code, out, _ = _run(capsys, "window:w=8", "--tokens", "50", "--json", "--summary")
    assert "hop_distances" not in json.loads(out)


def test_text_summary_explains_theorem_1(capsys) -> None:
    code, out, _ = _run(capsys, "causal-window:w=2", "--tokens", "9")
    assert code == 0
    assert "Theorem 1 applies" in out and "radius r = 4" in out and "slower rate" in out
    code, out, _ = _run(capsys, "block:size=2", "--tokens", "6")
    assert code == 0 and "Theorem 1 does not apply" in out and "no center node" in out


def test_plot_writes_png(capsys, tmp_path) -> None:
    for n in (12, 3000):
        path = tmp_path / f"m{n}.png"
        code, _, _ = _run(capsys, "window:w=2|causal", "--tokens", str(n), "--plot", str(path))
        assert code == 0 and path.stat().st_size > 1000
        assert path.read_bytes()[:4] == b"\x89PNG"


def test_help_exits_zero_and_lists_families(capsys) -> None:
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and "causal-window" in out and "--plot" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nope", "--tokens", "4"], "unknown mask family 'nope'"),
        (["window", "--tokens", "4"], "missing parameter 'w'"),
        (["window:w=-2", "--tokens", "4"], "too small"),
        (["window:w=2,z=1", "--tokens", "4"], "unknown parameter 'z'"),
        (["causal&", "--tokens", "4"], "expected a mask family"),
        (["causal|(window:w=1", "--tokens", "4"], "missing ')'"),
        (["causal", "--tokens", "0"], "sequence length n=0"),
        (["causal", "--tokens", "-5"], "sequence length n=-5"),
        (["causal"], "--tokens"),
        (["causal", "--tokens", "abc"], "abc"),
        (["causal", "--tokens", "4", "--plot", "/nonexistent/dir/x.png"], "cannot write plot"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(capsys, args: list[str], fragment: str) -> None:
    code, _, err = _run(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert fragment in lines[0]


@pytest.mark.parametrize(
    ("array", "n", "fragment"),
    [
        (np.ones((3, 4), dtype=bool), 3, "square"),
        (np.ones((3, 3), dtype=np.float32), 3, "dtype float32"),
        (np.zeros((3, 3), dtype=bool), 3, "lacks self-loops"),
        (np.eye(3, dtype=bool), 4, "is 3 x 3 but n=4"),
    ],
)
def test_bad_file_mask_via_cli(capsys, tmp_path, array: np.ndarray, n: int, fragment: str) -> None:
    path = tmp_path / "m.npy"
    np.save(path, array)
    code, _, err = _run(capsys, f"file:{path}", "--tokens", str(n))
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err


def test_good_file_mask_via_cli(capsys, tmp_path) -> None:
    path = tmp_path / "m.npy"
    np.save(path, np.tril(np.ones((5, 5), dtype=bool)))
    code, out, _ = _run(capsys, f"file:{path}", "--tokens", "5", "--json")
    assert code == 0 and json.loads(out)["center_nodes"] == [0]
