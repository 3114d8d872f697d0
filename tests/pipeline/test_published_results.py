"""The published run (docs/results.md) still says what HEAD's rules say.

docs/results-run.tar.gz holds the judged run's evidence (every run's record and rows, its metadata and
claims); ``pipeline.results.rejudge`` judges it again with this checkout's stories, rules and thresholds,
computing nothing. A rule change that moves a verdict fails here until the page is regenerated
(``make results``), and the page names the commit whose rules judged it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rankcollapse.pipeline.results import EVIDENCE, rejudge, verdict_changes

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def judged():
    return rejudge(DOCS / EVIDENCE)


@pytest.mark.slow
def test_the_published_verdicts_are_heads(judged) -> None:
    published, now, _ = judged
    changes = verdict_changes(published, now)
    assert not changes, (
        f"{len(changes)} verdict(s) of docs/results.md differ under HEAD's rules; regenerate the page "
        "(make results) or fix the rule: " + " | ".join(changes[:8])
    )


@pytest.mark.slow
def test_the_page_is_the_archives_and_names_the_commit_that_judged_it(judged) -> None:
    published, _, meta = judged
    page = (DOCS / "results.md").read_text()
    commit = str(meta.get("commit") or "")
    assert re.fullmatch(r"[0-9a-f]{7,40}", commit), f"the judged run recorded no clean commit: {commit!r}"
    assert f"**commit** `{commit}`" in page
    for c in published:  # every row of the archive is on the page (the main paper's and the follow-ups')
        assert f"`{c.id}`" in page, c.id
