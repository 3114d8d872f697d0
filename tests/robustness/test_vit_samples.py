"""A vision encoder's --samples against the images given (issue 39: samples beyond the images were ignored
silently, the run measured the images it had under the count asked for)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from rankcollapse.cli.main import main


@pytest.fixture
def two_images(tmp_path):
    path = tmp_path / "px.npy"
    rng = np.random.default_rng(0)
    np.save(path, rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    return path


def _samples(out) -> set[int]:
    """The run's samples as recorded (``config.json``), and the rows' spread agreeing with it."""
    recorded = json.loads((out / "config.json").read_text())
    found = {v for k, v in _walk(recorded) if k == "samples"}
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    one = all(r["mu_min"] == r["mu_max"] for r in rows)  # one sample: its min is its max at every layer
    assert one == (found == {1}), (found, one)
    return found


def _walk(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from _walk(v)


def test_more_samples_than_images_is_one_line_and_exit_2(tmp_path, two_images, capsys):
    code = main(["analyze", "--model", "tiny:vit", "--pixel-values", str(two_images), "--samples", "8",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "samples=8" in err and "hold 2 images" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "metrics.csv").exists()


def test_fewer_samples_take_the_first_images_and_no_samples_take_them_all(tmp_path, two_images, capsys):
    first = tmp_path / "first"
    assert main(["analyze", "--model", "tiny:vit", "--pixel-values", str(two_images), "--samples", "1",
                 "--out", str(first)]) == 0
    every = tmp_path / "every"
    assert main(["analyze", "--model", "tiny:vit", "--pixel-values", str(two_images),
                 "--out", str(every)]) == 0
    capsys.readouterr()
    assert _samples(first) == {1} and _samples(every) == {2}
