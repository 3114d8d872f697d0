"""Our ``hook`` column against TransformerLens itself: ``run_with_cache`` of a ``TransformerBridge`` on
the same tiny random model (same weights) holds, under each row's name, exactly that row's tensor.

Needs the test-only extra ``transformer-lens`` (pins: ``requirements-tl.lock``, installed by
``make test``); skipped when it is absent. Checked with TransformerLens 4.3.0.
"""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

from rankcollapse.models import AnalyzeConfig, analyze, iter_hidden_states
from rankcollapse.models.families import FAMILIES
from rankcollapse.models.inputs import borrowed, from_memory
from rankcollapse.models.loading import _hf_config, bert_tokenizer
from rankcollapse.models.registry import resolve_model

bridge_module = pytest.importorskip("transformer_lens.model_bridge", reason="transformer-lens not installed")

#: The Hugging Face class with a head that TransformerLens's adapter of each family expects.
HEAD_CLASSES: dict[str, str] = {
    "bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM", "distilbert": "DistilBertForMaskedLM",
    "albert": "AlbertForMaskedLM", "mpnet": "MPNetForMaskedLM", "gpt2": "GPT2LMHeadModel",
    "gpt_neox": "GPTNeoXForCausalLM", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM",
    "gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
    "t5": "T5ForConditionalGeneration", "vit": "ViTForImageClassification",
}


def test_every_family_has_a_head_class_here():
    assert set(HEAD_CLASSES) == set(FAMILIES)


def _tiny_with_head(family: str) -> torch.nn.Module:
    import transformers

    config = _hf_config(resolve_model(f"tiny:{family}"))
    config.architectures = [HEAD_CLASSES[family]]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = getattr(transformers, HEAD_CLASSES[family])._from_config(config, attn_implementation="eager")
    return model.eval()


def _bridge(family: str, hf: torch.nn.Module):
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bridge_module.TransformerBridge.boot_transformers(
                f"tiny/{family}", hf_model=hf, tokenizer=bert_tokenizer(), device="cpu")
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("family", [f for f, spec in FAMILIES.items() if spec.tl_blocks])
def test_each_row_is_the_tensor_transformerlens_caches_under_its_hook(family):
    hf = _tiny_with_head(family)
    ids = torch.randint(1, 1000, (2, 10), generator=torch.Generator().manual_seed(1))
    ids[:, 0] = 101
    if family == "vit":  # a vision encoder: the bridge and analyze read its images
        ids = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    given = {"pixel_values" if family == "vit" else "ids": ids}
    result = analyze(AnalyzeConfig(model=f"tiny:{family}", metrics=("mu",)), model=hf, **given)
    hooks = [r["hook"] for r in result.rows]
    assert all(hooks), hooks
    with borrowed(hf):
        ours = [x.clone() for _, _, x in iter_hidden_states(from_memory(hf), ids)]
    bridge = _bridge(family, hf)
    extra = {"decoder_input_ids": ids[:, :1]} if family == "t5" else {}
    with torch.inference_mode():
        _, cache = bridge.run_with_cache(ids, **extra)
    for t, (hook, x) in enumerate(zip(hooks, ours, strict=True)):
        assert hook in cache, (family, t, hook)
        got = cache[hook]
        assert got.shape == x.shape
        err = float((got - x).abs().max() / x.abs().max())
        assert err <= 1e-6, (family, t, hook, err)


@pytest.mark.parametrize("family", [f for f, spec in FAMILIES.items() if not spec.tl_blocks])
def test_families_without_a_name_are_the_ones_transformerlens_refuses(family):
    hf = _tiny_with_head(family)
    with pytest.raises(ValueError, match="architecture"):
        _bridge(family, hf)
    ids = torch.randint(1, 1000, (2, 8), generator=torch.Generator().manual_seed(1))
    result = analyze(AnalyzeConfig(model=f"tiny:{family}", metrics=("mu",)), model=hf, ids=ids)
    assert {r["hook"] for r in result.rows} == {""}
