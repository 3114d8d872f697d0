"""Issue 39: the training story had no memory estimate; a training beyond memory failed with torch's
allocator text as its reason. ``TrajectoryConfig.memory_bytes`` estimates the peak and the config refuses,
on construction, a training that cannot fit (``edge.validate.check_memory``, the one memory check): one
line naming the training and what is allowed. The estimate is an upper bound of the measured peak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.monitor.trajectory import TrajectoryConfig

_MEASURE = """
import json, sys, threading, time
from rankcollapse.monitor.trajectory import TrajectoryConfig, train_trajectory

def anon():  # the process's own memory (RssAnon): library pages evicted and read again do not count
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024

kw = json.loads(sys.argv[1])
warm = dict(d=8, layers=1, heads=1, batch=2, tokens=8, steps=2, every=1, warmup=0, probe=2, dtype=kw["dtype"])
train_trajectory(TrajectoryConfig(**warm))  # the libraries and code paths loaded before the baseline
config = TrajectoryConfig(**kw)
base, peak, done = anon(), [0], threading.Event()

def watch():
    while not done.is_set():
        peak[0] = max(peak[0], anon())
        time.sleep(0.002)

watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
train_trajectory(config)
done.set()
watcher.join()
print(json.dumps({"estimate": config.memory_bytes(), "grew": peak[0] - base}))
"""

CASES = {
    "activations": dict(d=128, layers=2, heads=4, batch=32, tokens=256, probe=4, dtype="float32"),
    "parameters": dict(d=768, layers=2, heads=8, batch=2, tokens=64, probe=2, dtype="float32"),
    "probe": dict(d=64, layers=2, heads=4, batch=4, tokens=384, probe=48, dtype="float64"),
}


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc")
@pytest.mark.parametrize("case", list(CASES))
def test_the_estimate_bounds_the_measured_peak_from_above(case):
    kw = {**CASES[case], "steps": 2, "every": 1, "warmup": 0}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}  # glibc's default heap
    done = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps(kw)], capture_output=True, text=True,
                          timeout=300, env={**env, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["grew"] > 50e6  # the case measures the training, not the noise of the heap
    assert got["grew"] <= got["estimate"] <= 4 * got["grew"], got


def test_a_training_beyond_memory_is_refused_on_construction_in_one_line(monkeypatch):
    import rankcollapse.edge.validate as validate

    monkeypatch.setattr(validate, "available_memory", lambda: 2 * 10**9)
    small = TrajectoryConfig(d=64, layers=2, heads=4, batch=8, tokens=64)
    assert small.memory_bytes() < 2e9
    with pytest.raises(RankCollapseError) as info:
        TrajectoryConfig(d=1024, layers=12, heads=8, batch=64, tokens=1024)
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith("training a 12-layer model of width d = 1024, batch 64 x 1024")
    assert "more than the 2 GB available; allowed: a smaller batch, tokens, d or layers" in line


def test_the_story_task_fails_with_our_line_not_the_allocators(monkeypatch):
    import rankcollapse.edge.validate as validate
    from rankcollapse.experiments.kit.tasks.training import train_trajectories

    monkeypatch.setattr(validate, "available_memory", lambda: 10**8)
    with pytest.raises(RankCollapseError, match=r"needs about .* of memory"):
        train_trajectories({"d": 512, "layers": 8, "heads": 8, "batch": 64, "tokens": 512, "steps": 10,
                            "every": 5, "warmup": 0}, lambda t: None)


def test_the_estimate_grows_as_its_formula_says():
    base = TrajectoryConfig(d=64, layers=2, heads=4, batch=8, tokens=64, probe=2)
    double = TrajectoryConfig(d=64, layers=4, heads=4, batch=8, tokens=64, probe=2)
    wide = TrajectoryConfig(d=64, layers=2, heads=4, batch=8, tokens=64, probe=2, dtype="float64")
    assert wide.memory_bytes() == pytest.approx(2 * base.memory_bytes(), rel=1e-12)
    assert base.memory_bytes() < double.memory_bytes() < 2 * base.memory_bytes()
