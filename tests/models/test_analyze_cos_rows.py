"""``analyze``'s sampled mean |cos| at long context (``cos_rows``, issue 28): short runs unchanged, long
runs within their reported standard error of every pair, bad values refused in one line."""

from __future__ import annotations

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze

SHORT = dict(model="tiny:llama", samples=2, tokens=16, metrics="mu_rel,mean_abs_cos")


def test_below_four_cos_rows_tokens_every_pair_is_used_and_the_error_is_zero(tiny_models) -> None:
    model = tiny_models("llama")
    default = analyze(AnalyzeConfig(**SHORT), model=model).rows
    exact = analyze(AnalyzeConfig(**SHORT, cos_rows="all"), model=model).rows
    assert [r["mean_abs_cos"] for r in default] == [r["mean_abs_cos"] for r in exact]
    assert all(r["mean_abs_cos_se"] == 0.0 for r in default)
    assert all("mean_abs_cos_se" not in r for r in exact)  # every pair at every length: no error column


def test_a_long_run_is_within_its_standard_error_of_every_pair(tiny_models) -> None:
    """tokens 96 >= 4 x 8: 8 query rows of 96 per sample. The row's error is the mean of its samples'
    (at least the error of their mean), so six of them bound the gap to the exact row."""
    model = tiny_models("llama")
    long = dict(SHORT, tokens=96, samples=3)
    sampled = analyze(AnalyzeConfig(**long, cos_rows=8), model=model).rows
    exact = analyze(AnalyzeConfig(**long, cos_rows="all"), model=model).rows
    assert all(r["mean_abs_cos_se"] > 0 for r in sampled)
    for s, e in zip(sampled, exact, strict=True):
        assert s["mu_rel"] == e["mu_rel"]  # only mean |cos| is sampled
        assert abs(s["mean_abs_cos"] - e["mean_abs_cos"]) < 6 * s["mean_abs_cos_se"]
    assert [r["mean_abs_cos"] for r in sampled] != [r["mean_abs_cos"] for r in exact]
    again = analyze(AnalyzeConfig(**long, cos_rows=8), model=model).rows
    assert [r["mean_abs_cos"] for r in again] == [r["mean_abs_cos"] for r in sampled]  # seeded


@pytest.mark.parametrize("bad", [1, 0, True, 2.5, "some"])
def test_cos_rows_other_than_all_or_a_whole_number_from_2_is_one_line(bad: object) -> None:
    with pytest.raises(RankCollapseError, match=r"--cos-rows .* is invalid; allowed: all, or a whole number"):
        AnalyzeConfig(**SHORT, cos_rows=bad)  # type: ignore[arg-type]


def test_the_cli_takes_cos_rows_and_refuses_a_word_in_one_line(tiny_models, tmp_path, capsys) -> None:
    from rankcollapse.cli.main import main

    out = tmp_path / "run"
    argv = ["analyze", "--model", "tiny:llama", "--samples", "2", "--tokens", "40", "--metrics",
            "mean_abs_cos", "--cos-rows", "8", "--no-progress", "--no-table", "--out", str(out)]
    assert main(argv) == 0
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "mean_abs_cos" in header and "mean_abs_cos_se" in header
    assert main([*argv[:9], "--cos-rows", "many", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rankcollapse: error: --cos-rows 'many' is not a number; allowed: all")
