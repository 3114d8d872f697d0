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


def test_the_evidence_archive_of_one_folder_is_the_same_bytes_each_time(tmp_path):
    """``write_evidence`` twice on an unchanged folder, its files touched in between: identical bytes
    (gzip's header time and the files' times were in the archive: every regeneration a new 29 MB blob)."""
    import os
    import tarfile
    import time

    from rankcollapse.pipeline.results import write_evidence

    out = tmp_path / "out"
    (out / "runs" / "s.arm").mkdir(parents=True)
    marker = {"rankcollapse": "output folder", "format": 2, "command": "reproduce", "complete": True,
              "files": ["claims.json", "experiments.json"], "scratch": [], "running": None}
    (out / MARKER_NAME).write_text(json.dumps(marker))
    row = {"id": "s.k", "story": "s", "key": "k", "experiment": "s.arm", "statement": "a statement",
           "source": "paper", "origin": "paper setting", "verdict": "reproduced", "as_plotted": "reproduced",
           "mechanism": "n/a", "rule": "a rule", "evidence": "its evidence"}
    (out / "claims.json").write_text(json.dumps([row]))
    (out / "experiments.json").write_text(json.dumps({"meta": {"profile": "tiny"}}))
    (out / "runs" / "s.arm" / "a.json").write_text("{}")
    (out / "runs" / "s.arm" / "a.csv").write_text("layer,mu\n0,1.0\n")
    first = write_evidence(out, tmp_path / "one.tar.gz").read_bytes()
    time.sleep(1.1)
    for path in out.rglob("*"):
        os.utime(path)
    again = write_evidence(out, tmp_path / "two.tar.gz").read_bytes()
    assert first == again
    with tarfile.open(tmp_path / "two.tar.gz") as tar:
        assert tar.getnames() == ["experiments.json", "claims.json", "runs/s.arm/a.csv", "runs/s.arm/a.json"]
