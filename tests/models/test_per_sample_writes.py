"""``write_per_sample``: the per-sample table is written atomically, and a folder it cannot write into is
one line naming the file and the errno (``edge.inputs.os_error``), nothing left behind."""

from __future__ import annotations

import csv

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze
from rankcollapse.models.analyze import write_per_sample
from readonly import read_only


@pytest.fixture
def result(tiny_models, ids):
    config = AnalyzeConfig(model="tiny:bert", mode="attn", layers=2)
    return analyze(config, model=tiny_models("bert"), ids=ids)


def test_the_table_holds_one_row_per_sample_and_layer(result, tmp_path):
    path = write_per_sample(result, tmp_path / "per_sample.csv")
    rows = list(csv.DictReader(path.read_text().splitlines()))
    assert len(rows) == len(result.per_sample_rows()) == 3 * 3  # 3 samples x layers 0..2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["per_sample.csv"]


def test_a_read_only_folder_is_one_line_naming_the_file(result, tmp_path, monkeypatch):
    out = read_only(tmp_path / "ro", monkeypatch)
    with pytest.raises(RankCollapseError) as err:
        write_per_sample(result, out / "per_sample.csv")
    line = str(err.value)
    assert line.startswith("cannot write per-sample table ") and "per_sample.csv" in line
    assert line.endswith("Permission denied (EACCES)") and "\n" not in line
    assert list(out.iterdir()) == []
