"""Bundled corpora load offline and token windows are reproducible and exactly `tokens` long."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.errors import RankCollapseError
from rankcollapse.models import CORPORA, load_corpus, sample_token_batches


@pytest.mark.parametrize("name", CORPORA)
def test_each_corpus_loads_nonempty_text(name):
    text = load_corpus(name)
    assert len(text) > 100_000
    if name == "shakespeare":
        assert "**" not in text[:5000] and "HAMLET" in text.upper()


def test_unknown_corpus_names_the_allowed_ones():
    with pytest.raises(RankCollapseError, match="allowed: shakespeare, kjv, pydocs"):
        load_corpus("lorem")


def test_windows_are_seeded_consecutive_and_exactly_tokens_long():
    ids = torch.arange(1000)
    a, b = sample_token_batches(ids, 8, 32, seed=5), sample_token_batches(ids, 8, 32, seed=5)
    assert a.shape == (8, 32) and torch.equal(a, b)
    assert torch.equal(a[:, 1:] - a[:, :-1], torch.ones(8, 31, dtype=torch.long))
    assert not torch.equal(a, sample_token_batches(ids, 8, 32, seed=6))


def test_text_shorter_than_tokens_is_a_user_error():
    with pytest.raises(RankCollapseError, match="fewer than --tokens 64"):
        sample_token_batches(torch.arange(10), 2, 64)
