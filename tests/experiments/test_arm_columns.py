"""An arm judged with the whole folder reads what it reads judged alone (``--only``): its own columns.

The leak this pins: a whole folder's long table carries every story's columns, NaN in the others' rows;
``unit_of`` read an all-NaN ``pretrained`` (another story's column) as True, so the training story's
random-init networks were footed as "32 samples per condition (Student t, 31 df)" while their intervals
were over 4 networks (3 df).
"""

from __future__ import annotations

import math

import pandas as pd

from rankcollapse.experiments.contract.story import slice_data
from rankcollapse.experiments.kit.data import NETWORK, SAMPLE, unit_of


class _Exp:
    def __init__(self, name: str) -> None:
        self.name = name


def _folder() -> tuple[pd.DataFrame, pd.DataFrame]:
    mine = pd.DataFrame({"run_id": ["a", "a"], "experiment": "s.mine", "layer": [0, 1], "mu": [1.0, 0.5]})
    other = pd.DataFrame({"run_id": ["b"], "experiment": "t.other", "layer": [0], "pretrained": [True],
                          "zero_share": [0.0]})
    table = pd.concat([mine, other], ignore_index=True, sort=False)  # as collect_table builds it
    index = pd.DataFrame({"run_id": ["a", "b"], "experiment": ["s.mine", "t.other"], "status": "ok",
                          "summary.k": [math.nan, 1.0]})
    return table, index


def test_an_arm_sees_only_the_columns_its_runs_wrote() -> None:
    table, index = _folder()
    assert {"pretrained", "zero_share"} <= set(table.columns)
    mine = slice_data(_Exp("s.mine"), table, index)
    assert list(mine.table.columns) == ["run_id", "experiment", "layer", "mu"]
    assert list(mine.table["mu"]) == [1.0, 0.5]
    assert "summary.k" in mine.index  # the index keeps every column: a summary key reads NaN
    other = slice_data(_Exp("t.other"), table, index)
    assert {"pretrained", "zero_share"} <= set(other.table.columns) and "mu" not in other.table


def test_an_arm_alone_and_within_the_whole_folder_read_the_same_frame() -> None:
    table, index = _folder()
    alone = table[table["experiment"] == "s.mine"].dropna(axis=1, how="all")
    within = slice_data(_Exp("s.mine"), table, index).table
    pd.testing.assert_frame_equal(within, alone)
    assert unit_of(within) == NETWORK


def test_a_row_that_does_not_say_pretrained_is_not_pretrained() -> None:
    frame = pd.DataFrame({"pretrained": [math.nan, math.nan]})
    assert unit_of(frame) == NETWORK  # astype(bool) read NaN as True: samples
    assert unit_of(pd.DataFrame({"pretrained": [True, math.nan]})) == NETWORK
    assert unit_of(pd.DataFrame({"pretrained": [True, True]})) == SAMPLE
    assert unit_of(pd.DataFrame({"pretrained": [True, False]})) == NETWORK
