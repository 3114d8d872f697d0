"""Issue 39: ``file:`` mask paths holding ``;``, ``&``, ``|``, ``]`` (and ``(``, ``)``, ``*``, ``[``).

One mechanism (``masks.spec.scan``): a quoted path is read whole by both the mask and the schedule parser,
so ``mask``, ``simulate`` and ``analyze`` read the same file; a canonical spec quotes such a path itself and
parses back to the same matrix; an unquoted path cut at one of these characters and not found says so in
one line (exit 2), never "not found" on the cut path alone.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.fixed import quoted_path
from rankcollapse.masks.schedule import parse_schedule

CHARS = [";", "&", "|", "]", "[", "(", ")", "*"]
N = 6


def _banded(n: int) -> np.ndarray:
    i = np.arange(n)
    return (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] <= 1)  # causal window w=1


@pytest.fixture
def odd_file(tmp_path, request):
    char = request.param
    folder = tmp_path / f"d{char}x"
    folder.mkdir()
    path = folder / f"m{char}1.npy"
    np.save(path, _banded(N))
    return path


@pytest.mark.parametrize("odd_file", CHARS, indirect=True)
def test_a_quoted_path_is_read_whole_by_mask_and_schedule(odd_file):
    for mark in "'\"":
        spec = f"file:{mark}{odd_file}{mark}"
        assert torch.equal(parse_mask(spec).dense(N), torch.from_numpy(_banded(N)))
        both = parse_mask(f"{spec}&causal")
        assert torch.equal(both.dense(N), torch.from_numpy(_banded(N)))
        schedule = parse_schedule(f"{spec}*2;causal")
        assert len(schedule.period) == 3
        # the canonical spec quotes the path and parses back to the same period
        again = parse_schedule(schedule.spec)
        pairs = zip(again.period, schedule.period, strict=True)
        assert all(torch.equal(a.dense(N), b.dense(N)) for a, b in pairs)


@pytest.mark.parametrize("odd_file", [";", "&", "|", "]"], indirect=True)
def test_an_unquoted_cut_path_says_to_quote_it(odd_file, capsys):
    with pytest.raises(RankCollapseError, match="goes in quotes"):
        parse_schedule(f"file:{odd_file}")
    assert main(["mask", f"file:{odd_file}", "--tokens", str(N)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not found" in err[0] and "file:'PATH'" in err[0], err


@pytest.mark.parametrize("odd_file", [";", "&", "|", "]"], indirect=True)
def test_mask_simulate_and_analyze_read_the_same_quoted_file(odd_file, tmp_path, capsys):
    spec = f"file:'{odd_file}'"
    assert main(["mask", spec, "--tokens", str(N), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["spec"] == spec and facts["edges"] == int(_banded(N).sum())  # one mask, not a schedule
    out = tmp_path / "sim"
    args = ["--mask", spec, "--tokens", str(N), "--out", str(out)]
    assert main(["simulate", *args, "--d", "4", "--layers", "2"]) == 0
    assert json.loads((out / "config.json").read_text())["config"]["simulate"]["mask"] == spec
    out = tmp_path / "an"
    args[-1] = str(out)
    assert main(["analyze", *args, "--model", "tiny:bert", "--corpus", "wikipedia", "--samples", "2",
                 "--metrics", "mu_rel", "--no-table"]) == 0
    assert (out / "metrics.csv").is_file()


def test_an_unclosed_quote_is_one_line():
    with pytest.raises(RankCollapseError, match="unclosed"):
        parse_mask("file:'/tmp/a")


def test_quoted_path_leaves_plain_paths_alone_and_refuses_both_quotes():
    assert quoted_path("/data/mask.npy") == "/data/mask.npy"  # run ids of plain paths unchanged
    assert quoted_path("a;b.npy") == "'a;b.npy'"
    assert quoted_path("it's;x.npy") == '"it\'s;x.npy"'
    with pytest.raises(RankCollapseError, match="both"):
        quoted_path("a'b\"c.npy")
