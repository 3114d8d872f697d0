"""Bad mask specs raise RankCollapseError with one line naming the bad part and what is allowed."""

from __future__ import annotations

import numpy as np
import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask

BAD_SPECS = [
    ("", "empty mask spec"),
    ("   ", "empty mask spec"),
    ("foo", "unknown mask family 'foo'"),
    ("window", "missing parameter 'w'"),
    ("window:", "no parameters"),
    ("window:w=-1", "w='-1' of window is too small"),
    ("window:w=2.5", "not an integer"),
    ("window:w=99999999999999999999", "too large; allowed: an integer <= 2147483647"),
    ("random:p=0.5,seed=99999999999999999999", "too large"),
    ("window:w=abc", "not an integer"),
    ("window:w=2,x=1", "unknown parameter 'x' for window"),
    ("window:w=2,w=3", "given twice"),
    ("window:w", "malformed parameter 'w'"),
    ("complete:w=1", "unknown parameter 'w' for complete"),
    ("dilated:w=2,dilation=0", "dilation='0' of dilated is too small"),
    ("strided:stride=0", "stride='0' of strided is too small"),
    ("block:size=0", "size='0' of block is too small"),
    ("random:p=1.5,seed=0", "out of range"),
    ("random:p=x,seed=0", "not a number"),
    ("random:p=0.5", "missing parameter 'seed'"),
    ("bigbird:w=1,global=1,random=2", "missing parameter 'seed'"),
    ("causal&", "expected a mask family, got end of spec"),
    ("&causal", "expected a mask family, got '&'"),
    ("causal&&window:w=1", "expected a mask family, got '&'"),
    ("causal||window:w=1", "expected a mask family, got '|'"),
    ("(causal", "missing ')'"),
    ("causal)", "unexpected ')'"),
    ("()", "expected a mask family, got ')'"),
    ("causal(window:w=1)", "unexpected '('"),
    ("file:", "needs a path"),
    ("file:/nonexistent/m.npy", "not found"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS, ids=[repr(s) for s, _ in BAD_SPECS])
def test_bad_spec_raises_one_line_error(spec: str, message: str) -> None:
    with pytest.raises(RankCollapseError) as info:
        parse_mask(spec)
    text = str(info.value)
    assert "\n" not in text
    assert message in text


@pytest.mark.parametrize("n", [0, -3, 2.0, True, "4"])
def test_bad_length_raises(n: object) -> None:
    with pytest.raises(RankCollapseError, match="sequence length"):
        parse_mask("causal").dense(n)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.ones((3, 4), dtype=bool), "square"),
        (np.ones((3,), dtype=bool), "square"),
        (np.ones((3, 3), dtype=np.int64), "dtype int64; allowed: bool"),
        (np.zeros((3, 3), dtype=bool), "lacks self-loops at tokens [0, 1, 2]"),
    ],
)
def test_bad_file_matrix_raises(tmp_path, array: np.ndarray, message: str) -> None:
    path = tmp_path / "bad.npy"
    np.save(path, array)
    with pytest.raises(RankCollapseError) as info:
        parse_mask(f"file:{path}")
    assert message in str(info.value)


def test_file_size_mismatch_raises_at_use(tmp_path) -> None:
    path = tmp_path / "m.npy"
    np.save(path, np.eye(4, dtype=bool))
    mask = parse_mask(f"file:{path}")
    with pytest.raises(RankCollapseError, match="is 4 x 4 but n=5; allowed: n=4"):
        mask.dense(5)
    with pytest.raises(RankCollapseError, match="n=3"):
        mask.sparse(3)


def test_large_parameters_are_allowed_and_clip() -> None:
    # A window wider than the sequence is the complete mask (documented: never an error).
    assert parse_mask("window:w=100").is_complete(10)
    assert parse_mask("causal-window:w=100").band(10) == (-9, 0)
    assert parse_mask("block:size=100").is_complete(10)
    assert parse_mask("longformer:w=0,global=50").is_complete(10)
