"""The support of the attention a model computes, per layer, against the schedule its config defines."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.attention import masked_softmax
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import parse_mask
from rankcollapse.masks.consistency import check_schedule_support, check_support
from rankcollapse.masks.hf_schedule import schedule_from_hf_config


def _attention(spec: str, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 3, n, n, generator=g, dtype=torch.float64)
    return masked_softmax(logits, parse_mask(spec).dense(n))


def test_attention_from_the_mask_matches_and_an_off_by_one_window_is_caught() -> None:
    attn = _attention("causal-window:w=3", 10, 0)
    assert check_support(attn, "causal-window:w=3").matches
    wide = check_support(attn, "causal-window:w=2")  # the mask the layer should have is narrower
    assert wide.outside == 7 and wide.zero_inside == 0 and wide.outside_examples[0] == (3, 0)
    narrow = check_support(attn, "causal-window:w=4")
    assert narrow.outside == 0 and narrow.zero_inside == 6 and not narrow.matches
    assert "allowed pairs never attended" in narrow.describe()


def test_schedule_check_is_per_layer_and_depth_must_match() -> None:
    specs = ["causal-window:w=2", "causal-window:w=2", "causal"]
    attentions = [_attention(s, 8, t) for t, s in enumerate(specs)]
    checks = check_schedule_support(attentions, "causal-window:w=2*2;causal")
    assert [c.matches for c in checks] == [True, True, True]
    checks = check_schedule_support(attentions, "causal-window:w=2")  # repeated to 3 layers
    assert [c.matches for c in checks] == [True, True, False] and checks[2].outside == 15
    with pytest.raises(RankCollapseError, match="3 attention tensors but the schedule has 2 layers"):
        from rankcollapse.masks.schedule import parse_schedule

        check_schedule_support(attentions, parse_schedule("causal*2"))


def test_hugging_face_eager_attention_follows_the_schedule_of_its_config() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.Gemma3TextConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=6, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, sliding_window=4, max_position_embeddings=64,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = transformers.Gemma3TextModel(config).eval()
    ids = torch.randint(0, 64, (1, 12))
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    schedule = schedule_from_hf_config(config.to_dict())
    checks = check_schedule_support(list(out.attentions), schedule)
    assert [c.spec for c in checks] == ["causal-window:w=3"] * 5 + ["causal"]
    assert all(c.matches for c in checks), [c.describe() for c in checks if not c.matches]
