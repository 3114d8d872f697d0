"""Every config that reads excerpts refuses the same sizes with the same one line (one check)."""

from __future__ import annotations

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.analyze.config import AnalyzeConfig, check_excerpt_size
from rankcollapse.models.measure import CurvesConfig, GeometryConfig


@pytest.mark.parametrize(("samples", "tokens"), [(0, 8), (-1, 8), (4, 1), (4, 0)])
def test_too_few_samples_or_tokens_is_the_one_line_of_every_config(samples: int, tokens: int) -> None:
    with pytest.raises(RankCollapseError) as err:
        check_excerpt_size(samples, tokens)
    line = str(err.value)
    assert line == f"need samples >= 1 and tokens >= 2, got {samples}, {tokens}"
    for config in (AnalyzeConfig, CurvesConfig, GeometryConfig):
        with pytest.raises(RankCollapseError) as err:
            config(samples=samples, tokens=tokens)
        assert str(err.value) == line


def test_one_sample_of_two_tokens_is_the_smallest_run() -> None:
    check_excerpt_size(1, 2)
    for config in (AnalyzeConfig, CurvesConfig, GeometryConfig):
        assert config(samples=1, tokens=2).tokens == 2
