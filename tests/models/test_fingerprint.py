"""The mask check reads the mask each layer's attention kernel really applies (``models.fingerprint``):
no false alarm on any tiny family under eager, SDPA (and FlexAttention, slow), and each planted bug, in
Hugging Face's own mask code, caught at the right layers with the right offset."""

from __future__ import annotations

from unittest import mock

import pytest
import transformers.masking_utils as hf_masks

from rankcollapse.models import load_model
from rankcollapse.models.diagnose import check_masks
from rankcollapse.models.inputs import text_batch

TEXT_FAMILIES = ["bert", "roberta", "distilbert", "albert", "mpnet", "t5", "gpt2", "gpt_neox", "llama",
                 "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text"]
TEXTS = ["the cat sat on the mat and looked at the dog for a while", "a short one", "it was the best"]
WIDER_WINDOW = hf_masks.sliding_window_overlay


def _wider(window: int):
    """A window one key too wide: the off-by-one the field has shipped in mask code."""
    return WIDER_WINDOW(window + 1)


def _bad(checks) -> list[tuple[int, tuple[int, int] | None, tuple[int, int] | None]]:
    return [(c.layer, c.first, c.offset) for c in checks if not c.matches]


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", TEXT_FAMILIES)
def test_no_false_alarm_on_any_tiny_family(tiny_models, ids, arch, impl):
    checks = check_masks(tiny_models(arch, "f32"), ids, implementation=impl)
    assert len(checks) == 4 and all(c.matches for c in checks), [c.describe() for c in checks]
    assert checks[0].rows == 3 * 12


@pytest.mark.parametrize("arch", ["bert", "gpt2", "mistral", "gemma3_text"])
def test_no_false_alarm_on_padded_texts(tiny_models, arch):
    model = tiny_models(arch, "f32")
    ids, mask = text_batch(model, TEXTS, 32)
    for impl in ("eager", "sdpa"):
        checks = check_masks(model, ids, attention_mask=mask, implementation=impl)
        assert all(c.matches for c in checks), [c.describe() for c in checks]
        assert checks[0].rows == int(mask.sum())  # the real queries only


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize(("arch", "layers"), [("mistral", [0, 1, 2, 3]), ("qwen2", [2, 3]),
                                              ("gemma3_text", [0, 2])])
def test_a_window_one_key_too_wide_is_caught_at_the_windowed_layers(tiny_models, ids, arch, layers, impl):
    """Windows of 4 keys: query 4 is the first row whose window starts after key 0; one key wider, it
    attends key 0 too (offset -1 on the first key)."""
    model = tiny_models(arch, "f32")
    with mock.patch.object(hf_masks, "sliding_window_overlay", _wider):
        checks = check_masks(model, ids, implementation=impl)
    assert _bad(checks) == [(t, (0, 4), (-1, 0)) for t in layers]
    bad = checks[layers[0]]
    assert bad.expected == (1, 4) and bad.got == (0, 4) and bad.zero_inside == 0
    assert bad.outside == 3 * 8  # rows 4..11 of each of the 3 samples: one key each
    assert "offset -1, +0" in bad.describe()


def test_local_and_global_layers_swapped_are_caught_at_those_layers(ids):
    model = load_model("tiny:gemma3_text", "float32")
    types = list(model.hf_model.config.layer_types)
    assert types[:2] == ["sliding_attention", "full_attention"]
    model.hf_model.config.layer_types = [types[1], types[0], *types[2:]]  # what the forward reads per layer
    for impl in ("eager", "sdpa"):
        checks = check_masks(model, ids, implementation=impl)
        assert _bad(checks) == [(0, (0, 4), (-1, 0)), (1, (0, 4), (1, 0))]
        # a window where causal is due: row i (4..11) misses its first i - 3 keys, in each of 3 samples
        assert checks[1].zero_inside == 3 * sum(range(1, 9)) and checks[1].outside == 0


def test_a_padding_leak_is_caught_with_the_keys_it_leaks(tiny_models):
    """An encoder whose padding mask lets real queries see padding: sample 1 (4 real tokens of 15)."""
    model = tiny_models("bert", "f32")
    ids, mask = text_batch(model, TEXTS, 32)
    length = int(mask[1].sum())
    leak = mock.patch.object(hf_masks, "padding_mask_function",
                             lambda padding: (lambda b, h, q, kv: kv >= 0))
    for impl in ("eager", "sdpa"):
        with leak:
            checks = check_masks(model, ids, attention_mask=mask, implementation=impl)
        n = ids.shape[1]
        assert _bad(checks) == [(t, (1, 0), (0, n - length)) for t in range(4)]
        assert checks[0].expected == (0, length - 1) and checks[0].got == (0, n - 1)


def test_rows_that_are_not_one_interval_are_read_by_one_hot_blocks(tiny_models, ids):
    """A window that also keeps key 0 (an attention-sink window): rows 4.. are not one interval; their
    support comes from one-hot value blocks, and key 0 is named as attended outside the mask."""
    model = tiny_models("mistral", "f32")

    def sink_window(window: int):
        inner = WIDER_WINDOW(window)
        return lambda b, h, q, kv: inner(b, h, q, kv) | (kv == 0)

    with mock.patch.object(hf_masks, "sliding_window_overlay", sink_window):
        checks = check_masks(model, ids, implementation="sdpa")
    assert all(c.method == "one-hot blocks" and not c.matches for c in checks)
    assert checks[0].outside == 3 * 8 and checks[0].zero_inside == 0
    assert checks[0].outside_examples[:3] == [(4, 0), (5, 0), (6, 0)]
    clean = check_masks(model, ids, implementation="sdpa", support=True)
    assert all(c.matches and c.method == "one-hot blocks" for c in clean)


def test_the_probe_leaves_the_model_as_it_came(tiny_models, ids):
    model = tiny_models("llama", "f32")
    hf = model.hf_model
    hooks = [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in hf.modules()]
    check_masks(model, ids, implementation="sdpa")
    assert hf.config._attn_implementation == "eager"
    assert [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in hf.modules()] == hooks


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["mistral", "gemma3_text"])
def test_flex_attention_no_false_alarm_and_the_window_bug_caught(tiny_models, ids, arch):
    """FlexAttention compiles on this CPU build (about 30 s a shape the first time): its BlockMask is the
    mask probed. Every tiny family under flex: ``benchmarks/bench_diagnostics.py --part masks``."""
    model = tiny_models(arch, "f32")
    checks = check_masks(model, ids, implementation="flex_attention")
    assert all(c.matches for c in checks) and checks[0].implementation == "flex_attention"
    if arch == "mistral":
        with mock.patch.object(hf_masks, "sliding_window_overlay", _wider):
            bad = check_masks(model, ids, implementation="flex_attention")
        assert _bad(bad) == [(t, (0, 4), (-1, 0)) for t in range(4)]
