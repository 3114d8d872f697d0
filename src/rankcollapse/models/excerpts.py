"""Excerpts as a model reads them: a corpus tokenised once per tokenizer (cached), then seeded
excerpts of exactly N tokens with the model's start token first (:mod:`rankcollapse.models.corpora`
documents the rules)."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch import Tensor

from rankcollapse.errors import RankCollapseError
from rankcollapse.io import atomic_path
from rankcollapse.models.corpora import (
    DEFAULT_CORPUS,
    TokenStream,
    read_text_file,
    sample_token_batches,
    token_stream,
)
from rankcollapse.models.loading import LoadedModel, cache_dir


def excerpts(model: LoadedModel, corpus: str | None = DEFAULT_CORPUS, samples: int = 16, tokens: int = 128,
             seed: int = 0, text_file: str | None = None) -> Tensor:
    """``samples`` excerpts of exactly ``tokens`` ids as the model reads text -> int64 [samples, tokens].

    The model's start token first, then ``tokens - 1`` text tokens (see
    :mod:`rankcollapse.models.corpora`); seeded by ``seed``.
    """
    check_excerpts(model, tokens)
    stream = _stream_cached(corpus if text_file is None else None, model.tokenizer,
                            read_text_file(text_file) if text_file else None)
    return sample_token_batches(stream, samples, tokens, seed, start_token=model.start_token)


def check_excerpts(model: LoadedModel, tokens: int) -> None:
    """What text excerpts need of a model, checked before any memory estimate or allocation: ``tokens``
    within its context (its position embeddings), and a tokenizer (a folder without tokenizer
    files says so). RankCollapseError (one line) else."""
    if tokens > model.max_tokens:
        raise RankCollapseError(
            f"--tokens {tokens} exceeds the context of {model.name!r} ({model.max_tokens} tokens); "
            f"allowed: --tokens <= {model.max_tokens}"
        )
    if model.tokenizer is None:
        raise RankCollapseError(model.info.get("no_tokenizer") or "this model has no tokenizer; pass token "
                                "ids instead of text")


_STREAMS: dict[str, TokenStream] = {}


def _stream_cached(corpus: str | None, tokenizer: Any, text: str | None) -> TokenStream:
    """:func:`token_stream`, cached in memory and under ``cache_dir()/tokens`` (keyed by the corpus or
    text and the tokenizer's identity), so a corpus is tokenised once per tokenizer."""
    if tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of text")
    what = f"corpus:{corpus}:v2" if text is None else "text:" + hashlib.sha1(text.encode()).hexdigest()
    ident = f"{type(tokenizer).__name__}|{getattr(tokenizer, 'name_or_path', '')}|{len(tokenizer)}"
    if not getattr(tokenizer, "name_or_path", "") and hasattr(tokenizer, "get_vocab"):
        # a tokenizer built in memory has no name: key it by its vocabulary
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        ident += "|" + hashlib.sha1(repr(vocab).encode()).hexdigest()
    key = hashlib.sha1(f"{what}|{ident}".encode()).hexdigest()[:20]
    if key in _STREAMS:
        return _STREAMS[key]
    path = cache_dir() / "tokens" / f"{key}.pt"
    stream = None
    if path.is_file():
        try:
            saved = torch.load(path, weights_only=True)
            stream = TokenStream(saved["ids"], saved.get("starts"))
        except (OSError, RuntimeError, KeyError, TypeError):
            stream = None
    if stream is None:
        stream = token_stream(corpus, tokenizer, text)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                torch.save({"ids": stream.ids, "starts": stream.starts}, tmp)
        except OSError:
            pass  # a read-only cache only costs time
    _STREAMS.clear()
    _STREAMS[key] = stream
    return stream
