"""The sweep engine: grid expansion, run identity, skip-finished, failures, tidy table, executors, kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.engine.executors import run_sweep
from rankcollapse.experiments.engine.grid import expand_grid, make_runs, run_identity
from rankcollapse.experiments.engine.store import RunStore, collect_table, write_tables


def toy_runs(experiment: str = "toy", rates=(0.5, 0.9), seeds=(0, 1), layers: int = 4, **base):
    grid = {"rate": list(rates), "seed": list(seeds)}
    return make_runs(experiment, "toy", {"layers": layers, **base}, grid)


def test_expand_grid_is_the_cartesian_product_with_last_axis_fastest():
    points = expand_grid({"d": 2}, {"mask": ["causal", "complete"], "seed": [0, 1, 2]})
    assert len(points) == 6
    assert points[0] == {"d": 2, "mask": "causal", "seed": 0}
    assert points[1] == {"d": 2, "mask": "causal", "seed": 1}
    assert points[3] == {"d": 2, "mask": "complete", "seed": 0}
    assert expand_grid({"d": 2}, {}) == [{"d": 2}]


def test_expand_grid_rejects_an_empty_or_scalar_axis():
    with pytest.raises(RankCollapseError, match="seed"):
        expand_grid({}, {"seed": []})
    with pytest.raises(RankCollapseError, match="mask"):
        expand_grid({}, {"mask": "causal"})


def test_run_identity_ignores_key_order_and_changes_with_any_value():
    a = run_identity("e", "toy", {"x": 1, "y": [1, 2], "seed": 0})
    assert a == run_identity("e", "toy", {"seed": 0, "y": [1, 2], "x": 1})
    assert len(a) == 12
    assert a != run_identity("e", "toy", {"x": 1, "y": [1, 2], "seed": 1})
    assert a != run_identity("f", "toy", {"x": 1, "y": [1, 2], "seed": 0})
    assert a != run_identity("e", "toy", {"x": 1.5, "y": [1, 2], "seed": 0})


def test_facts_enter_the_identity_only_when_there_are_some():
    params = {"x": 1, "seed": 0}
    assert run_identity("e", "toy", params, {}) == run_identity("e", "toy", params)  # stored runs keep theirs
    assert run_identity("e", "toy", params, {"weights": "mpnet"}) != run_identity("e", "toy", params)
    a = make_runs("e", "toy", {}, {"seed": [0]}, facts=lambda p: {"weights": "mpnet"})
    b = make_runs("e", "toy", {}, {"seed": [0]}, facts=lambda p: {"weights": "bert-base-uncased"})
    assert a[0].params == b[0].params and a[0].run_id != b[0].run_id and a[0].facts == {"weights": "mpnet"}


def test_a_pretrained_run_is_keyed_on_the_weights_it_loads(monkeypatch):
    """``paper:<ckpt>`` runs carry the resolved weights in their identity: once the real checkpoint is
    cached, the stand-in's stored results are not reused for it."""
    import rankcollapse.models.registry as registry
    from rankcollapse.experiments.kit.tasks.curves import model_facts
    from rankcollapse.experiments.stories import load_experiments

    exp = load_experiments("quick", ["fig8"])[0]
    before = {r.params["model"]: r for r in exp.runs()}
    stand_in = before["paper:bert-base-uncased"]
    assert stand_in.facts == model_facts(stand_in.params) and stand_in.facts["weights"] != "bert-base-uncased"
    assert before["random:bert-base-uncased"].facts == {}
    fake = registry.ModelSource(name="bert-base-uncased", kind="paper", label="bert-base-uncased")
    monkeypatch.setattr(registry, "hf_cached", lambda hub: True)
    monkeypatch.setattr(registry, "resolve_model", lambda name: fake)
    after = {r.params["model"]: r for r in exp.runs()}
    assert after["paper:bert-base-uncased"].facts == {"weights": "bert-base-uncased"}
    assert after["paper:bert-base-uncased"].run_id != stand_in.run_id
    assert after["random:bert-base-uncased"].run_id == before["random:bert-base-uncased"].run_id


def test_make_runs_keeps_duplicate_points_once():
    runs = make_runs("e", "toy", {"layers": 2}, {"rate": [0.5, 0.5], "seed": [0]})
    assert len(runs) == 1
    assert runs[0].axes == ("rate", "seed")
    assert runs[0].seed == 0


def test_second_sweep_skips_every_finished_run(tmp_path):
    runs = toy_runs()
    first = run_sweep(runs, tmp_path, workers=1, progress=False)
    assert (first.finished, first.skipped, first.failed) == (4, 0, 0)
    marker = RunStore(tmp_path)._paths(runs[0])[1]
    before = marker.stat().st_mtime_ns
    second = run_sweep(runs, tmp_path, workers=1, progress=False)
    assert (second.finished, second.skipped) == (0, 4)
    assert marker.stat().st_mtime_ns == before


def test_failed_runs_are_recorded_not_stored_and_retried(tmp_path):
    runs = make_runs("e", "toy", {"layers": 2, "rate": 0.5}, {"fail": [False, True]})
    summary = run_sweep(runs, tmp_path, workers=1, progress=False)
    assert (summary.finished, summary.failed) == (1, 1)
    assert "asked to fail" in summary.failures[0][1]
    again = run_sweep(runs, tmp_path, workers=1, progress=False)
    assert (again.skipped, again.failed) == (1, 1)  # the failed one is tried again
    table = collect_table(tmp_path)
    assert set(table["fail"]) == {False}


def test_tidy_table_has_identity_params_and_one_row_per_layer(tmp_path):
    runs = toy_runs(layers=3)
    run_sweep(runs, tmp_path, workers=1, progress=False)
    runs_csv, index_csv = write_tables(tmp_path)
    table = pd.read_csv(runs_csv)
    assert list(table.columns[:3]) == ["run_id", "experiment", "task"]
    assert {"layers", "rate", "seed", "layer", "mu", "log_mu"} <= set(table.columns)
    assert len(table) == 4 * 4
    assert not table.duplicated(["run_id", "layer"]).any()
    one = table[(table.rate == 0.5) & (table.seed == 1)].sort_values("layer")
    assert one["mu"].tolist() == pytest.approx([1, 0.5, 0.25, 0.125])
    index = pd.read_csv(index_csv)
    assert len(index) == 4 and set(index["status"]) == {"ok"}
    assert "summary.final_mu" in index.columns
    record = json.loads(RunStore(tmp_path)._paths(runs[0])[1].read_text())
    assert record["seed"] == runs[0].seed and "torch" in record["versions"]


def test_process_pool_gives_the_same_table_as_in_process(tmp_path):
    runs = toy_runs()
    run_sweep(runs, tmp_path / "inline", workers=1, progress=False)
    summary = run_sweep(runs, tmp_path / "pool", workers=2, progress=False)
    assert summary.finished == 4
    key = ["run_id", "layer"]
    a = collect_table(tmp_path / "inline").sort_values(key).reset_index(drop=True)
    b = collect_table(tmp_path / "pool").sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("processes,n_workers", [(False, 1), (True, 2)])
def test_dask_executor_gives_the_same_table_as_local(tmp_path, processes, n_workers):
    distributed = pytest.importorskip("distributed")
    runs = toy_runs()
    run_sweep(runs, tmp_path / "local", workers=1, progress=False)
    with distributed.LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=None
    ) as cluster:
        summary = run_sweep(
            runs, tmp_path / "dask", executor="dask", scheduler=cluster.scheduler_address, progress=False
        )
    assert summary.finished == 4
    key = ["run_id", "layer"]
    a = collect_table(tmp_path / "local").sort_values(key).reset_index(drop=True)
    b = collect_table(tmp_path / "dask").sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_dask_without_scheduler_and_unknown_executor_are_user_errors(tmp_path):
    with pytest.raises(RankCollapseError, match="--scheduler"):
        run_sweep(toy_runs(), tmp_path, executor="dask", progress=False)
    with pytest.raises(RankCollapseError, match="allowed: local, dask"):
        run_sweep(toy_runs(), tmp_path, executor="ray", progress=False)


_SWEEP_SCRIPT = textwrap.dedent(
    """
    import sys
    from rankcollapse.experiments.engine.executors import run_sweep
    from rankcollapse.experiments.engine.grid import make_runs
    from rankcollapse.experiments.engine.store import write_tables
    if __name__ == "__main__":
        runs = make_runs("kill", "toy", {"layers": 3, "sleep_s": 0.05},
                         {"rate": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], "seed": [0]})
        run_sweep(runs, sys.argv[1], workers=int(sys.argv[2]), progress=False)
        write_tables(sys.argv[1])
    """
)


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_mid_sweep_loses_no_finished_run_and_rerun_completes(tmp_path, workers):
    out = tmp_path / "out"
    script = tmp_path / "sweep.py"
    script.write_text(_SWEEP_SCRIPT)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out), str(workers)], env=env, start_new_session=True
    )
    markers = out / "runs" / "kill"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(markers.glob("*.json"))) < 2:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and any pool workers it started
    proc.wait()
    finished = {p.stem for p in markers.glob("*.json")}
    assert 2 <= len(finished) < 8, "the kill should land mid-sweep"
    for stem in finished:  # every finished run is complete on disk
        assert len(pd.read_csv(markers / f"{stem}.csv")) == 4
    subprocess.run([sys.executable, str(script), str(out), str(workers)], env=env, check=True, timeout=120)
    table = pd.read_csv(out / "runs.csv")
    assert table["run_id"].nunique() == 8
    assert len(table) == 8 * 4
    assert not table.duplicated(["run_id", "layer"]).any()
    assert not list(markers.glob(".*tmp"))
    assert not list(out.glob(".*tmp"))


def test_ctrl_c_on_the_cli_exits_130_keeps_finished_runs_and_rerun_completes(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "slow_toy.yaml").write_text(
        textwrap.dedent(
            """
        name: slow_toy
        title: toy runs that take a while
        task: toy
        base: {layers: 3, sleep_s: 0.1}
        grid: {rate: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], seed: [0]}
        """
        )
    )
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "rankcollapse",
        "reproduce",
        "--config-dir",
        str(configs),
        "--full",
        "--workers",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    markers = out / "runs" / "slow_toy"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(markers.glob("*.json"))) < 2:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    done = len(list(markers.glob("*.json")))
    assert 2 <= done < 8
    lines = err.strip().splitlines()  # the estimate printed before the sweep, then one line for the interrupt
    assert lines[-1] == f"rankcollapse: interrupted; {done} finished runs kept in {out}"
    assert len(lines) == 2 and "estimated" in lines[0]
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{done} already finished" in rerun.stdout
    table = pd.read_csv(out / "runs.csv")
    assert table["run_id"].nunique() == 8 and not table.duplicated(["run_id", "layer"]).any()


@pytest.mark.slow
def test_dask_reproduce_of_a_model_slice_gives_the_local_rows_to_the_bit(tmp_path):
    """A model story's slice (Fig. 2 on tiny:bert, float32 and float64) on a LocalCluster of 2 worker
    processes: the same runs.csv as the local pool, bit for bit, and the same verdicts (each worker runs
    with the local pool's thread count, so every reduction runs in the same order)."""
    import os

    from rankcollapse.pipeline import ReproduceConfig, reproduce

    distributed = pytest.importorskip("distributed")
    threads = str(max(1, (os.cpu_count() or 1) // 2))
    local = reproduce(
        ReproduceConfig(tmp_path / "local", profile="tiny", only=["fig2.paper"], workers=2, progress=False)
    )
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, env=env
    ) as cluster:
        dask = reproduce(
            ReproduceConfig(
                tmp_path / "dask",
                profile="tiny",
                only=["fig2.paper"],
                executor="dask",
                scheduler=cluster.scheduler_address,
                progress=False,
            )
        )
    assert dask.sweep.finished == local.sweep.finished > 0 and dask.sweep.failed == 0
    key = ["run_id", "row"]
    a = pd.read_csv(tmp_path / "local" / "runs.csv").sort_values(key).reset_index(drop=True)
    b = pd.read_csv(tmp_path / "dask" / "runs.csv").sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert [(c.id, c.verdict) for c in dask.claims] == [(c.id, c.verdict) for c in local.claims]


def test_a_grid_too_large_is_refused_before_it_is_expanded() -> None:
    """A 3 KB YAML grid named 1.6e9 runs and died with MemoryError while expanding: its size is the
    product of its axes, checked first."""
    from rankcollapse.edge.errors import RankCollapseError
    from rankcollapse.experiments.engine.grid import MAX_GRID_RUNS, expand_grid

    huge = {f"axis{i}": list(range(12)) for i in range(9)}  # 12^9 = 5.2e9 runs
    with pytest.raises(RankCollapseError, match=r"the grid names 5.16e\+09 runs"):
        expand_grid({}, huge)
    assert len(expand_grid({}, {"a": list(range(MAX_GRID_RUNS))})) == MAX_GRID_RUNS


def test_a_sweep_whose_every_run_failed_is_one_line_exit_2_and_never_complete(tmp_path, capsys) -> None:
    """It exited 0 and marked its folder complete (a report of nothing, looking finished)."""
    from rankcollapse.cli.main import main
    from rankcollapse.edge.folder import is_complete

    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "broken.yaml").write_text(
        "title: every run fails\ntask: toy\nbase: {layers: 2, rate: 0.5, fail: true}\ngrid: {seed: [0, 1]}\n"
    )
    out = tmp_path / "out"
    argv = ["reproduce", "--config-dir", str(configs), "--workers", "1", "--no-progress", "--out", str(out)]
    code = main(argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1 and "every one of the 2 runs failed" in errors[0], errors
    assert not is_complete(out)


def _copy_record(store: RunStore, src, dst, *, with_csv: bool = False, rename: bool = False) -> None:
    """Copy ``src``'s record (and CSV) over ``dst``'s, as a user tidying folders by hand might."""
    folder = store.runs_dir / src.experiment
    record = json.loads((folder / f"{src.run_id}.json").read_text())
    if rename:
        record["run_id"] = dst.run_id
    (folder / f"{dst.run_id}.json").write_text(json.dumps(record))
    if with_csv:
        (folder / f"{dst.run_id}.csv").write_bytes((folder / f"{src.run_id}.csv").read_bytes())


@pytest.mark.parametrize("how", ["copied", "copied with its CSV and its run id edited"])
def test_a_record_copied_under_another_runs_name_is_recomputed_never_trusted(tmp_path, capsys, how):
    """A run record copied under another run's name verified against its own CSV, so resume skipped the
    other run and the table held the first run's rows twice (a verdict changed). The record's identity is
    checked against the file and the grid point it is read for; a mismatch is computed again, said once."""
    specs = toy_runs(rates=(0.5, 0.9), seeds=(0,))
    half, most = sorted(specs, key=lambda s: s.params["rate"])
    run_sweep(specs, tmp_path, workers=1, progress=False)
    store = RunStore(tmp_path)
    _copy_record(store, half, most, with_csv=how != "copied", rename=how != "copied")
    capsys.readouterr()
    assert not store.is_done(most) and store.is_done(half)
    assert "is not the record of its run" in (store.misfiled(most) or "")
    table = collect_table(tmp_path)
    assert sorted(table.groupby("run_id").size().tolist()) == [5]  # the copy is read as no record at all
    summary = run_sweep(specs, tmp_path, workers=1, progress=False)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert (summary.skipped, summary.finished) == (1, 1)
    assert len(warnings) == 1 and f"{most.run_id}.json is not the record of its run" in warnings[0]
    table = collect_table(tmp_path)
    final = table[table["layer"] == 4].set_index("rate")["mu"]
    assert final.to_dict() == pytest.approx({0.5: 0.5**4, 0.9: 0.9**4}, rel=1e-12)
    assert store.is_done(most) and store.misfiled(most) is None


def test_a_record_with_another_grid_points_params_is_not_that_runs() -> None:
    """The spec's own identity is compared too: a record whose params are not the spec's is refused even
    where its file name and hash agree (a record edited by hand, or a grid whose hash collided)."""
    from rankcollapse.experiments.engine.store import identity_problem

    half, most = toy_runs(rates=(0.5, 0.9), seeds=(0,))
    record = {"run_id": most.run_id, "experiment": "toy", "task": "toy", "params": dict(half.params)}
    assert "params" in (identity_problem(record, most) or "")
    assert identity_problem({**record, "params": dict(most.params)}, most) is None
    assert "task" in (identity_problem({**record, "params": dict(most.params), "task": "other"}, most) or "")


#: A library's error as transformers writes them: a line, then a table (the run's reason was its last row).
_TABLE_ERROR = "weights could not be loaded\n| key | status |\n|-----|--------|\n| h.0.attn | MISSING |"


def _raise_table(params, on_layer):
    raise ValueError(_TABLE_ERROR)


def test_a_failed_runs_reason_is_one_line_of_ours_and_its_record_keeps_the_library_text(tmp_path) -> None:
    """The reason was the traceback's last line: for a library's multi-line text (transformers' tables),
    a table row, or every row once flattened. It is now ``Type: first line``; the record keeps the rest."""
    from rankcollapse.experiments.engine.grid import RunSpec

    spec = RunSpec("e", "raises", {"seed": 0}, target=f"{__name__}:_raise_table")
    summary = run_sweep([spec], tmp_path, workers=1, progress=False)
    assert summary.failures == [(spec.run_id, "ValueError: weights could not be loaded")]
    record = json.loads((tmp_path / "runs" / "e" / f"{spec.run_id}.json").read_text())
    assert record["error"] == "ValueError: weights could not be loaded"
    assert "| h.0.attn | MISSING |" in record["error_detail"]


def test_dask_errors_are_one_line_of_ours(tmp_path, monkeypatch) -> None:
    """A worker that died (``KilledWorker``, with Dask's multi-line report) raised its traceback out of
    ``reproduce``; a scheduler lost mid-sweep did too. The first is a failed run with one line (the
    record keeps Dask's text), the second one RankCollapseError line; finished runs are kept."""
    import distributed

    specs = toy_runs(rates=(0.5, 0.9), seeds=(0,))

    class KilledWorkerError(Exception):
        pass

    died = "Attempted to run task on 3 different workers\nall of which died\nLast: w1"
    where = {"executor": "dask", "scheduler": "tcp://10.0.0.1:8786", "progress": False}

    class Fut:
        def __init__(self, key, value):
            self.key, self.value = key, value

        def result(self):
            if isinstance(self.value, Exception):
                raise self.value
            return self.value

    class Client:
        lose = False

        def __init__(self, *a, **k):
            pass

        def submit(self, fn, spec, key, pure):
            if spec.params["rate"] == 0.5:
                return Fut(key, KilledWorkerError(died))
            return Fut(key, fn(spec, on_layer=lambda t: None))

        def cancel(self, futures):
            pass

        def close(self):
            pass

    def arrived(futures):
        yield from futures[:1]
        if Client.lose:
            raise OSError("Timed out trying to connect to tcp://10.0.0.1:8786 after 30 s\nConnection refused")
        yield from futures[1:]

    monkeypatch.setattr(distributed, "Client", Client)
    monkeypatch.setattr(distributed, "as_completed", arrived)
    summary = run_sweep(specs, tmp_path / "a", **where)
    assert summary.finished == 1 and len(summary.failures) == 1
    reason = "Dask did not return it (KilledWorkerError: Attempted to run task on 3 different workers)"
    assert summary.failures[0][1] == reason
    Client.lose = True
    with pytest.raises(RankCollapseError) as err:
        run_sweep(specs, tmp_path / "b", **where)
    line = str(err.value)
    assert "\n" not in line and line.startswith("lost the Dask scheduler 'tcp://10.0.0.1:8786' mid-sweep")
    assert "OSError: Timed out" in line and "Connection refused" not in line
    assert len(RunStore(tmp_path / "b").records()) == 1  # the run that arrived first is kept
