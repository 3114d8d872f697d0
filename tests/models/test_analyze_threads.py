"""``metric_threads="auto"``: one thread for short excerpts, torch's own from LONG_TOKENS (the metrics of a
long excerpt cannot keep up with the forward on one thread); a number or None is taken as given."""

from __future__ import annotations

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.analyze import AnalyzeConfig
from rankcollapse.models.analyze.config import LONG_TOKENS


def test_auto_is_one_thread_below_long_tokens_and_torchs_own_from_there() -> None:
    assert AnalyzeConfig(model="tiny:bert", samples=1, tokens=LONG_TOKENS - 1).measure_threads == 1
    assert AnalyzeConfig(model="tiny:bert", samples=1, tokens=LONG_TOKENS).measure_threads is None
    assert AnalyzeConfig(model="tiny:bert", samples=1, tokens=4096, metric_threads=1).measure_threads == 1
    assert AnalyzeConfig(model="tiny:bert", samples=1, tokens=16, metric_threads=None).measure_threads is None


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5, True])
def test_a_bad_thread_count_is_one_line(bad: object) -> None:
    with pytest.raises(RankCollapseError, match="metric_threads"):
        AnalyzeConfig(model="tiny:bert", metric_threads=bad)
