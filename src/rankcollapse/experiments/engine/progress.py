"""Progress of a sweep, weighted by each run's estimated cost, on ``rankcollapse.edge.progress``.

Runs differ in cost by orders of magnitude (a 12-layer simulation against a 128-layer BERT), so
counting runs or layers lies about the time left. :class:`SweepProgress` counts *estimated seconds
of work*: run ``i`` weighs ``c_i`` (its task's ``cost_s``; a task without one weighs the mean cost
per layer of those with one, times its layers; 1 s per layer if none has one); each layer tick of a
run credits ``c_i / layers_i`` (at most 95 % of ``c_i`` before the run ends), and its end credits
the rest. A run whose depth is its model's own (``layers_i`` unknown before it loads) credits
1/``UNKNOWN_DEPTH`` of its remaining share per tick: never more than it has done for a model of
that depth or deeper.

The time left starts from the sweep's wall-time estimate ``E`` (``expected_s``: the one the pre-sweep
line prints, ``engine.costs.wall_seconds`` of the calibrated costs) and moves to the measured speed as
work is done: with a share ``s = w / W`` of the ``W`` estimated seconds done after ``elapsed``, the
seconds per unit of work are ``(1 - s) E / W + s elapsed / w`` (the estimate's, then the measured), so
the time left is ``(1 - s) ((1 - s) E + elapsed)``: ``E`` at the start, ``(1 - s) E`` all along when the
sweep runs as estimated, never ``elapsed / w`` extrapolated from the first layer ticks (a 40x overshoot
in the first minute of ``make reproduce``). Without an estimate: ``elapsed * (W - w) / w``. On a
terminal a tqdm bar, elsewhere a plain line every 10 s, from the start and also while a long run sends
no tick (a thread polls the line)::

    rankcollapse: reproduce --quick: 14 of 157 runs, 31% of the estimated work, 6 min 10 s, about
    13 min 40 s left
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from rankcollapse.edge.progress import Progress, duration_text
from rankcollapse.experiments.engine.grid import RunSpec

#: Share of a run's weight its layer ticks may credit before the run ends.
_TICK_CAP = 0.95
#: Ticks assumed for a run whose depth is its model's own (a 12-layer model and X(0)).
UNKNOWN_DEPTH = 13


def run_weights(specs: Iterable[RunSpec], cost: Callable[[RunSpec], float | None]) -> dict[str, float]:
    """Estimated seconds per run id (see the module docstring for runs without an estimate)."""
    specs = list(specs)
    known = {s.run_id: float(c) for s in specs if (c := cost(s)) is not None and c > 0}
    layers = sum(_ticks(s) for s in specs if s.run_id in known)
    per_layer = sum(known.values()) / layers if layers else 1.0
    return {s.run_id: known.get(s.run_id, per_layer * _ticks(s)) for s in specs}


def _ticks(spec: RunSpec) -> int:
    return spec.expected_layers or UNKNOWN_DEPTH


def time_left(done: float, total: float, elapsed: float, expected_s: float | None) -> float | None:
    """Seconds left of a sweep with ``done`` of ``total`` units of estimated work done after ``elapsed``
    seconds (module docstring): from the estimate ``expected_s`` towards the measured speed; without an
    estimate the measured speed alone (None before any work is done)."""
    if total <= 0 or done >= total:
        return 0.0 if total > 0 else None
    share = max(done, 0.0) / total
    if expected_s is not None and expected_s > 0:
        return (1.0 - share) * ((1.0 - share) * expected_s + elapsed)
    return elapsed * (total - done) / done if done > 0 else None


class _Line(Progress):
    """The plain line of a sweep: runs done, share of the estimated work, elapsed, time left."""

    runs_done = 0
    runs_total = 0
    #: The sweep's estimated wall time (None: not estimated).
    expected_s: float | None = None

    def line(self) -> str:
        elapsed = self.clock() - self._start
        share = self.done / self.total if self.total else 0.0
        left = ""
        rest = time_left(self.done, self.total, elapsed, self.expected_s) if self.done < self.total else None
        if rest is not None:
            left = f", about {duration_text(rest)} left"
        return (
            f"rankcollapse: {self.desc}: {self.runs_done} of {self.runs_total} runs, {100 * share:.0f}% of "
            f"the estimated work, {duration_text(elapsed)}{left}"
        )

    def poll(self) -> None:
        """A plain line when one is due, from the start when the sweep has an estimate (the time left is
        then known before any work is done)."""
        if self.expected_s is None or self.done:
            super().poll()
            return
        if self.enabled and self._bar is None and self.clock() >= self._next:
            self._write()
            self._next = self.clock() + self.every


class SweepProgress:
    """Progress of ``specs`` weighted by ``weights`` (estimated seconds per run id); thread-safe.

    ``layer(run_id)`` for a layer tick, ``run(run_id)`` when a run is stored, ``close()`` at the end.
    ``enabled=False`` prints nothing. ``expected_s``: the sweep's estimated wall time, where the time left
    starts (module docstring). ``clock``/``stream``/``bar`` go to ``rankcollapse.edge.progress``.
    """

    def __init__(
        self,
        specs: list[RunSpec],
        weights: dict[str, float],
        enabled: bool,
        label: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        expected_s: float | None = None,
        **kw: object,
    ) -> None:
        self.weights = {s.run_id: float(weights.get(s.run_id, _ticks(s))) for s in specs}
        self.layers = {s.run_id: s.expected_layers for s in specs}
        self.credited = dict.fromkeys(self.weights, 0.0)
        self._lock = threading.Lock()
        self.bar = _Line(sum(self.weights.values()), label, "s of work", enabled=enabled, clock=clock, **kw)
        self.bar.runs_total = len(specs)
        self.bar.expected_s = expected_s
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        if enabled and self.bar._bar is None:  # plain lines: one every 10 s even between ticks
            self._poller = threading.Thread(target=self._poll, name="sweep-progress", daemon=True)
            self._poller.start()

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            self.poll()

    def poll(self) -> None:
        """Write the plain line if one is due (called each second by the thread)."""
        with self._lock:
            self.bar.poll()

    def _credit(self, run_id: str, amount: float) -> None:
        if amount > 0:
            self.credited[run_id] = self.credited.get(run_id, 0.0) + amount
            self.bar.update(amount)

    def layer(self, run_id: str) -> None:
        with self._lock:
            w = self.weights.get(run_id)
            if w is None:
                return
            room = max(_TICK_CAP * w - self.credited[run_id], 0.0)
            layers = self.layers[run_id]
            self._credit(run_id, room / UNKNOWN_DEPTH if layers is None else min(w / max(layers, 1), room))

    def run(self, run_id: str) -> None:
        with self._lock:
            self.bar.runs_done += 1
            w = self.weights.get(run_id)
            if w is not None:
                self._credit(run_id, w - self.credited[run_id])

    @property
    def share(self) -> float:
        """Share of the estimated work done (0..1)."""
        return self.bar.done / self.bar.total if self.bar.total else 1.0

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
        with self._lock:
            self.bar.close()
