"""Shared fixtures: tiny random-init models (cached per session) and a short text file."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.models import iter_hidden_states, load_model


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Tiny models are dominated by per-op overhead: on the shared, loaded machine every
    two-thread op waits for a scheduler slice (0.2 s vs 0.0004 s per tiny Llama layer)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_models() -> dict[tuple[str, str], object]:
    """``tiny:<family>`` in float32 and float64, loaded once."""
    cache: dict[tuple[str, str], object] = {}

    def get(arch: str, dtype: str = "f32", **kw: object) -> object:
        key = (arch, dtype, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = load_model(f"tiny:{arch}", dtype, seed=0, **kw)
        return cache[key]

    return get  # type: ignore[return-value]


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(0, 30000, (3, 12), generator=torch.Generator().manual_seed(1))


def hf_errors(model: object, ids: torch.Tensor, backend: str) -> list[float]:
    """Per hidden state, ``max |ours - HF| / max |HF|`` against Hugging Face's own
    ``output_hidden_states`` (our last row passed through the model's final norm, as HF's is)."""
    with torch.inference_mode():
        ref = model.hf_model(input_ids=ids, output_hidden_states=True).hidden_states  # type: ignore[attr-defined]
    errs = []
    for t, _, x in iter_hidden_states(model, ids, backend=backend):
        if t == len(ref) - 1 and model.final_norm is not None:  # type: ignore[attr-defined]
            x = model.final_norm(x)  # type: ignore[attr-defined]
        errs.append(float((x - ref[t]).abs().max() / ref[t].abs().max()))
    assert len(errs) == len(ref)
    return errs


@pytest.fixture(scope="session")
def hf_error():
    """:func:`hf_errors` as a fixture (the hidden-state oracle of the real-weight tests)."""
    return hf_errors


@pytest.fixture(scope="session")
def word_tokenizer():
    """A factory of a word-level tokenizer of 14 words (``<s>`` = 0, its start token): ids nobody else
    gives, so a test can tell which tokenizer read a text."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = "<s> </s> <unk> the cat sat on mat a dog ran after and fell".split()

    def make():
        inner = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
        inner.pre_tokenizer = pre_tokenizers.Whitespace()
        return PreTrainedTokenizerFast(tokenizer_object=inner, bos_token="<s>", eos_token="</s>",
                                       unk_token="<unk>")

    return make
