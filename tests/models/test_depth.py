"""``LoadedModel.depth``: the layers a run applies by default, the one definition every module reads."""

from __future__ import annotations

import torch

from rankcollapse.models import AnalyzeConfig, analyze, iter_hidden_states, load_model


def test_the_depth_is_the_number_of_rows_after_the_embeddings(tiny_models, ids) -> None:
    for name in ("bert", "gpt2"):
        model = tiny_models(name)
        assert model.depth == len(model.layers) == model.n_model_layers
        assert sum(1 for _ in iter_hidden_states(model, ids[:1])) == model.depth + 1


def test_a_deeper_random_model_applies_its_own_depth(ids) -> None:
    deep = load_model("tiny:bert,layers=5", "f64")
    assert deep.depth == 5
    result = analyze(AnalyzeConfig(model="tiny:bert,layers=5", metrics=("mu",), dtype="float64"), model=deep,
                     ids=ids[:2])
    assert [r["layer"] for r in result.rows] == list(range(deep.depth + 1))
    assert torch.isfinite(torch.tensor(result.column("mu"))).all()
