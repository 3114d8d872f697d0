"""Story ``karagodin`` on synthetic curves: post-LN against pre-LN, each verdict its rows can give.

Each run's mu_rel is drawn by hand (an exponential fall, a t^-1 law, a level) per placement, and its token
speed as a level per placement, so the verdicts are known before the rules read them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Data, StoryData
from rankcollapse.experiments.contract.verdicts import FOLLOWUPS
from rankcollapse.experiments.engine.config import load_arms
from rankcollapse.experiments.kit.curves import curve_rows, sample_stats
from rankcollapse.experiments.stories import ORDER, all_stories
from rankcollapse.experiments.stories.karagodin import PAPER, block_label, claims, figures, headlines

STORY = "karagodin"
Law = Callable[[np.ndarray], np.ndarray]


def exponential(factor: float) -> Law:
    return lambda t: 0.9 * factor**t


def power(exponent: float) -> Law:
    return lambda t: 0.9 * (1.0 + t) ** exponent


def _data(post: Law, pre: Law, laws: dict[str, Law] | None = None,
          speeds: dict[str, float] | None = None) -> StoryData:
    """StoryData of the tiny arm whose runs carry ``post(t)`` / ``pre(t)`` (Mix-LN, Peri-LN and nGPT:
    ``laws``, else pre's) times a little noise per sample, and a token speed of ``speeds[placement]``
    (default 0.2)."""
    found = all_stories()[STORY]
    (exp,) = load_arms(found.config, "tiny", STORY, found.story.tasks)
    depth, b = int(exp.base["layers"]), int(exp.base["samples"])
    t = np.arange(depth + 1, dtype=float)
    frames, index = [], []
    for spec in exp.runs():
        p = spec.params
        gen = np.random.default_rng(int(spec.seed))
        law = post if p["placement"] == "post" else (laws or {}).get(p["placement"], pre)
        values = law(t)[None, :] * np.exp(0.01 * gen.standard_normal((b, depth + 1)))
        keys = {"placement": p["placement"], "mlp": p["mlp"], "dtype": p["dtype"], "run_id": spec.run_id,
                "experiment": exp.name, "seed": spec.seed}
        rows = [{"kind": "curve", "pretrained": False, **keys, **r}
                for r in curve_rows({"mu": values, "mu_rel": values}, str(p["dtype"]))]
        level = (speeds or {}).get(p["placement"], 0.2)
        rows += [{"kind": "speed", "pretrained": False, "layer": k, "samples": b, **keys,
                  **sample_stats("token_speed", level * np.exp(0.01 * gen.standard_normal(b)))}
                 for k in range(1, depth + 1)]
        frames.append(pd.DataFrame(rows))
        index.append({"status": "ok", "error": "", **keys})
    data = Data(exp, pd.concat(frames, ignore_index=True), pd.DataFrame(index))
    return StoryData(STORY, {"paper": data}, dict(exp.verdict), dict(exp.ranges))


def _verdicts(sd: StoryData) -> dict[str, str]:
    return {c.key: c.verdict for c in claims(sd)}


def test_the_story_is_its_own_follow_up_section_after_the_others() -> None:
    # after the NeurIPS paper's stories, in its own section (later follow-ups may come after it)
    assert PAPER in FOLLOWUPS and ORDER.index(STORY) > ORDER.index("fig9")
    assert all_stories()[STORY].story.paper == PAPER


def test_placements_drawn_as_the_abstract_says_reproduce_all_five() -> None:
    laws = {"mix": exponential(0.9), "ngpt": power(-1.0), "peri": power(-0.5)}
    got = _verdicts(_data(exponential(0.7), power(-1.0), laws, {"peri": 0.5}))
    assert got == {
        "preln_resists": "reproduced",
        "postln_exponential": "reproduced",
        "preln_polynomial": "reproduced",
        "mix_ngpt_resist": "reproduced",
        "periln_best": "reproduced",
    }


def test_a_mix_ln_that_falls_faster_than_post_ln_does_not_resist() -> None:
    rows = {c.key: c for c in claims(_data(exponential(0.7), power(-1.0), {"mix": exponential(0.5)}))}
    row = rows["mix_ngpt_resist"]
    assert row.verdict == "not reproduced" and "mix vs post" in row.cause


def test_peri_ln_is_not_best_when_another_moves_faster_early_or_collapses_more_slowly() -> None:
    laws = {"peri": power(-0.5)}
    faster_post = claims(_data(exponential(0.7), power(-1.0), laws, {"peri": 0.5, "post": 0.9}))
    row = {c.key: c for c in faster_post}["periln_best"]
    assert row.verdict == "not reproduced" and "peri vs post" in row.cause
    slower_ngpt = {"peri": power(-0.5), "ngpt": power(-0.1)}
    sd = _data(exponential(0.7), power(-1.0), slower_ngpt, {"peri": 0.5})
    row = {c.key: c for c in claims(sd)}["periln_best"]
    assert row.verdict == "not reproduced" and "ngpt" in row.cause
    # equal speeds and equal laws: nothing is decided
    row = {c.key: c for c in claims(_data(exponential(0.7), power(-1.0)))}["periln_best"]
    assert row.verdict != "reproduced"


def test_a_pre_ln_that_falls_exponentially_is_not_the_polynomial_law() -> None:
    got = _verdicts(_data(exponential(0.7), exponential(0.9)))
    assert got["preln_polynomial"] == "not reproduced" and got["preln_resists"] == "reproduced"


def test_a_post_ln_that_keeps_its_level_is_not_exponential_and_does_not_lose_to_pre_ln() -> None:
    sd = _data(power(0.0), power(-1.0))
    rows = {c.key: c for c in claims(sd)}
    assert rows["postln_exponential"].verdict == "not reproduced"
    assert rows["preln_resists"].verdict == "not reproduced" and "faster" in rows["preln_resists"].evidence


def test_each_block_is_a_condition_of_the_row() -> None:
    rows = {c.key: c for c in claims(_data(exponential(0.7), power(-1.0)))}
    for key in ("preln_resists", "postln_exponential", "preln_polynomial"):
        assert "attention + skip" in rows[key].evidence and "with the MLP" in rows[key].evidence, key
    assert block_label(True) == "with the MLP" and block_label("False") == "attention + skip"


def test_the_figure_and_headline_read_both_placements() -> None:
    sd = _data(exponential(0.7), power(-1.0))
    (fig,) = figures(sd)
    assert set(fig.data["placement"]) == {"post", "pre", "mix", "peri", "ngpt"}
    assert set(fig.data["block"]) == {"attention + skip", "with the MLP"}
    pre = fig.data[(fig.data["placement"] == "pre") & (fig.data["dtype"] == "float64")]
    assert np.allclose(pre["slope_log_t_last_half"], -np.log(33 / 17) / np.log(2), atol=0.02)
    line, why = headlines(sd)
    assert "post-LN" in line and "pre-LN" in line and why.startswith("Why:")
