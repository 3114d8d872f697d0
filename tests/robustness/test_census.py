"""The hostile-case census names tests: each named file exists and each named test is defined in it, so a
row marked closed never points at a test that was renamed or removed."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parents[1]
CENSUS = Path(__file__).with_name("CENSUS.md")
FILE = re.compile(r"tests/[\w/]+\.py")
NAMED = re.compile(r"(tests/[\w/]+\.py)((?:::[\w]+|, ::[\w]+)*)")


def test_every_test_the_census_names_exists():
    text = CENSUS.read_text(encoding="utf-8")
    files = set(FILE.findall(text))
    assert len(files) > 20
    missing = sorted(f for f in files if not (TESTS.parent / f).is_file())
    assert not missing, missing
    absent = []
    for path, names in NAMED.findall(text):
        body = (TESTS.parent / path).read_text(encoding="utf-8")
        for name in re.findall(r"::(\w+)", names):
            if not re.search(rf"^(?:async )?def {name}\b", body, re.M):
                absent.append(f"{path}::{name}")
    assert not absent, absent
