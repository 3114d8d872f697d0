"""A finished reproduce folder's claims.json read back (``pipeline.results.load_judged``): a row that is
no claim is one line naming the row and its unknown keys, not Python's 'unexpected keyword argument'."""

from __future__ import annotations

import json

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.folder import MARKER_NAME
from rankcollapse.pipeline.results import load_judged


@pytest.mark.parametrize(("row", "words"), [({"bogus": 1, "story": "x"}, "row 0 (unknown keys bogus)"),
                                            (["a", "list"], "row 0 (a list)")])
def test_a_claims_row_that_is_no_claim_names_the_row_and_its_keys(tmp_path, row, words):
    marker = {"rankcollapse": "output folder", "format": 2, "command": "reproduce", "complete": True,
              "files": ["claims.json", "experiments.json"], "scratch": [], "running": None}
    (tmp_path / MARKER_NAME).write_text(json.dumps(marker))
    (tmp_path / "claims.json").write_text(json.dumps([row]))
    (tmp_path / "experiments.json").write_text(json.dumps({"meta": {}}))
    with pytest.raises(RankCollapseError) as caught:
        load_judged(tmp_path)
    assert words in str(caught.value) and "keyword" not in str(caught.value), caught.value
