"""simulate with a mask given in Python (a predicate f(i, j) or a bool tensor): the same run, to the
bit, as the spec it spells, and the mask's label (with a note) in the config's record."""

from __future__ import annotations

import json

import pytest
import torch

from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.edge.errors import RankCollapseError


def run(mask, **kw):  # type: ignore[no-untyped-def]
    return simulate(
        SimulationConfig(mask=mask, **{"tokens": 16, "d": 8, "layers": 5, "samples": 2, "seed": 3, **kw})
    )


@pytest.mark.parametrize(
    ("mask", "spec"),
    [
        (lambda i, j: (j <= i) & (i - j <= 3), "causal-window:w=3"),
        (lambda i, j: (i - j).abs() <= 2, "window:w=2"),
        (torch.ones(16, 16, dtype=torch.bool).tril(), "causal"),
        (torch.ones(40, 40).tril(), "causal"),  # larger than n, 0/1 floats: its top-left block
    ],
)
@pytest.mark.parametrize("preset", ["attn", "attn+skip+sphere"])
def test_a_python_mask_gives_the_run_of_the_spec_it_spells(mask, spec, preset):
    mine, ref = run(mask, mode=preset), run(spec, mode=preset)
    assert mine.kernel == ref.kernel
    assert torch.equal(mine.mu_rel, ref.mu_rel) and torch.equal(mine.final, ref.final)
    assert mine.radius == ref.radius


def test_the_record_names_the_mask_and_says_it_cannot_re_run_it():
    def causal_window_3(i, j):
        return (j <= i) & (i - j <= 3)

    record = json.loads(json.dumps(run(causal_window_3).config.to_dict()))
    assert record["mask"] == "<predicate causal_window_3>"
    assert "recorded by its name" in record["mask_note"]
    tensor = run(torch.ones(16, 16, dtype=torch.bool).tril()).config.to_dict()
    assert tensor["mask"].startswith("<tensor 16x16 sha1:") and "mask_note" in tensor
    assert "mask_note" not in run("causal").config.to_dict()


def test_a_tensor_smaller_than_n_or_a_failing_predicate_is_refused_at_construction():
    with pytest.raises(RankCollapseError, match=r"is 8 x 8 but n=16; allowed: n <= 8"):
        SimulationConfig(mask=torch.ones(8, 8, dtype=torch.bool), tokens=16)
    with pytest.raises(RankCollapseError, match=r"returned shape \(16,\) at n=16"):
        SimulationConfig(mask=lambda i, j: i[:, 0] >= 0, tokens=16)
