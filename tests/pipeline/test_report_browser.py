"""The report in a real headless browser: every image decodes, every data URI decodes, no script error.

Skipped only where no Chromium is installed (``.ci/run`` installs Debian's ``chromium``)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from rankcollapse.pipeline.browser import check_in_browser, chromium

pytestmark = pytest.mark.skipif(chromium() is None, reason="no chromium (apt-get install chromium)")

_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


def _page(tmp_path: Path, img: str, csv: str = "bGF5ZXIsbXUK", script: str = "") -> Path:
    page = tmp_path / "report.html"
    page.write_text(
        f"<!doctype html><html><body><img alt='fig' src='data:image/png;base64,{img}'>"
        f"<a download='d.csv' href='data:text/csv;base64,{csv}'>data</a>{script}</body></html>"
    )
    return page


def test_a_whole_page_passes_and_a_screenshot_is_written(tmp_path: Path) -> None:
    got = check_in_browser(_page(tmp_path, _PNG), screenshot=tmp_path / "shot.png")
    assert got.ok and got.images == 1, got.describe()
    assert (tmp_path / "shot.png").stat().st_size > 1000


def test_a_broken_image_a_bad_data_uri_and_a_script_error_are_each_caught(tmp_path: Path) -> None:
    assert check_in_browser(_page(tmp_path, "bm90IGEgcG5n")).broken == ["fig"]  # "not a png"
    assert check_in_browser(_page(tmp_path, _PNG, csv="%%%")).bad_data == ["d.csv"]
    got = check_in_browser(_page(tmp_path, _PNG, script="<script>undefined_function();</script>"))
    assert got.errors and "undefined_function" in got.errors[0]


@pytest.mark.slow
def test_the_tiny_report_renders_whole_in_the_browser(tmp_path: Path) -> None:
    from rankcollapse.pipeline import ReproduceConfig, reproduce

    result = reproduce(
        ReproduceConfig(tmp_path / "out", profile="tiny", only=["theorem2", "fig1_fig5"], workers=1,
                        progress=False)
    )
    got = check_in_browser(result.report)
    assert got.ok and got.images == len(result.figures), got.describe()
