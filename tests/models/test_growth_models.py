"""models.growth: measure_growth reads a model's own hidden states (stream_var, layer_cos, massive_ratio per
excerpt and layer, equal to the metrics of the states themselves); with_lns scales layer l's pre-LN norms by
1/sqrt(l) on a copy and refuses a model that is not pre-LN."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.diagnostics import massive_ratio
from rankcollapse.metrics.growth import layer_cos, stream_var
from rankcollapse.models import excerpts, iter_hidden_states
from rankcollapse.models.growth import GrowthConfig, measure_growth, with_lns
from rankcollapse.models.run_model import load_model_cached


def test_measure_growth_is_the_metrics_of_the_models_own_hidden_states() -> None:
    cfg = GrowthConfig(model="tiny:gpt2", samples=3, tokens=10, dtype="float64")
    m = measure_growth(cfg, lambda *_: None)
    model = load_model_cached("tiny:gpt2", "float64", 0)
    states = [x.clone() for _, _, x in iter_hidden_states(model, excerpts(model, "wikipedia", 3, 10, 0))]
    depth = len(model.layers)
    assert {q: v.shape for q, v in m.values.items()} == {q: (3, depth + 1) for q in m.values}
    for t, x in enumerate(states):
        assert np.allclose(m.values["stream_var"][:, t], stream_var(x).numpy())
        assert np.allclose(m.values["massive_ratio"][:, t], massive_ratio(x).numpy())
        if t:
            assert np.allclose(m.values["layer_cos"][:, t], layer_cos(states[t - 1], x).numpy())
    assert np.isnan(m.values["layer_cos"][:, 0]).all()
    assert m.model["norm_placement"] == "pre"


def test_with_lns_scales_layer_ls_norms_by_one_over_sqrt_l_on_a_copy() -> None:
    base = load_model_cached("tiny:gpt2", "float64", 0)
    lns = with_lns(base)
    x = torch.randn(2, 5, base.layers[0].w_v.shape[0], dtype=torch.float64)
    for i, (p, q) in enumerate(zip(base.layers, lns.layers, strict=True)):
        for f in ("norm_attn", "norm_mlp"):
            assert torch.allclose(getattr(q, f)(x), getattr(p, f)(x) / math.sqrt(i + 1))
    assert base.layers[0].hf_forward is not None  # the cached model is untouched
    ids = excerpts(base, "wikipedia", 2, 8, 0)
    own = [x.clone() for _, _, x in iter_hidden_states(base, ids, backend="parts")]
    scaled = [x.clone() for _, _, x in iter_hidden_states(lns, ids)]
    assert torch.equal(own[0], scaled[0])
    # layer 1's factor is 1: its output is the model's own; deeper layers differ
    assert torch.allclose(own[1], scaled[1]) and not torch.allclose(own[-1], scaled[-1])


def test_measure_growth_with_lns_names_the_placement_and_grows_less() -> None:
    plain = measure_growth(GrowthConfig(model="random:gpt2,layers=12", samples=2, tokens=16), lambda *_: None)
    lns = measure_growth(GrowthConfig(model="random:gpt2,layers=12", samples=2, tokens=16, lns=True),
                         lambda *_: None)
    assert (plain.model["norm_placement"], lns.model["norm_placement"]) == ("pre", "pre+lns")
    assert lns.values["stream_var"][:, -1].mean() < plain.values["stream_var"][:, -1].mean()


def test_lns_is_refused_on_a_post_ln_model_and_a_bad_flag_in_one_line() -> None:
    with pytest.raises(RankCollapseError, match="'tiny:bert' has norm placement post"):
        with_lns(load_model_cached("tiny:bert", "float32", 0))
    with pytest.raises(RankCollapseError, match="lns must be true or false"):
        GrowthConfig(lns="yes")
