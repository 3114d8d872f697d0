"""Load ``report.html`` in a real headless browser and say what a reader would see broken.

:func:`check_in_browser` copies the page with a small script added as its first one that, once the
page has loaded, records every image that did not decode (a broken PNG data URI), every CSV download
whose data URI does not decode, and every script error; Chromium (Debian's ``chromium``) runs it headless with
``--dump-dom`` and the record is read back from the DOM. ``screenshot`` writes a PNG of the first
screen. ``make check-report`` runs it on ``results/quick/report.html``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rankcollapse.edge.errors import RankCollapseError

#: The flags a headless Chromium needs on a closed machine run as root (no sandbox, no network noise).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)

_PROBE = """
<script>
(function () {
  var errors = [];
  window.addEventListener('error', function (e) { errors.push(String(e.message || e.type)); }, true);
  window.addEventListener('load', function () {
    var images = Array.prototype.slice.call(document.images);
    var broken = images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                       .map(function (i) { return i.alt || i.src.slice(0, 40); });
    var bad = [];
    Array.prototype.slice.call(document.querySelectorAll("a[href^='data:']")).forEach(function (a) {
      try { atob(a.getAttribute('href').split(',')[1]); }
      catch (err) { bad.push(a.getAttribute('download')); }
    });
    var out = document.createElement('pre');
    out.id = 'rankcollapse-check';
    out.textContent = JSON.stringify({images: images.length, broken: broken, bad_data: bad, errors: errors});
    document.body.appendChild(out);
  });
})();
</script>
"""


@dataclass
class BrowserCheck:
    """What the browser saw: images on the page, those that did not decode, undecodable data URIs,
    script errors."""

    images: int
    broken: list[str] = field(default_factory=list)
    bad_data: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.broken or self.bad_data or self.errors)

    def describe(self) -> str:
        if self.ok:
            return f"report renders: {self.images} images, every data URI decodes, no script error"
        return (
            f"report broken: {len(self.broken)} of {self.images} images do not decode {self.broken[:3]}; "
            f"{len(self.bad_data)} bad data downloads {self.bad_data[:3]}; errors {self.errors[:3]}"
        )


def _with_probe(html: str) -> str:
    """The page with the probe as its first script (so it sees errors of every later script)."""
    for tag in ("<head>", "<body>"):
        at = html.find(tag)
        if at >= 0:
            return html[: at + len(tag)] + _PROBE + html[at + len(tag) :]
    return _PROBE + html


def chromium() -> str | None:
    """The path of a Chromium executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def check_in_browser(
    page: str | Path, screenshot: str | Path | None = None, timeout: float = 120.0
) -> BrowserCheck:
    """Load ``page`` headless and return what broke (RankCollapseError when no Chromium is installed)."""
    exe = chromium()
    if exe is None:
        raise RankCollapseError(
            "no chromium on this machine; install Debian's chromium (apt-get install chromium)"
        )
    page = Path(page)
    html = page.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="rankcollapse-browser-") as tmp:
        probe = Path(tmp) / page.name
        probe.write_text(_with_probe(html), encoding="utf-8")
        profile = ["--user-data-dir=" + str(Path(tmp) / "profile")]
        dom = subprocess.run(
            [exe, *FLAGS, *profile, "--dump-dom", probe.as_uri()],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if screenshot is not None:
            subprocess.run(
                [
                    exe,
                    *FLAGS,
                    *profile,
                    "--window-size=1280,1600",
                    f"--screenshot={screenshot}",
                    page.resolve().as_uri(),
                ],
                capture_output=True,
                timeout=timeout,
            )
    found = re.search(r'<pre id="rankcollapse-check">(.*?)</pre>', dom.stdout, re.S)
    if found is None:
        raise RankCollapseError(f"the browser did not finish loading {page} (exit {dom.returncode})")
    record = json.loads(
        found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )
    return BrowserCheck(
        int(record["images"]), list(record["broken"]), list(record["bad_data"]), list(record["errors"])
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m rankcollapse.pipeline.browser REPORT [SCREENSHOT]``: 0 when the page renders whole."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m rankcollapse.pipeline.browser REPORT.html [SCREENSHOT.png]", file=sys.stderr)
        return 2
    try:
        result = check_in_browser(args[0], args[1] if len(args) > 1 else None)
    except RankCollapseError as err:
        print(f"rankcollapse: {err}", file=sys.stderr)
        return 2
    print(result.describe())
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
