"""Run one story's profile in this process (no store, no pool): its StoryData, rows and figures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.experiments.contract.story import Data, StoryData
from rankcollapse.experiments.engine.config import load_arms
from rankcollapse.experiments.engine.store import canonical_or_plain
from rankcollapse.experiments.engine.tasks import execute_run
from rankcollapse.experiments.stories import all_stories


def arm_data(exp: Any) -> Data:
    """Every run of one arm, executed here, as the tables ``reproduce`` would collect."""
    frames, index = [], []
    for spec in exp.runs():
        res = execute_run(spec, on_layer=lambda t: None)
        index.append(
            {
                "run_id": spec.run_id,
                "experiment": exp.name,
                "status": res.status,
                "error": res.error,
                "seed": spec.seed,
                **{k: canonical_or_plain(v) for k, v in spec.params.items()},
                **{f"summary.{k}": v for k, v in res.summary.items()},
            }
        )
        if res.status == "ok" and res.rows:
            frame = pd.DataFrame(res.rows)
            for k, v in spec.params.items():
                if k not in frame:
                    frame[k] = canonical_or_plain(v)
            frame["run_id"], frame["experiment"] = spec.run_id, exp.name
            frames.append(frame)
    failed = [r["error"] for r in index if r["status"] != "ok"]
    assert not failed, failed
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id"])
    return Data(exp, table, pd.DataFrame(index))


def run_story(name: str, profile: str = "tiny") -> tuple[StoryData, list[Any], list[Any]]:
    """(story data, rows, figures) of story ``name`` at ``profile`` (skipped arms left out)."""
    found = all_stories()[name]
    exps = load_arms(found.config, profile, name, found.story.tasks)
    arms = {e.arm: arm_data(e) for e in exps if e.grid is not None}
    sd = StoryData(name, arms, dict(exps[0].verdict), dict(exps[0].ranges))
    return sd, found.story.claims(sd), found.story.figures(sd)


@contextmanager
def story_package(tmp_path: Path, monkeypatch: Any) -> Iterator[tuple[str, Path]]:
    """A fresh importable package ``storypkg_<n>`` under ``tmp_path`` for temporary stories: (name,
    folder); its modules are forgotten again afterwards."""
    name = f"storypkg_{abs(hash(tmp_path)) % 10**8}"
    folder = tmp_path / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield name, folder
    finally:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]
