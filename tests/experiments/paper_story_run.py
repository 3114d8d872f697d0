"""Run one story's profile in this process (no store, no pool) and hand back its Data, claims, figures."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rankcollapse.experiments.engine.config import load_experiment
from rankcollapse.experiments.engine.store import canonical_or_plain
from rankcollapse.experiments.engine.tasks import execute_run
from rankcollapse.experiments.engine.verdicts import Data, judge
from rankcollapse.experiments.stories import all_stories


def run_story(name: str, profile: str = "tiny") -> tuple[Data, list[Any], list[Any]]:
    """(data, claims, figures) of story ``name`` run at ``profile`` in this process."""
    found = all_stories()[name]
    exp = load_experiment(found.config, profile, task=found.story.task_name, target=found.story.target)
    frames, index = [], []
    for spec in exp.runs():
        res = execute_run(spec, on_layer=lambda t: None)
        rec = {"run_id": spec.run_id, "experiment": exp.name, "status": res.status, "error": res.error,
               **{k: canonical_or_plain(v) for k, v in spec.params.items()},
               **{f"summary.{k}": v for k, v in res.summary.items()}}
        index.append(rec)
        if res.status == "ok" and res.rows:
            frame = pd.DataFrame(res.rows)
            for k, v in spec.params.items():
                if k not in frame:
                    frame[k] = canonical_or_plain(v)
            frame["run_id"], frame["experiment"] = spec.run_id, exp.name
            frames.append(frame)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id"])
    data = Data(exp, table, pd.DataFrame(index))
    failed = [r["error"] for r in index if r["status"] != "ok"]
    assert not failed, failed
    claims = judge(found.story.claims, data)
    figures = found.story.figures(data)
    return data, claims, figures
