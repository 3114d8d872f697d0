"""The ``alibi`` arm of ``residual_rollout``: the finite-depth U judged in ALiBi SANs, on synthetic profiles.

Each run's influence rows are a profile built by hand (a U, a hump, a profile falling from the first token),
so the rows' verdicts are known before the rule reads them: one row per slope, the condition that decides
it named, the ends' share read from the YAML.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Data, StoryData
from rankcollapse.experiments.contract.verdicts import INCONCLUSIVE
from rankcollapse.experiments.engine.config import load_arms
from rankcollapse.experiments.kit.tasks.curves import profile_layers
from rankcollapse.experiments.stories import all_stories
from rankcollapse.experiments.stories.residual_rollout import alibi_ends, claims, figures, headlines

STORY = "residual_rollout"


def _u(n: int, rng: np.random.Generator) -> np.ndarray:
    p = np.full(n, 1.0)
    p[0], p[-1] = 20.0, 20.0  # both ends far above the middle
    return p * np.exp(rng.normal(0, 0.05, n))


def _hump(n: int, rng: np.random.Generator) -> np.ndarray:
    x = np.arange(n)
    return np.exp(-((x - n / 2) ** 2) / (n / 4) ** 2 + rng.normal(0, 0.05, n))


def _falling(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.exp(-0.5 * np.arange(n) + rng.normal(0, 0.05, n))


def _data(shape_of) -> tuple[StoryData, int]:
    """StoryData of the tiny ``alibi`` arm whose runs carry ``shape_of(slope, lam)``'s profile at every kept
    layer (a distribution: normalised), each seed its own noise; the ``paper`` arm left out."""
    found = all_stories()[STORY]
    exps = load_arms(found.config, "tiny", STORY, found.story.tasks)
    exp = next(e for e in exps if e.arm == "alibi")
    n, depth = int(exp.base["tokens"]), int(exp.base["layers"])
    frames, index = [], []
    for spec in exp.runs():
        p = spec.params
        rng = np.random.default_rng(int(spec.seed))
        prof = shape_of(float(p["alibi_slope"]), float(p["rollout_residual"]))(n, rng)
        prof = prof / prof.sum()
        keys = {"alibi_slope": p["alibi_slope"], "rollout_residual": p["rollout_residual"],
                "dtype": p["dtype"], "run_id": spec.run_id, "experiment": exp.name,
                "seed": spec.seed, "samples": 4}
        rows = [{"kind": "influence", "layer": t, "position": j, "influence": float(v), **keys}
                for t in profile_layers(depth) for j, v in enumerate(prof)]
        rows += [{"kind": "curve", "layer": t, "mu": 1.0, "mu_rel": 1.0, "mu_rel_std": 0.0, "mu_std": 0.0,
                  "variant": "attn", "mask": "causal", "pretrained": False, **keys} for t in range(depth + 1)]
        frames.append(pd.DataFrame(rows))
        index.append({"run_id": spec.run_id, "experiment": exp.name, "status": "ok", "error": "",
                      "seed": spec.seed, "alibi_slope": p["alibi_slope"],
                      "rollout_residual": p["rollout_residual"], "dtype": p["dtype"]})
    data = Data(exp, pd.concat(frames, ignore_index=True), pd.DataFrame(index))
    return StoryData(STORY, {"alibi": data}, dict(exp.verdict), dict(exp.ranges)), n


def _rows(sd: StoryData) -> dict[str, object]:
    return {c.id: c for c in claims(sd) if c.key == "u_shape_alibi"}


def test_a_u_at_every_slope_and_lam_is_reproduced_one_row_per_slope() -> None:
    sd, _ = _data(lambda m, lam: _u)
    rows = _rows(sd)
    assert set(rows) == {f"{STORY}.u_shape_alibi[ALiBi SAN, m={m}]" for m in ("0.05", "0.5")} | {
        f"{STORY}.u_shape_alibi"}
    for cid, c in rows.items():
        if "[" in cid:
            assert c.verdict == "reproduced" and c.origin == "paper setting", (cid, c.verdict)
            assert "lam = 0.3" in c.evidence and "lam = 0.9" in c.evidence
            assert "float64" in c.mechanism_evidence
        else:  # the pretrained ALiBi language models: untested, whatever the SANs say
            assert c.verdict == "untested"


def test_a_hump_at_one_lam_leaves_a_u_at_the_others_and_a_hump_at_every_lam_refutes_it() -> None:
    """The claim is that a U exists (issue 40): a hump at lam = 0.6 does not refute a U seen at 0.3 and 0.9;
    a hump at every lam does, naming the condition nearest to a U and the arms below."""
    sd, _ = _data(lambda m, lam: _hump if (m, lam) == (0.5, 0.6) else _u)
    rows = _rows(sd)
    for m in ("0.05", "0.5"):
        assert rows[f"{STORY}.u_shape_alibi[ALiBi SAN, m={m}]"].verdict == "reproduced"
    sd, _ = _data(lambda m, lam: _hump if m == 0.5 else _u)
    large = _rows(sd)[f"{STORY}.u_shape_alibi[ALiBi SAN, m=0.5]"]
    assert large.verdict == "not reproduced" and "no condition shows it" in large.cause
    assert "start and end arm below the middle" in large.cause or "not a U" in large.cause


def test_a_profile_falling_from_the_first_token_has_its_end_arm_below() -> None:
    sd, _ = _data(lambda m, lam: _falling)
    for cid, c in _rows(sd).items():
        if "[" in cid:
            assert c.verdict == "not reproduced" and "the end arm below the middle" in c.cause, cid


def test_too_few_networks_leave_the_u_open() -> None:
    sd, _ = _data(lambda m, lam: _u)
    data = sd.arms["alibi"]
    keep = set(data.index[data.index["seed"].isin([0, 1, 2])]["run_id"])
    table, index = data.table, data.index
    few = Data(data.exp, table[table["run_id"].isin(keep)], index[index["run_id"].isin(keep)])
    sd3 = StoryData(STORY, {"alibi": few}, sd.verdict, sd.ranges)
    for cid, c in _rows(sd3).items():
        if "[" in cid:
            assert c.as_plotted == INCONCLUSIVE.value and "3" in c.cause, cid


def test_the_ends_follow_the_yaml_share_and_stay_inside_the_profile() -> None:
    assert alibi_ends(32, 0.125) == 4 and alibi_ends(16, 0.125) == 2
    assert alibi_ends(8, 0.01) == 1 and alibi_ends(5, 0.5) == 2  # at least 1, and 2 k < n
    sd, n = _data(lambda m, lam: _u)
    assert n == 16
    # a U whose ends are one position wide each is no U at a share of 4 positions an end, once the
    # neighbours of the end positions sit below the middle
    def narrow(size: int, rng: np.random.Generator) -> np.ndarray:
        p = np.full(size, 1.0)
        p[1:4], p[-4:-1] = 0.01, 0.01
        p[0], p[-1] = 1.5, 1.5
        return p * np.exp(rng.normal(0, 0.01, size))

    sd, _ = _data(lambda m, lam: narrow)
    wide = StoryData(STORY, sd.arms, {**sd.verdict, "u_ends_share": 0.25}, {})
    thin = StoryData(STORY, sd.arms, {**sd.verdict, "u_ends_share": 0.0625}, {})
    assert all(c.verdict == "not reproduced" for cid, c in _rows(wide).items() if "[" in cid)
    assert all(c.verdict == "reproduced" for cid, c in _rows(thin).items() if "[" in cid)


def test_the_figure_and_headline_read_the_alibi_arm() -> None:
    sd, _ = _data(lambda m, lam: _hump)
    figs = {f.name: f for f in figures(sd)}
    assert set(figs) == {"residual_rollout_alibi_profile"}
    table = figs["residual_rollout_alibi_profile"].data
    assert {"alibi_slope", "lam", "start_over_middle_log", "end_over_middle_log"} <= set(table.columns)
    (line,) = headlines(sd)
    assert "is a U at none" in line and "m = 0.05 lam = 0.3" in line and "Why:" in line
