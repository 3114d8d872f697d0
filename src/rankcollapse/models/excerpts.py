"""Excerpts as a model reads them: a corpus tokenised once per tokenizer (cached), then seeded
excerpts of exactly N tokens with the model's start token first (:mod:`rankcollapse.models.corpora`
documents the rules)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch
from torch import Tensor

from rankcollapse.edge.atomic import atomic_path
from rankcollapse.edge.errors import RankCollapseError
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


def tokenizer_identity(tokenizer: Any) -> str:
    """What a tokenizer encodes with, hashed: its class and its content (a fast tokenizer's whole
    ``tokenizer.json`` as the backend serialises it: vocabulary, merges, normalizer, pre-tokenizer;
    otherwise its vocabulary), never its name or path, so an edited ``tokenizer.json`` in the same
    folder gets new ids instead of the cached ones."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        content = json.dumps(json.loads(backend.to_str()), sort_keys=True)  # its maps' order varies
    elif hasattr(tokenizer, "get_vocab"):
        content = repr(sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]))
    else:  # neither: nothing to hash but its name, so never shared between two tokenizers by accident
        content = f"{getattr(tokenizer, 'name_or_path', '')}|{id(tokenizer)}"
    specials = repr(sorted((str(k), str(v)) for k, v in getattr(tokenizer, "special_tokens_map", {}).items()))
    digest = hashlib.sha1(f"{content}|{specials}".encode()).hexdigest()
    return f"{type(tokenizer).__name__}|{digest}"


def _stream_cached(corpus: str | None, tokenizer: Any, text: str | None) -> TokenStream:
    """:func:`token_stream`, cached in memory and under ``cache_dir()/tokens`` (keyed by the corpus or
    text and the tokenizer's identity), so a corpus is tokenised once per tokenizer."""
    if tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of text")
    what = f"corpus:{corpus}:v2" if text is None else "text:" + hashlib.sha1(text.encode()).hexdigest()
    key = hashlib.sha1(f"{what}|{tokenizer_identity(tokenizer)}".encode()).hexdigest()[:20]
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
