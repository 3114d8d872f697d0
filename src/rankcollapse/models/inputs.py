"""What ``analyze`` reads besides a corpus: a list of texts (padded) and an in-memory Hugging Face model."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from rankcollapse.errors import RankCollapseError
from rankcollapse.models.loading import LoadedModel, dissect


def text_batch(model: LoadedModel, texts: list[str], tokens: int) -> tuple[Tensor, Tensor]:
    """``(ids [b, n], attention_mask [b, n])`` of a list of texts: each tokenised (start token first,
    cut to ``tokens``), right-padded with 0 to the longest; the mask is 1 on real tokens."""
    from rankcollapse.models.corpora import tokenize

    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise RankCollapseError("texts must be a non-empty list of non-empty strings")
    if model.tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of texts")
    seqs = []
    for text in texts:
        ids = tokenize(text, model.tokenizer).tolist()
        seqs.append(([model.start_token] if model.start_token is not None else []) + ids)
    seqs = [s[:tokens] for s in seqs]
    n = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), n, dtype=torch.long)
    mask = torch.zeros(len(seqs), n, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def from_memory(hf_model: Any) -> LoadedModel:
    """An in-memory Hugging Face model as a :class:`LoadedModel` (eval mode, no gradients)."""
    from torch import nn

    from rankcollapse.models.loading import bert_tokenizer

    if not isinstance(hf_model, nn.Module) or not hasattr(hf_model, "config"):
        raise RankCollapseError(
            f"model must be a LoadedModel or a Hugging Face model, got {type(hf_model).__name__}")
    hf_model.eval()
    hf_model.requires_grad_(False)
    casts = next(hf_model.parameters()).dtype == torch.float32  # as load_model: exact float64 parts
    loaded = dissect(hf_model, name=type(hf_model).__name__, tokenizer=bert_tokenizer(), hf_casts=casts)
    loaded.info["loaded_from"] = "in-memory Hugging Face model"
    loaded.info["tokenizer"] = "bundled BERT uncased WordPiece"
    return loaded
