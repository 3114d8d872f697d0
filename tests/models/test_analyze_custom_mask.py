"""analyze with a mask given in Python (a predicate f(i, j), a bool tensor): the rows of the spec it
spells; with padded texts of different lengths each text gets the mask at its own length; config.json
names the mask."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze
from rankcollapse.models.analyze import write_run

TEXTS = ["the cat sat on the mat and looked at the dog", "a short one", "it was the best of times"]
NAMES = ("mu", "mu_rel", "num_rank")


def _cfg(**kw):  # type: ignore[no-untyped-def]
    base = dict(model="tiny:gpt2", samples=3, tokens=12, dtype="float64", metrics=NAMES, mode="attn+skip")
    return AnalyzeConfig(**{**base, **kw})


def causal_window_2(i, j):
    return (j <= i) & (i - j <= 2)


@pytest.mark.parametrize(
    ("mask", "spec", "mode"),
    [
        (causal_window_2, "causal-window:w=2", "attn+skip"),
        (lambda i, j: (i - j).abs() <= 1, "window:w=1", "full"),
        (torch.ones(12, 12, dtype=torch.bool).tril(), "causal", "full"),  # the model's own: hf backend
        (torch.ones(64, 64, dtype=torch.bool).tril(), "causal", "attn"),
    ],
)
def test_a_python_mask_gives_the_rows_of_the_spec_it_spells(tiny_models, ids, mask, spec, mode):
    model = tiny_models("gpt2", "f64")
    mine = analyze(_cfg(mask=mask, mode=mode), model=model, ids=ids)
    ref = analyze(_cfg(mask=spec, mode=mode), model=model, ids=ids)
    assert mine.model_info["backend"] == ref.model_info["backend"]
    for a, b in zip(mine.rows, ref.rows, strict=True):
        assert [a[k] for k in NAMES] == [b[k] for k in NAMES]


@pytest.mark.parametrize(
    "mask",
    [
        "random:p=0.4,seed=5|causal-window:w=1",  # a draw per length: the padded n's draw is another mask
        lambda i, j: (j <= i) & ((i - j) % 3 == 0),
        torch.ones(32, 32, dtype=torch.bool).tril() | torch.eye(32, dtype=torch.bool).roll(1, 1).triu(),
    ],
)
def test_padded_texts_get_the_mask_at_their_own_length(tiny_models, mask):
    """A batch of texts of different lengths gives per-text metrics equal to each text run alone, so
    each text's mask is the mask at its own length (not the top-left block of the padded one)."""
    model = tiny_models("bert", "f64")
    cfg = _cfg(model="tiny:bert", tokens=32, mask=mask)
    batch = analyze(cfg, model=model, texts=TEXTS)
    alone = [analyze(cfg, model=model, texts=[t]) for t in TEXTS]
    for t in range(len(batch.rows)):
        for name in NAMES:
            want = sum(r.rows[t][name] for r in alone) / len(alone)
            assert math.isclose(batch.rows[t][name], want, rel_tol=1e-9), (name, t)


def test_a_file_mask_refuses_a_text_of_another_length_naming_both(tiny_models, tmp_path):
    """A ``file:`` mask is one length (``tokens``): the longest text fits, a shorter one is refused."""
    from rankcollapse.models.inputs import text_batch

    model = tiny_models("bert", "f64")
    lengths = text_batch(model, TEXTS, 32)[1].sum(1).tolist()
    n = max(lengths)
    path = tmp_path / "m.npy"
    np.save(path, np.tril(np.ones((n, n), dtype=bool)))
    cfg = _cfg(model="tiny:bert", tokens=n, mask=f"file:{path}")
    analyze(cfg, model=model, texts=[TEXTS[lengths.index(n)]])  # the text of its length runs
    short = sorted(set(lengths))[0]
    with pytest.raises(RankCollapseError, match=rf"is {n} x {n} but n={short}; allowed: n={n}"):
        analyze(cfg, model=model, texts=TEXTS)


def test_config_json_names_the_predicate_and_says_it_is_not_saved(tiny_models, ids, tmp_path):
    result = analyze(_cfg(mask=causal_window_2), model=tiny_models("gpt2", "f64"), ids=ids)
    write_run(result, tmp_path / "run")
    record = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert record["analyze"]["mask"] == "<predicate causal_window_2>"
    assert record["model"]["mask"] == "<predicate causal_window_2>"
    assert any("recorded by its name" in note for note in record["notes"])


def test_padded_texts_get_the_diagnostics_of_their_own_length_mask(tiny_models):
    """--diagnostics normalise the entropy by each query's number of kept keys: of the text's own mask."""
    model = tiny_models("bert", "f64")
    cfg = _cfg(
        model="tiny:bert",
        tokens=32,
        mask="random:p=0.4,seed=5|causal-window:w=1",
        metrics=("mu",),
        diagnostics=True,
    )
    batch = analyze(cfg, model=model, texts=TEXTS)
    alone = [analyze(cfg, model=model, texts=[t]) for t in TEXTS]
    for t in range(1, len(batch.rows)):
        for name in ("normalized_attention_entropy", "attention_entropy", "sink_rate"):
            want = sum(r.rows[t][name] for r in alone) / len(alone)
            assert math.isclose(batch.rows[t][name], want, rel_tol=1e-9), (name, t)
