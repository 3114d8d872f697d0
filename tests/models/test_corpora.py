"""Bundled corpora load offline; excerpts are seeded, exactly N tokens, and start as the model reads text."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import CORPORA, load_corpus, sample_token_batches
from rankcollapse.models.corpora import TokenStream, token_stream, wikipedia_articles


@pytest.mark.parametrize("name", CORPORA)
def test_each_corpus_loads_nonempty_text(name):
    text = load_corpus(name)
    assert len(text) > 100_000
    if name == "shakespeare":
        assert "**" not in text[:5000] and "HAMLET" in text.upper()


def test_wikipedia_is_the_lead_sections_in_sorted_title_order():
    articles = wikipedia_articles()
    assert len(articles) == 10_033
    assert 700_000 < sum(len(a.split()) for a in articles) < 850_000
    assert articles[0].startswith("0 is a number")  # the first title in sorted order is "0"


def test_unknown_corpus_names_the_allowed_ones():
    with pytest.raises(RankCollapseError, match="allowed: wikipedia, shakespeare, kjv, pydocs"):
        load_corpus("lorem")


def test_windows_are_seeded_consecutive_and_exactly_tokens_long():
    ids = torch.arange(1000)
    a, b = sample_token_batches(ids, 8, 32, seed=5), sample_token_batches(ids, 8, 32, seed=5)
    assert a.shape == (8, 32) and torch.equal(a, b)
    assert torch.equal(a[:, 1:] - a[:, :-1], torch.ones(8, 31, dtype=torch.long))
    assert not torch.equal(a, sample_token_batches(ids, 8, 32, seed=6))


def test_start_token_comes_first_and_the_excerpt_keeps_n_tokens():
    ids = torch.arange(100, 1100)
    rows = sample_token_batches(ids, 5, 16, seed=1, start_token=101)
    assert rows.shape == (5, 16) and bool((rows[:, 0] == 101).all())
    assert torch.equal(rows[:, 2:] - rows[:, 1:-1], torch.ones(5, 14, dtype=torch.long))


def test_without_a_start_token_no_excerpt_begins_with_a_repeated_token():
    ids = torch.tensor([7, 7, 7, 1, 2, 3, 4, 4, 5, 6, 8, 9] * 20)
    rows = sample_token_batches(ids, 40, 4, seed=0)
    assert bool((rows[:, 0] != rows[:, 1]).all())


def test_article_starts_restrict_where_excerpts_begin():
    stream = TokenStream(torch.arange(200), starts=torch.tensor([0, 50, 120]))
    rows = sample_token_batches(stream, 3, 10, seed=0, start_token=-1)
    assert sorted(rows[:, 1].tolist()) == [0, 50, 120]


def test_wikipedia_excerpts_start_at_article_starts_with_the_bert_tokenizer():
    from rankcollapse.models.loading import bert_tokenizer

    tok = bert_tokenizer()
    stream = token_stream("wikipedia", tok)
    assert stream.starts is not None and len(stream.starts) == 10_033
    rows = sample_token_batches(stream, 4, 128, seed=0, start_token=tok.cls_token_id)
    assert rows.shape == (4, 128) and bool((rows[:, 0] == tok.cls_token_id).all())
    for row in rows:  # each excerpt is the token stream from some article's first token on
        hits = [int(s) for s in stream.starts if torch.equal(stream.ids[int(s):int(s) + 127], row[1:])]
        assert len(hits) >= 1


def test_text_shorter_than_tokens_is_a_user_error():
    with pytest.raises(RankCollapseError, match="fewer than --tokens 64"):
        sample_token_batches(torch.arange(10), 2, 64)


def test_an_edited_tokenizer_json_gets_new_ids_not_the_cached_ones(tmp_path, monkeypatch):
    """The token cache is keyed by what a tokenizer encodes with, not by its folder: the same folder
    read twice shares the cache; the same folder with two vocabulary ids swapped in tokenizer.json
    (same class, path and vocabulary size: the old key) encodes the text anew."""
    import importlib
    import json

    from transformers import AutoTokenizer

    from rankcollapse.models.loading import load_model

    ex = importlib.import_module("rankcollapse.models.excerpts")  # the package exports a function so named

    monkeypatch.setenv("RANKCOLLAPSE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "tok"
    load_model("tiny:bert").tokenizer.save_pretrained(folder)
    text = "the cat sat on the mat of the house " * 20
    first = AutoTokenizer.from_pretrained(folder)
    ids = ex._stream_cached(None, first, text).ids.clone()
    ex._STREAMS.clear()
    again = ex._stream_cached(None, AutoTokenizer.from_pretrained(folder), text).ids
    assert torch.equal(again, ids) and len(list((tmp_path / "cache" / "tokens").iterdir())) == 1  # shared

    spec = json.loads((folder / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    vocab["the"], vocab["of"] = vocab["of"], vocab["the"]
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    edited = AutoTokenizer.from_pretrained(folder)
    assert len(edited) == len(first) and edited.name_or_path == first.name_or_path
    ex._STREAMS.clear()  # a new process: only the file cache is left
    new_ids = ex._stream_cached(None, edited, text).ids
    assert torch.equal(new_ids, torch.tensor(edited(text, add_special_tokens=False)["input_ids"]))
    assert not torch.equal(new_ids, ids)


def test_no_home_folder_is_one_line_naming_the_variable_to_set(monkeypatch, capsys, tmp_path):
    """No HOME and no password entry: Path.home() raised RuntimeError through every command that keeps a
    cache (a traceback); it is one line naming RANKCOLLAPSE_CACHE, and exit 2."""
    import pwd

    from rankcollapse.cli.main import main
    from rankcollapse.models.bundled import cache_dir

    def no_entry(uid: int) -> object:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("RANKCOLLAPSE_CACHE", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(RankCollapseError, match="RANKCOLLAPSE_CACHE"):
        cache_dir()
    code = main(["analyze", "--model", "tiny:bert", "--samples", "2", "--tokens", "8", "--no-table",
                 "--no-progress", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "RANKCOLLAPSE_CACHE" in err[0]
