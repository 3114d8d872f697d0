"""The cost estimate that reproduce prints before a sweep of the paper's stories."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.paper_tasks import LAYER_SAMPLE_S, paper_curves_cost, paper_geometry_cost
from rankcollapse.experiments.reproduce import estimate_seconds, print_estimate
from rankcollapse.experiments.stories import load_experiments

PAPER_STORIES = ["fig2_bert", "fig6_deep", "fig3_dqk", "fig4_geometry_paper", "fig8_spectrum", "fig9_cosines"]


def test_curves_cost_is_layers_x_samples_x_conditions() -> None:
    p = {"variants": ["attn"], "masks": ["complete"], "d_qk": [None], "layers": 10, "samples": 3,
         "dtype": "float32", "tokens": 128}
    assert paper_curves_cost(p) == pytest.approx(LAYER_SAMPLE_S["attn"] * 30 + 3.0)
    f64 = paper_curves_cost({**p, "dtype": "float64"}) - 3.0
    assert f64 == pytest.approx(2 * LAYER_SAMPLE_S["attn"] * 30)
    embeddings_only = paper_geometry_cost({"layers": 0, "samples": 10})
    assert embeddings_only < paper_geometry_cost({"layers": 12, "samples": 10})


def test_paper_profile_estimate_is_printed_and_much_larger_than_quick(capsys: pytest.CaptureFixture) -> None:
    from rankcollapse.experiments.engine.store import RunStore

    quick = [s for e in load_experiments("quick", PAPER_STORIES) for s in e.runs()]
    paper = [s for e in load_experiments("paper", PAPER_STORIES) for s in e.runs()]
    q, nq = estimate_seconds(quick)
    p, npaper = estimate_seconds(paper)
    assert nq == len(quick) and npaper == len(paper)
    assert 60 < q < 1800 and p > 100 * q  # quick: minutes; paper (3000 samples): days of CPU
    print_estimate(paper, "paper", 2, RunStore("/nonexistent/rankcollapse-estimate"))
    assert "estimated" in capsys.readouterr().err


def test_runs_start_longest_first_by_their_estimate_and_bundled_weights_are_built_once_before(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The sweep's order: runs whose task estimates its seconds first, longest first (the paper's
    128-layer runs), so no worker idles at the end behind one long run; and every bundled model an
    unfinished run loads is converted once, before the workers start."""
    import rankcollapse.models.bundled as bundled
    from rankcollapse.experiments.engine.store import RunStore
    from rankcollapse.experiments.reproduce import _cost, _prepare_models

    specs = sorted((s for e in load_experiments("full") for s in e.runs()), key=_cost)
    first = [s.experiment for s in specs[:4]]
    assert first == ["fig6_deep"] * 4  # 128 layers x 20 conditions: the longest
    costs = [-_cost(s)[1] for s in specs if _cost(s)[0] == 0]
    assert costs == sorted(costs, reverse=True) and len(costs) >= 40
    built: list[str] = []
    monkeypatch.setattr(bundled, "prepare", lambda name: built.append(name))
    _prepare_models(specs, RunStore(tmp_path))
    wanted = {s.facts.get("weights") or s.params.get("model") for s in specs} & set(bundled.BUNDLED)
    assert built == sorted(wanted) and "smollm2" in built
