"""The cost estimate that reproduce prints before a sweep, and the order runs start in."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.kit.tasks import model_curves_cost, model_geometry_cost
from rankcollapse.experiments.stories import load_experiments
from rankcollapse.pipeline.reproduce import _cost, _prepare_models, estimate_seconds, print_estimate

PAPER_STORIES = ["fig2", "fig3", "fig4", "fig8", "fig9"]


def test_curves_cost_is_linear_in_layers_samples_and_conditions() -> None:
    """Properties of the estimate, not its constants: past the fixed load cost (a run of no samples), the
    cost scales with the layers, the samples and the number of masks; float64 costs more than float32; a
    model of a named depth costs its own depth, not the ``layers`` key."""
    p = {
        "variants": ["attn"],
        "masks": ["complete"],
        "d_qk": [None],
        "layers": 10,
        "samples": 3,
        "dtype": "float32",
        "tokens": 128,
    }

    def variable(**change: object) -> float:
        q = {**p, **change}
        return model_curves_cost(q) - model_curves_cost({**q, "samples": 0})

    base = variable()
    assert base > 0 and model_curves_cost({**p, "samples": 0}) > 0
    assert variable(layers=20) == pytest.approx(2 * base)
    assert variable(samples=9) == pytest.approx(3 * base)
    assert variable(masks=["complete", "causal"]) == pytest.approx(2 * base)
    assert variable(d_qk=[None, 4.0, 16.0]) == pytest.approx(3 * base)
    assert variable(variants=["attn", "attn+ln"]) > base
    assert variable(dtype="float64") > base
    deep = {**p, "layers": None, "model": "random:bert-base-uncased,layers=128"}
    assert model_curves_cost(deep) > 128 / 10 * base  # the model's own depth
    assert model_geometry_cost({"layers": 0, "samples": 10}) < model_geometry_cost(
        {"layers": 12, "samples": 10}
    )


def test_paper_profile_estimate_is_printed_and_much_larger_than_quick(capsys: pytest.CaptureFixture) -> None:
    from rankcollapse.experiments.engine.store import RunStore

    quick = load_experiments("quick", PAPER_STORIES)
    paper = load_experiments("paper", PAPER_STORIES)
    qs, ps = [s for e in quick for s in e.runs()], [s for e in paper for s in e.runs()]
    q, nq = estimate_seconds(qs, {e.name: e for e in quick})
    p, npaper = estimate_seconds(ps, {e.name: e for e in paper})
    assert nq == len(qs) and npaper == len(ps)
    assert 60 < q < 3600 and p > 100 * q  # quick: minutes; paper (3000 samples): days of CPU
    print_estimate(ps, {e.name: e for e in paper}, "paper", 2, RunStore("/nonexistent/rankcollapse-estimate"))
    assert "estimated" in capsys.readouterr().err


def test_runs_start_longest_first_by_their_estimate_and_bundled_weights_are_built_once_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """The sweep's order: runs whose task estimates its seconds first, longest first (the paper's
    128-layer runs), so no worker idles at the end behind one long run; and every bundled model an
    unfinished run loads is converted once, before the workers start."""
    import rankcollapse.models.bundled as bundled
    from rankcollapse.experiments.engine.store import RunStore

    exps = {e.name: e for e in load_experiments("full")}
    specs = sorted((s for e in exps.values() for s in e.runs()), key=lambda s: _cost(s, exps))
    assert [s.experiment for s in specs[:4]] == ["fig2.deep"] * 4  # 128 layers x 20 conditions: the longest
    costs = [-_cost(s, exps)[1] for s in specs if _cost(s, exps)[0] == 0]
    assert costs == sorted(costs, reverse=True) and len(costs) >= 40
    built: list[str] = []
    monkeypatch.setattr(bundled, "prepare", lambda name: built.append(name))
    _prepare_models(specs, RunStore(tmp_path))
    wanted = {s.facts.get("weights") or s.params.get("model") for s in specs} & set(bundled.BUNDLED)
    assert built == sorted(wanted) and "smollm2" in built
