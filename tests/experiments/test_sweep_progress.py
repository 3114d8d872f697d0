"""A sweep's progress counts estimated seconds of work, not runs or layers, and its time left follows
the measured speed."""

from __future__ import annotations

import io

import pytest

from rankcollapse.experiments.engine.grid import RunSpec
from rankcollapse.experiments.engine.progress import SweepProgress, run_weights


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _specs() -> list[RunSpec]:
    return [
        RunSpec("e", "toy", {"layers": 99, "seed": 0}),  # 100 layers, 100 s
        RunSpec("e", "toy", {"layers": 1, "seed": 1}),  # 2 layers, 1 s
        RunSpec("e", "toy", {"layers": 1, "seed": 2}),  # no estimate: the mean cost per layer
    ]


def test_weights_fill_in_runs_without_an_estimate_from_the_others_per_layer() -> None:
    specs = _specs()
    w = run_weights(specs, lambda s: {0: 100.0, 1: 1.0}.get(s.seed))
    per_layer = 101.0 / 102
    assert w[specs[0].run_id] == 100.0 and w[specs[2].run_id] == pytest.approx(2 * per_layer)
    assert set(run_weights(specs, lambda s: None).values()) == {100.0, 2.0}  # 1 s per layer


def test_cheap_runs_finishing_first_do_not_look_like_most_of_the_work() -> None:
    specs = _specs()
    w = {specs[0].run_id: 100.0, specs[1].run_id: 1.0, specs[2].run_id: 1.0}
    clock, out = Clock(), io.StringIO()
    bar = SweepProgress(specs, w, True, "sweep", clock=clock, stream=out, bar=False, delay=0.0, every=0.0)
    clock.t = 2.0
    bar.run(specs[1].run_id)
    bar.run(specs[2].run_id)
    assert bar.share == pytest.approx(2 / 102)  # 2 of 3 runs, but 2% of the work
    line = out.getvalue().strip().splitlines()[-1]
    assert "2 of 3 runs, 2% of the estimated work" in line and "\r" not in out.getvalue()
    assert "about 1 min 40 s left" in line  # 2 s for 2 s of work: 100 s of work left at that speed
    for _ in range(200):  # more ticks than layers: the ticks credit at most 95% before the run ends
        bar.layer(specs[0].run_id)
    assert bar.credited[specs[0].run_id] == pytest.approx(95.0)
    bar.run(specs[0].run_id)
    assert bar.share == pytest.approx(1.0)
    bar.layer("unknown")  # a tick of a run not in the sweep is ignored
    bar.close()


def test_the_time_left_is_corrected_by_the_measured_speed() -> None:
    """The estimate says 1 s per unit; the machine does it at half that speed: the time left doubles."""
    specs = [RunSpec("e", "toy", {"layers": 9, "seed": s}) for s in range(4)]
    w = {s.run_id: 10.0 for s in specs}
    clock, out = Clock(), io.StringIO()
    bar = SweepProgress(specs, w, True, "sweep", clock=clock, stream=out, bar=False, delay=0.0, every=0.0)
    clock.t = 20.0
    bar.run(specs[0].run_id)
    assert "about 1 min 00 s left" in out.getvalue().splitlines()[-1]  # 30 s of work at 2 s per s


def test_a_run_of_its_models_own_depth_is_not_credited_most_of_its_weight_at_its_first_tick() -> None:
    """The quick sweep's 128-layer BERT runs (``layers`` null, the depth in the model's name) were
    credited 95% of their weight at their first tick: 24% of the sweep after 12 s, then no line for
    minutes. The depth is read from the name; a run of unknown depth credits a share of what is left."""
    deep = RunSpec("e", "toy", {"model": "random:bert-base-uncased,layers=128", "layers": None, "seed": 0})
    own = RunSpec("e", "toy", {"model": "paper:gpt2", "layers": None, "seed": 1})
    assert deep.expected_layers == 129 and own.expected_layers is None
    assert RunSpec("e", "toy", {"layers": 12, "seed": 2}).expected_layers == 13
    w = {deep.run_id: 129.0, own.run_id: 13.0}
    bar = SweepProgress([deep, own], w, False, "sweep")
    bar.layer(deep.run_id)
    assert bar.credited[deep.run_id] == pytest.approx(1.0)  # one layer of 129
    credits = []
    for _ in range(13):  # the model turns out to have 12 layers: never more than it has done
        bar.layer(own.run_id)
        credits.append(bar.credited[own.run_id])
    assert all(c <= (k + 1) for k, c in enumerate(credits)) and credits[-1] < 0.95 * 13
    assert credits == sorted(credits) and credits[0] > 0
    bar.run(own.run_id)
    assert bar.credited[own.run_id] == pytest.approx(13.0)
    assert run_weights([own], lambda s: None)[own.run_id] == 13.0  # 1 s per tick, 13 ticks assumed


def test_a_line_comes_every_period_while_a_long_run_sends_no_tick() -> None:
    specs = _specs()
    w = {s.run_id: 10.0 for s in specs}
    clock, out = Clock(), io.StringIO()
    bar = SweepProgress(specs, w, True, "sweep", clock=clock, stream=out, bar=False, delay=0.0, every=10.0)
    assert bar._poller is not None and bar._poller.daemon
    bar.run(specs[1].run_id)
    seen = len(out.getvalue().splitlines())
    bar.poll()  # not due yet
    assert len(out.getvalue().splitlines()) == seen
    clock.t = 25.0  # 25 s inside one run, no tick
    bar.poll()
    lines = out.getvalue().splitlines()
    assert len(lines) == seen + 1 and "1 of 3 runs" in lines[-1] and "25 s" in lines[-1]
    bar.close()
    assert not bar._poller.is_alive()
