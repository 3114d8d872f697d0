"""Text as a model reads it, at the edge: the token cache trusts only intact entries of its own key, a
tokenizer that raises is one line naming it and the text, and a large text is encoded in pieces cut
between words (bounded memory) to the same ids as one call."""

from __future__ import annotations

import importlib
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.corpora import TokenStream, text_pieces, tokenize
from rankcollapse.models.loading import load_model

ex = importlib.import_module("rankcollapse.models.excerpts")  # the package exports a function so named
TEXT = "the cat sat on the mat of the house, and the dog ran off to the park. " * 12


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, object]:
    return {name: load_model(name).tokenizer for name in ("tiny:bert", "tiny:gpt2")}


def _ids(tokenizer: object, text: str) -> torch.Tensor:
    """The reference: one call of the tokenizer itself."""
    return torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)


def _entry(cache: Path) -> Path:
    (entry,) = list((cache / "tokens").iterdir())
    return entry


def _key(entry: Path) -> str:
    return entry.name.split(".")[0]


def _hostile(entry: Path, bert: object) -> dict[str, object]:
    """name -> a way to spoil the cache entry at ``entry`` (written in place)."""
    key = _key(entry)
    good = np.load(entry)
    vocab = len(bert)

    def consistent(ids: torch.Tensor, starts: torch.Tensor | None = None, under: str = key) -> bytes:
        path = entry.with_suffix(".tmp.npy")
        np.save(path, ex._cache_entry(under, TokenStream(ids, starts)))
        data = path.read_bytes()
        path.unlink()
        return data

    ids = torch.from_numpy(good[8:].copy())
    flipped = good.copy()
    flipped[9] ^= 1
    return {
        "binary junk": b"\x93NUMPY junk" + os.urandom(64),
        "empty": b"",
        "truncated": entry.read_bytes()[: entry.stat().st_size // 2],
        "an id flipped (digest no longer matches)": flipped,
        "float64 ids": np.arange(len(good), dtype=np.float64),
        "a pickled object array": np.array([{"ids": 1}], dtype=object),
        "another text's entry copied under this key": consistent(ids[:5], under="0" * 20),
        "ids beyond the vocabulary (digest recomputed)": consistent(ids + vocab),
        "negative ids (digest recomputed)": consistent(-ids - 1),
        "starts outside the ids (digest recomputed)": consistent(ids, torch.tensor([0, 10**9])),
        "a FIFO": "fifo",
        "a link to /dev/zero": "zero",
        "a directory": "dir",
    }


def _spoil(entry: Path, how: object) -> None:
    entry.unlink()
    if isinstance(how, np.ndarray):
        with entry.open("wb") as fh:
            np.save(fh, how, allow_pickle=how.dtype == object)
    elif how == "fifo":
        os.mkfifo(entry)
    elif how == "zero":
        entry.symlink_to("/dev/zero")
    elif how == "dir":
        entry.mkdir()
    else:
        entry.write_bytes(how)


def test_a_spoiled_token_cache_entry_is_a_miss_encoded_anew_and_rewritten(tmp_path, monkeypatch, tokenizers):
    """Every spoiled entry -- junk, truncated, a flipped id, float or pickled arrays, another key's entry,
    ids outside the vocabulary or negative, starts outside the ids, a FIFO, /dev/zero, a folder -- is
    read as a miss: the ids are the tokenizer's own, nothing blocks or crashes, and a regular-file entry
    is written again intact (the next process reads it as a hit)."""
    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path / "cache"))
    bert = tokenizers["tiny:bert"]
    want = _ids(bert, TEXT)
    ex._STREAMS.clear()
    assert torch.equal(ex._stream_cached(None, bert, TEXT).ids, want)
    entry = _entry(tmp_path / "cache")
    intact = entry.read_bytes()
    for name, how in _hostile(entry, bert).items():
        _spoil(entry, how)
        ex._STREAMS.clear()  # a new process: only the file cache is left
        got = ex._stream_cached(None, bert, TEXT)
        assert torch.equal(got.ids, want), name
        if not isinstance(how, str):
            assert entry.read_bytes() == intact, f"{name}: not rewritten"
        else:
            os.unlink(entry) if not entry.is_dir() else entry.rmdir()
            entry.write_bytes(intact)
    # and an intact entry is a hit: the tokenizer is not called again
    ex._STREAMS.clear()
    monkeypatch.setattr(ex, "token_stream", lambda *a: pytest.fail("an intact entry was not used"))
    assert torch.equal(ex._stream_cached(None, bert, TEXT).ids, want)


class Panic(BaseException):
    """Like pyo3's PanicException (a Rust panic inside ``tokenizers``): a BaseException."""


@pytest.mark.parametrize("error", [ValueError("internal"), Panic("called `Option::unwrap()` on a `None`")],
                         ids=["ValueError", "a Rust panic"])
def test_a_tokenizer_that_raises_is_one_line_naming_it_and_the_text(tmp_path, monkeypatch, capsys, error):
    text = tmp_path / "t.txt"
    text.write_text("Once upon a time there was a tokenizer. " * 30)
    bert = load_model("tiny:bert").tokenizer

    def raising(self, *args, **kwargs):
        raise error

    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(type(bert), "__call__", raising)
    ex._STREAMS.clear()
    code = main(["analyze", "--model", "tiny:bert", "--text-file", str(text), "--samples", "2",
                 "--tokens", "8",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error: tokenizer"), err
    assert type(bert).__name__ in lines[0] and "'Once upon a time" in lines[0]
    assert "internal" not in lines[0] and "unwrap" not in lines[0]  # its own words are not the reason
    assert not (tmp_path / "out" / "metrics.csv").exists()


def _words_text(rng: random.Random, lines: int) -> str:
    """Lines of 3-6 short words (one space between them) joined by whitespace runs of every kind."""
    words = ["the", "Cat", "sat", "on", "mat.", "don't", "1234", "x\u00e9", "\u4e2d\u6587", "--", "!!", "a",
             "l'\u00e9t\u00e9", "'s", "12", "Zz", "\U0001f600"]
    runs = ["\n", "\n\n", " \n ", "\t\n", "  \n\n\n", "\n  "]
    return "".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 6))) + rng.choice(runs)
                   for _ in range(lines))


@pytest.mark.parametrize("name", ["tiny:bert", "tiny:gpt2"])
def test_a_text_in_pieces_encodes_to_the_ids_of_one_call(tokenizers, name):
    """Pieces of 60-200 characters (many cuts on a small text): each cut is just before a space between
    two words, the pieces are the text, and the ids are exactly those of one tokenizer call (BERT's
    WordPiece and GPT-2's byte-level BPE, whose whitespace runs are their own tokens)."""
    tok, rng = tokenizers[name], random.Random(7)
    for trial in range(25):
        text = _words_text(rng, rng.randint(5, 40))
        size = rng.choice([60, 100, 200])
        pieces = text_pieces(text, size)
        assert "".join(p for _, p in pieces) == text and all(len(p) <= size for _, p in pieces)
        assert all(text[off] == " " and not text[off - 1].isspace() and not text[off + 1].isspace()
                   for off, _ in pieces[1:])
        assert torch.equal(tokenize(text, tok, piece_chars=size), _ids(tok, text)), (trial, text)


def test_a_multi_megabyte_text_encodes_in_bounded_pieces(tokenizers, monkeypatch):
    """A 3 MB text (and one with no space at all) goes through in pieces of at most TOKENIZE_CHARS
    characters: no call sees the whole text; the ids match one call piece by piece."""
    from rankcollapse.models import corpora

    bert = tokenizers["tiny:bert"]
    text = _words_text(random.Random(1), 170_000)
    assert len(text) > 3_000_000
    seen: list[int] = []
    encode = corpora.encode

    def spy(tokenizer, piece, offset=0):
        seen.append(len(piece))
        return encode(tokenizer, piece, offset)

    monkeypatch.setattr(corpora, "encode", spy)
    ids = tokenize(text, bert)
    assert len(seen) >= len(text) // corpora.TOKENIZE_CHARS and max(seen) <= corpora.TOKENIZE_CHARS
    head = text[: corpora.TOKENIZE_CHARS * 2]
    cut = text_pieces(head)[-1][0]
    assert torch.equal(ids[: len(_ids(bert, head[:cut]))], _ids(bert, head[:cut]))
    seen.clear()
    assert tokenize("a" * 600_000, bert).numel() > 0 and max(seen) <= corpora.TOKENIZE_CHARS
    with pytest.raises(RankCollapseError, match="piece size"):
        text_pieces("abc", 1)
