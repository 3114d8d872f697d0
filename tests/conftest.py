"""Shared test settings: offline Hugging Face, deterministic torch, few threads."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


#: Files that take longest (seconds on one core of this project's 2-core machine, measured with
#: ``pytest --durations=60``, 2026-12-07; a file stays on one worker under ``--dist loadfile``). They are
#: handed out first, longest first, so that the two workers finish together instead of one of them running
#: the last long file alone while the other idles (on a busy machine that tail was several minutes).
LONG_FILES: dict[str, float] = {
    "tests/experiments/test_reproduce_pipeline.py": 400.0,
    "tests/robustness/test_interrupted_writes.py": 250.0,
    "tests/test_docs.py": 110.0,
    "tests/pipeline/test_published_results.py": 75.0,
    "tests/experiments/test_sweep_engine.py": 45.0,
    "tests/robustness/test_concurrent_writers.py": 45.0,
    "tests/models/test_bundled.py": 40.0,
    "tests/models/test_download.py": 35.0,
    "tests/robustness/test_no_network.py": 25.0,
    "tests/cli/test_cli_fuzz.py": 20.0,
    "tests/edge/test_output_layer.py": 20.0,
    "tests/experiments/test_processes.py": 16.0,
    "tests/experiments/test_training_story.py": 15.0,
    "tests/models/test_paper_configs.py": 12.0,
}


#: End-to-end files (``e2e``: whole commands in subprocesses, whole reproductions, the network and
#: signal guards), left out of ``make test-fast`` (the unit and property tests a change needs) and run by
#: ``make test``. Chosen from ``pytest --durations``: together about three quarters of the non-slow
#: suite's time (docs/measurements.md, "The test loop").
E2E: tuple[str, ...] = (
    "tests/robustness/",
    "tests/experiments/test_reproduce_pipeline.py",
    "tests/experiments/test_sweep_engine.py",
    "tests/experiments/test_training_story.py",
    "tests/experiments/test_processes.py",
    "tests/experiments/test_stored_columns.py",
    "tests/cli/test_cli_fuzz.py",
    "tests/cli/test_cli_main.py",
    "tests/cli/test_closed_stderr.py",
    "tests/models/test_download.py",
    "tests/models/test_lazy_family_imports.py",
    "tests/pipeline/test_sequential.py",
    "tests/edge/test_output_layer.py",
    "tests/equilibria/test_finder_construction.py",
    "tests/test_run_files.py",
    "tests/monitor/test_interrupted_telemetry.py",
)


def pytest_collection_modifyitems(session, config, items):
    """Mark the tests of :data:`E2E` ``e2e``; order the collected tests by file, the files of
    :data:`LONG_FILES` first (longest first), the rest in their collected order; tests keep their order
    inside a file."""
    for item in items:
        if item.nodeid.startswith(E2E):
            item.add_marker(pytest.mark.e2e)
    rank = {name: i for i, name in enumerate(sorted(LONG_FILES, key=LONG_FILES.get, reverse=True))}

    def key(item):
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank))

    items[:] = sorted(items, key=key)  # sorted() is stable: the rest keep their order


def shared_dir(tmp_path_factory, name: str) -> Path:
    """A folder shared by every worker of this test run (``pytest -n``: the workers' common base), so
    the end-to-end work behind it is done once per run, not once per worker or per file."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / name


def once_per_run(tmp_path_factory, name: str, make):
    """``make(folder)``'s result, computed by the first worker that asks and read back by the others (a
    file lock: a second worker waits while the first computes). The result must pickle."""
    import pickle

    from filelock import FileLock

    folder = shared_dir(tmp_path_factory, name)
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "result.pickle"
    with FileLock(str(folder) + ".lock"):
        if done.exists():
            return pickle.loads(done.read_bytes())
        result = make(folder)
        done.write_bytes(pickle.dumps(result))
        return result


@pytest.fixture(scope="session")
def tiny_all(tmp_path_factory):
    """The whole tiny profile from scratch, once for the whole test run (in-process: one transformers
    import). Read-only for the tests: copy what you change."""
    from rankcollapse.pipeline import ReproduceConfig, reproduce

    return once_per_run(
        tmp_path_factory,
        "reproduce_tiny",
        lambda folder: reproduce(ReproduceConfig(folder / "out", profile="tiny", workers=1, progress=False)),
    )


@pytest.fixture
def one_thread():
    """torch on one intra-op thread for the test, restored after (small tensors: on a shared 2-core box
    more threads only contend). A folder makes it autouse in its own conftest."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
