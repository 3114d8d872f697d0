"""Excerpts as a model reads them: a corpus tokenised once per tokenizer (cached), then seeded
excerpts of exactly N tokens with the model's start token first (:mod:`rankcollapse.models.corpora`
documents the rules)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankcollapse.edge.atomic import atomic_path
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import GiB, read_npy
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


#: What the first word of a token cache entry says (a file of another layout is a miss).
CACHE_TAG = 0x52434B31  # "RCK1"
#: Largest token cache entry read (bytes): a 256 MiB text is at most 256 Mi tokens of 8 bytes.
CACHE_LIMIT = 2 * GiB + 4096


def _cache_entry(key: str, stream: TokenStream) -> np.ndarray:
    """A token cache entry: int64 ``[8 + n_ids + n_starts]`` = ``[CACHE_TAG, n_ids, n_starts (-1: any
    start), 0, sha256(key | payload) as 4 words, ids..., starts...]``: the digest ties the entry to its
    key (a file copied under another key's name is a miss) and to every id (a flipped byte is a miss)."""
    ids = stream.ids.to(torch.int64).numpy()
    starts = None if stream.starts is None else stream.starts.to(torch.int64).numpy()
    payload = ids if starts is None else np.concatenate([ids, starts])
    digest = np.frombuffer(hashlib.sha256(key.encode() + payload.tobytes()).digest(), dtype=np.int64)
    head = np.array([CACHE_TAG, len(ids), -1 if starts is None else len(starts), 0], dtype=np.int64)
    return np.concatenate([head, digest, payload])


def _load_entry(path: Path, key: str, vocab: int | None) -> TokenStream | None:
    """The token stream a cache entry holds, or None (a miss) for anything but an intact entry of ``key``:
    a file that is not a regular one, too large, not a .npy of int64, another layout, a digest that
    does not match (corrupted, truncated, copied under another key), ids outside ``[0, vocab)``,
    starts not increasing inside the ids. Read through the one input opener (bounded, no pickle)."""
    def check(shape: tuple[int, ...], dtype: Any) -> None:
        if len(shape) != 1 or shape[0] < 8 or dtype != np.dtype("<i8"):
            raise RankCollapseError("not a token cache entry")

    try:
        data = read_npy(path, "token cache entry", check=check, max_bytes=CACHE_LIMIT)
    except RankCollapseError:
        return None
    tag, n_ids, n_starts = (int(v) for v in data[:3])
    if tag != CACHE_TAG or n_ids < 0 or n_starts < -1 or len(data) != 8 + n_ids + max(n_starts, 0):
        return None
    payload = data[8:]
    if hashlib.sha256(key.encode() + payload.tobytes()).digest() != data[4:8].tobytes():
        return None
    ids = torch.from_numpy(payload[:n_ids].copy())
    if n_ids and (int(ids.min()) < 0 or (vocab is not None and int(ids.max()) >= vocab)):
        return None
    starts = None if n_starts < 0 else torch.from_numpy(payload[n_ids:].copy())
    if starts is not None and starts.numel() and (
        int(starts[0]) < 0 or int(starts[-1]) >= max(n_ids, 1) or bool((starts[1:] <= starts[:-1]).any())
    ):
        return None
    return TokenStream(ids, starts)


def _vocab_size(tokenizer: Any) -> int | None:
    try:
        return len(tokenizer)
    except TypeError:
        return None


def _stream_cached(corpus: str | None, tokenizer: Any, text: str | None) -> TokenStream:
    """:func:`token_stream`, cached in memory and under ``cache_dir()/tokens`` (keyed by the corpus or
    text and the tokenizer's identity), so a corpus is tokenised once per tokenizer. A cache entry is
    trusted only when intact (:func:`_load_entry`); anything else is a miss, tokenised anew and
    written over (atomically); a cache that cannot be written only costs time."""
    if tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of text")
    what = f"corpus:{corpus}:v2" if text is None else "text:" + hashlib.sha1(text.encode()).hexdigest()
    key = hashlib.sha1(f"{what}|{tokenizer_identity(tokenizer)}".encode()).hexdigest()[:20]
    if key in _STREAMS:
        return _STREAMS[key]
    path = cache_dir() / "tokens" / f"{key}.npy"
    stream = _load_entry(path, key, _vocab_size(tokenizer)) if os.path.lexists(path) else None
    if stream is None:
        stream = token_stream(corpus, tokenizer, text)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            with atomic_path(path) as tmp, os.fdopen(os.open(tmp, flags), "wb") as fh:
                np.save(fh, _cache_entry(key, stream))
        except (OSError, RankCollapseError):
            pass  # a read-only or full cache, a link planted at the entry: only costs time
    _STREAMS.clear()
    _STREAMS[key] = stream
    return stream
