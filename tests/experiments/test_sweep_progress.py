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


def _left(line: str) -> float:
    """Seconds of a line's ``about X left``."""
    import re

    found = re.search(r"about (?:(\d+) min )?(\d+) s left", line)
    assert found, line
    return 60 * int(found.group(1) or 0) + int(found.group(2))


def test_the_time_left_starts_from_the_calibrated_estimate_never_far_from_it() -> None:
    """``make reproduce`` printed 'estimated 16.8 min', then '0 of 739 runs ... about 691 min left': the
    first layer ticks credit a sliver of work, and elapsed / done extrapolated 40x. The time left starts
    at the wall-time estimate printed before the sweep and moves to the measured speed as work is done:
    ``(1 - s) ((1 - s) E + elapsed)`` for a share ``s`` done, E the estimate (exact when the sweep runs
    as estimated)."""
    specs = [RunSpec("e", "toy", {"layers": 9, "seed": s}) for s in range(739)]
    w = {s.run_id: 1000.0 / 739 for s in specs}  # 1000 s of CPU work
    clock, out = Clock(), io.StringIO()
    bar = SweepProgress(specs, w, True, "sweep", clock=clock, stream=out, bar=False, delay=0.0, every=0.0,
                        expected_s=1008.0)  # 16.8 min on the workers
    clock.t = 10.0
    bar.poll()  # a line before any work is done: the estimate, and the time spent
    first = out.getvalue().splitlines()[-1]
    assert "0 of 739 runs, 0% of the estimated work" in first and _left(first) == 1008 + 10
    bar.layer(specs[0].run_id)  # 0.15 s of 1000 credited after 10 s: 1000 / 0.15 x 10 s was 19 h
    assert 0.9 * 1008 <= _left(out.getvalue().splitlines()[-1]) <= 1.1 * 1008
    clock.t = 504.0  # half the work in half the estimated time: half the estimate left
    for s in specs[:370]:
        bar.run(s.run_id)
    assert abs(_left(out.getvalue().splitlines()[-1]) - 504) <= 5
    bar.close()


def test_the_time_left_follows_the_measured_speed_as_work_is_done() -> None:
    """A sweep twice as slow as estimated: the time left grows towards twice the estimate's rest."""
    specs = [RunSpec("e", "toy", {"layers": 9, "seed": s}) for s in range(10)]
    w = {s.run_id: 10.0 for s in specs}
    clock, out = Clock(), io.StringIO()
    bar = SweepProgress(specs, w, True, "sweep", clock=clock, stream=out, bar=False, delay=0.0, every=0.0,
                        expected_s=100.0)
    lefts = []
    for k, s in enumerate(specs[:9]):
        clock.t = 20.0 * (k + 1)  # 20 s per run where 10 s were estimated
        bar.run(s.run_id)
        lefts.append(_left(out.getvalue().splitlines()[-1]))
    truth = [20.0 * (10 - k - 1) for k in range(9)]
    ratios = [got / want for got, want in zip(lefts, truth, strict=True)]
    assert ratios == sorted(ratios) and ratios[-1] >= 0.9  # from the estimate's towards the measured
    bar.close()


def test_runs_are_ordered_so_that_the_counter_moves_from_the_start() -> None:
    """Longest first kept every worker on a training run for minutes ('0 of 739 runs' for 6 min). The
    order gives one lane the cheapest runs while the others take the longest, so runs finish from the
    first minute, and the sweep ends no later than longest-first (simulated on two workers)."""
    from rankcollapse.experiments.engine.executors import order_runs

    specs = [RunSpec("e", "toy", {"layers": 9, "seed": s}) for s in range(44)]
    cost = {s.run_id: (300.0 if k < 4 else 20.0 + k) for k, s in enumerate(specs)}
    longest_first = sorted(specs, key=lambda s: -cost[s.run_id])

    def schedule(order: list[RunSpec], workers: int = 2) -> tuple[float, float]:
        """(first run finished, last run finished) of a greedy pool taking runs in ``order``."""
        free, ends = [0.0] * workers, []
        for spec in order:
            k = free.index(min(free))
            free[k] += cost[spec.run_id]
            ends.append(free[k])
        return min(ends), max(ends)

    ordered = order_runs(specs, cost, workers=2)
    assert sorted(s.run_id for s in ordered) == sorted(s.run_id for s in specs)
    first, last = schedule(ordered)
    old_first, old_last = schedule(longest_first)
    assert old_first == 300.0 and first <= 30.0
    assert last <= 1.02 * old_last
