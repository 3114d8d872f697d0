"""models.dyt: with_dyt replaces every norm inside the layers by DyT with the norm's own affine and leaves the
rest (embeddings, final norm, the cached model) untouched; measure_norm_fits fits every norm of a tiny
model in call order; a planted tanh map through a norm's recorded inputs gives back its alpha; the
curves of the model's own norm and of DyT on the same excerpts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rankcollapse.core.norms import dyt, layer_norm, rms_norm
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.dyt_fit import FIT_NAMES, fit_dyt
from rankcollapse.models import excerpts, iter_hidden_states
from rankcollapse.models.dyt import (
    NORM_FIELDS,
    DytCurvesConfig,
    NormFitConfig,
    measure_dyt_curves,
    measure_norm_fits,
    norm_spec,
    with_dyt,
    with_norms,
)
from rankcollapse.models.run_model import load_model_cached


def _states(model, ids) -> list[torch.Tensor]:
    return [x.clone() for _, _, x in iter_hidden_states(model, ids, mode="full", backend="parts")]


@pytest.mark.parametrize(("name", "base_norm"), [("tiny:bert", layer_norm), ("tiny:llama", rms_norm)])
def test_with_dyt_replaces_every_layer_norm_with_its_own_affine_and_nothing_else(name, base_norm) -> None:
    base = load_model_cached(name, "float64", 0)
    before = [{f: getattr(p, f) for f in NORM_FIELDS} for p in base.layers]
    info = dict(base.info)
    ids = excerpts(base, "wikipedia", 2, 12, 0)
    own = _states(base, ids)
    swapped = with_dyt(base, 0.7)
    assert len(swapped.layers) == len(base.layers)
    for p, q in zip(base.layers, swapped.layers, strict=True):
        fields = [f for f in NORM_FIELDS if getattr(p, f) is not None]
        assert fields and all(getattr(q, f).func is dyt for f in fields)  # every norm of the layer
        for f in fields:
            kw, mine = getattr(p, f).keywords, getattr(q, f).keywords
            assert getattr(p, f).func is base_norm and mine["alpha"] == 0.7
            assert mine["weight"] is kw.get("weight") and mine["bias"] is kw.get("bias")  # its own affine
        assert q.w_v is p.w_v and q.mlp is p.mlp and q.q_norm is p.q_norm  # the rest is shared, not copied
        assert q.hf_forward is None and p.hf_forward is not None  # HF's module holds the old norm
    assert swapped.embed is base.embed and swapped.final_norm is base.final_norm
    assert swapped.info["hf_casts"] is False and base.info == info
    after = [{f: getattr(p, f) for f in NORM_FIELDS} for p in base.layers]
    assert after == before  # the cached model is untouched
    mine = _states(swapped, ids)
    assert torch.equal(mine[0], own[0]) and not torch.allclose(mine[-1], own[-1])
    auto = [x.clone() for _, _, x in iter_hidden_states(swapped, ids, mode="full")]  # never HF's modules
    assert all(torch.equal(a, b) for a, b in zip(auto, mine, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(_states(base, ids), own, strict=True))


def test_with_dyt_at_a_tiny_alpha_is_alpha_times_the_pre_norm_input() -> None:
    """DyT(x) = w tanh(alpha x) + b -> w alpha x + b as alpha -> 0: the norm becomes a per-feature line."""
    base = load_model_cached("tiny:bert", "float64", 0)
    norm = with_dyt(base, 1e-6).layers[0].norm_attn
    x = torch.randn(1, 3, base.layers[0].norm_attn.keywords["weight"].numel(), dtype=torch.float64)
    kw = base.layers[0].norm_attn.keywords
    assert torch.allclose(norm(x), kw["weight"] * 1e-6 * x + kw["bias"], atol=1e-15)


def test_a_non_positive_alpha_and_an_unreadable_norm_are_refused_in_one_line() -> None:
    base = load_model_cached("tiny:bert", "float64", 0)
    for bad in (0.0, -1.0, math.inf, "x"):
        with pytest.raises(RankCollapseError, match="dyt_alpha must be a positive finite number"):
            with_dyt(base, bad)
    with pytest.raises(RankCollapseError, match="DyT reads a LayerNorm or RMSNorm"):
        norm_spec(lambda x: x)
    with pytest.raises(RankCollapseError, match="dyt_alpha"):
        DytCurvesConfig(dyt_alpha=0.0)
    with pytest.raises(RankCollapseError, match="unknown variant or norm"):
        DytCurvesConfig(norms=("batchnorm",))


def test_measure_norm_fits_fits_every_norm_of_a_tiny_model_in_call_order() -> None:
    cfg = NormFitConfig(model="tiny:bert", samples=3, tokens=12, scatter_points=40)
    m = measure_norm_fits(cfg, lambda *_: None)
    depth = len(load_model_cached("tiny:bert", "float32", 0).layers)
    assert sorted(m.fits) == list(range(1, 2 * depth + 1)) and m.kind == "layer"
    assert [m.block[k] for k in sorted(m.block)] == [t for t in range(1, depth + 1) for _ in (0, 1)]
    assert [m.which[k] for k in (1, 2)] == ["attention", "mlp"]
    for cols in m.fits.values():
        assert set(cols) == set(FIT_NAMES) and all(v.shape == (3,) for v in cols.values())
        # a random init's LayerNorm: every token's spread alike, so the pooled map is a straight line
        assert (cols["linear_r2"] > 0.99).all() and (cols["dyt_r2"] >= cols["linear_r2"]).all()
    assert sorted(m.scatter) == [1, depth, 2 * depth]  # the first, middle and last norm's points
    assert all(p.shape == (40, 4) for p in m.scatter.values())


def test_a_planted_tanh_map_on_a_norms_recorded_inputs_gives_back_its_alpha() -> None:
    """The inputs a tiny model's first norm records, mapped through a planted DyT (per-feature gamma and
    beta), are fitted back to the planted alpha; the model's own LayerNorm map of the same inputs is not
    that tanh."""
    base = load_model_cached("tiny:bert", "float64", 0)
    seen: list[torch.Tensor] = []

    def record(fn, i, which):
        def recorded(x):
            if i == 0 and which == "attention":
                seen.append(x.clone())
            return fn(x)
        return recorded

    model = with_norms(base, record)
    ids = excerpts(base, "wikipedia", 1, 16, 0)
    for _ in iter_hidden_states(model, ids, mode="full", backend="parts"):
        pass
    x = seen[0][0]  # [n, d]
    g = torch.Generator().manual_seed(0)
    alpha = 3.0 / float(x.std())  # the bend inside the data
    gamma = 1.0 + 0.5 * torch.rand(x.shape[1], generator=g, dtype=torch.float64)
    beta = 0.1 * torch.randn(x.shape[1], generator=g, dtype=torch.float64)
    got = fit_dyt(x, gamma * torch.tanh(alpha * x) + beta)
    assert got.dyt_alpha == pytest.approx(alpha, rel=2e-3) and got.dyt_r2 > 1 - 1e-9
    assert got.s_shape > 0.9 and torch.allclose(got.gamma, gamma, rtol=1e-3)
    own = fit_dyt(x, norm_spec(base.layers[0].norm_attn).pre_affine(x))
    assert own.dyt_r2 < got.dyt_r2


def test_measure_dyt_curves_runs_both_norms_on_the_same_excerpts() -> None:
    cfg = DytCurvesConfig(model="tiny:bert", variants=("attn", "attn+ln", "full"), masks=("causal",),
                          samples=2, tokens=10, dtype="float64")
    m = measure_dyt_curves(cfg, lambda *_: None)
    assert [c[0] for c in m.conditions] == ["attn", "attn+ln", "attn+dyt", "full", "full+dyt"]
    depth = len(load_model_cached("tiny:bert", "float64", 0).layers)
    for c in m.conditions:
        assert m.values[c]["mu_rel"].shape == (2, depth + 1)
    # layer 0 is the embeddings' output, the same for every condition; DyT changes what follows
    first = {c: m.values[c]["mu"][:, 0] for c in m.conditions}
    assert all(np.allclose(v, first[m.conditions[0]]) for v in first.values())
    assert not np.allclose(m.values[("attn+ln", "causal")]["mu"], m.values[("attn+dyt", "causal")]["mu"])
    dyt_only = DytCurvesConfig(norms=("dyt",), variants=("attn+ln",))
    assert [c[0] for c in dyt_only.conditions()] == ["attn+dyt"]
