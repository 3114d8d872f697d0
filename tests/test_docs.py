"""Every snippet of the README and the docs runs as printed and prints what the text says.

A fenced block whose info string is ``python`` or ``bash`` is run, in document order, in a fresh
folder (one per page; the page's Python blocks share one namespace, as in a notebook; bash blocks
run with this checkout's ``rankcollapse`` on the PATH). A block tagged ``long`` (runs for minutes)
or ``setup`` (installs or clones) is shown but not run: ```` ```bash long ````. A block tagged
``output`` right after a run block is what that block prints on stdout; ``...`` stands for any
text (numbers that vary, such as timings). docs/reproduce.md and docs/ARCHITECTURE.md are not
checked here (their snippets belong to the experiments being restructured).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/models.md", "docs/paper-experiments.md", "configs/README.md"]
RUN = ("python", "bash")
SKIP_TAGS = ("long", "setup")

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass
class Block:
    lang: str
    tags: tuple[str, ...]
    code: str
    line: int
    expected: str | None = None

    @property
    def runs(self) -> bool:
        return self.lang in RUN and not set(self.tags) & set(SKIP_TAGS)


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a page, each run block with the ``output`` block that follows it."""
    found: list[Block] = []
    previous_end = 0
    for m in FENCE.finditer(text):
        info = m.group(1).split()
        lang, tags = (info[0], tuple(info[1:])) if info else ("", ())
        line = text.count("\n", 0, m.start()) + 1
        between = text[previous_end : m.start()]
        if lang == "output":
            assert found and found[-1].runs and not between.strip(), \
                f"line {line}: an output block must follow a run block"
            found[-1].expected = m.group(2)
        else:
            found.append(Block(lang, tags, m.group(2), line))
        previous_end = m.end()
    return found


def matches(expected: str, got: str) -> bool:
    """``got`` equals ``expected`` line by line (trailing spaces ignored), ``...`` matching any text."""
    def norm(s: str) -> str:
        return "\n".join(line.rstrip() for line in s.strip("\n").splitlines())

    pattern = ".*?".join(re.escape(part) for part in norm(expected).split("..."))
    return re.fullmatch(pattern, norm(got), flags=re.DOTALL) is not None


DRIVER = r"""
import contextlib, io, json, os, subprocess, sys, traceback
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
results = []
import time
for b in blocks:
    start = time.perf_counter()
    if b["lang"] == "python":
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(b["code"], f"<{b['where']}>", "exec"), namespace)
            results.append({"ok": True, "out": out.getvalue()})
        except BaseException:
            results.append({"ok": False, "out": out.getvalue(), "error": traceback.format_exc()[-3000:]})
    else:
        p = subprocess.run(["bash", "-e", "-c", b["code"]], capture_output=True, text=True)
        results.append({"ok": p.returncode == 0, "out": p.stdout, "error": p.stderr[-3000:]})
    results[-1]["seconds"] = time.perf_counter() - start
json.dump(results, open(sys.argv[2], "w"))
"""


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_snippet_runs_as_printed_and_prints_what_the_text_says(page, tmp_path):
    path = ROOT / page
    todo = [b for b in blocks(path.read_text(encoding="utf-8")) if b.runs]
    if not todo:
        pytest.skip(f"{page} has no snippet to run")
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([{"lang": b.lang, "code": b.code, "where": f"{page}:{b.line}"} for b in todo]))
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
               COLUMNS="200")
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(spec), str(tmp_path / "out.json")], cwd=work,
                          env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "out.json").read_text())
    for block, res in zip(todo, results, strict=True):
        print(f"{page}:{block.line}: {res['seconds']:.1f} s")
        where = f"{page}:{block.line}"
        assert res["ok"], f"{where} fails as printed:\n{block.code}\n{res.get('error', '')}"
        if block.expected is not None:
            assert matches(block.expected, res["out"]), f"{where} prints\n{res['out']}\nnot\n{block.expected}"


def test_the_block_reader_pairs_outputs_and_honours_the_skip_tags():
    text = "a\n```python\nprint(1)\n```\n\n```output\n1\n```\n```bash long\nmake reproduce\n```\n"
    found = blocks(text)
    assert [(b.lang, b.tags, b.expected, b.runs) for b in found] == [
        ("python", (), "1\n", True), ("bash", ("long",), None, False)]
    assert matches("wrote 7 rows (forward ... s)", "wrote 7 rows (forward 0.12 s)")
    assert not matches("wrote 7 rows", "wrote 8 rows")
