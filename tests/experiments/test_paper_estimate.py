"""The cost estimate that reproduce prints before a sweep, and the order runs start in."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.kit.tasks.curves import model_curves_cost, model_geometry_cost
from rankcollapse.experiments.stories import load_experiments
from rankcollapse.pipeline.reproduce import _cost, _prepare_models, estimate_seconds, print_estimate

PAPER_STORIES = ["fig2", "fig3", "fig4", "fig8", "fig9"]


def test_curves_cost_is_linear_in_layers_samples_and_conditions() -> None:
    """Properties of the estimate, not its constants: past the fixed load cost, the
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
        """The cost past the fixed one: cost(s) = F + s V, so F = 2 cost(1) - cost(2)."""
        q = {**p, **change}
        fixed = 2 * model_curves_cost({**q, "samples": 1}) - model_curves_cost({**q, "samples": 2})
        return model_curves_cost(q) - fixed

    base = variable()
    assert base > 0 and model_curves_cost(p) > base  # a fixed load cost besides
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
    costs = [-_cost(s, exps)[1] for s in specs if _cost(s, exps)[0] == 0]
    assert costs == sorted(costs, reverse=True) and len(costs) >= 40
    where = [s.experiment for s in specs]
    deep = [i for i, name in enumerate(where) if name == "fig2.deep"]  # 128 layers x 20 conditions
    shallow = [i for i, name in enumerate(where) if name.startswith("fig2.") and name != "fig2.deep"]
    assert deep and shallow and max(deep) < min(shallow)  # fig2's long runs before its short ones
    built: list[str] = []
    monkeypatch.setattr(bundled, "prepare", lambda name: built.append(name))
    _prepare_models(specs, RunStore(tmp_path))
    wanted = {s.facts.get("weights") or s.params.get("model") for s in specs} & set(bundled.BUNDLED)
    assert built == sorted(wanted) and "smollm2" in built


def _toy_experiment(name: str = "toy.a", per_run_s: float = 0.1):
    """A toy experiment whose task estimates ``per_run_s`` seconds a run, with a seed axis."""
    from rankcollapse.experiments.engine.config import Experiment
    from rankcollapse.experiments.engine.tasks import Task, toy

    task = Task(toy, cost_s=lambda params: per_run_s)
    return Experiment(name, "toy", "toy", {"layers": 2, "rate": 0.5}, {"seed": [0, 1, 2, 3]}, task_info=task)


def _measured(store, exp, seconds: float, seeds) -> None:
    """Store finished runs of ``exp`` for ``seeds`` that took ``seconds`` each (the records' wall_s)."""
    from dataclasses import replace

    from rankcollapse.experiments.engine.tasks import RunResult

    for spec in replace(exp, grid={"seed": list(seeds)}).runs():
        store.save(spec, RunResult(spec.run_id, "ok", [{"layer": 0}], {}, seconds))


def test_the_estimate_is_calibrated_on_the_runs_the_folder_measured(tmp_path) -> None:
    """The tasks' per-layer costs were 10-19x below the seconds runs took; a store holding measured runs
    of the same experiment (else task) now sets the factor, so an estimate of the runs not yet done is
    within 10 % of what the done ones took. With none measured: the stated constant."""
    from rankcollapse.experiments.engine.costs import UNMEASURED_FACTOR, RunCost
    from rankcollapse.experiments.engine.store import RunStore

    a, b = _toy_experiment("toy.a"), _toy_experiment("toy.b")
    exps = {a.name: a, b.name: b}
    store = RunStore(tmp_path)
    new_a, new_b = a.runs()[0], b.runs()[0]
    assert RunCost(exps, store)(new_a) == pytest.approx(0.1 * UNMEASURED_FACTOR)
    _measured(store, a, 1.5, range(10, 14))  # 15x the task's estimate
    cost = RunCost(exps, store)
    assert 1.5 / 1.1 < cost(new_a) < 1.5 * 1.1
    assert cost.calibration.factor(new_b)[1] == "task" and 1.5 / 1.1 < cost(new_b) < 1.5 * 1.1
    assert "calibrated on the 4 runs measured" in cost.describe([new_a])
    total, known = estimate_seconds(a.runs(), exps, store)
    assert known == 4 and 4 * 1.5 / 1.1 < total < 4 * 1.5 * 1.1


def test_budget_never_starts_a_look_its_measured_cost_cannot_finish(tmp_path) -> None:
    """``--budget`` trusted the tasks' estimates: a look of 4 runs estimated at 0.4 s started with 2 s
    left, though runs here took 1.5 s each. The calibrated estimate (6 s) leaves it out, naming the budget."""
    from types import SimpleNamespace

    from rankcollapse.experiments.engine.costs import RunCost
    from rankcollapse.experiments.engine.store import RunStore
    from rankcollapse.pipeline.sequential import plan

    exp = _toy_experiment()
    store = RunStore(tmp_path)
    _measured(store, exp, 1.5, range(4))
    row = SimpleNamespace(id="toy.row", experiment=exp.name, undecided=True, n=4, seeds=[0, 1, 2, 3], axes={})
    exps = {exp.name: exp}
    runs, rows, reasons, spent = plan([row], exps, 64, set(), 2.0, 1.0, store.is_done, RunCost(exps, store))
    assert runs == [] and rows == []
    assert reasons["toy.row"].startswith("budget: the next look's runs (about 6")
    runs, rows, _, spent = plan([row], exps, 64, set(), 7.0, 1.0, store.is_done, RunCost(exps, store))
    assert len(runs) == 4 and rows == ["toy.row"] and spent == pytest.approx(6.0)
