"""rankcollapse.monitor: the values of a probe are analyze's on the same weights and inputs; a probe leaves
the model as it found it (mode, hooks, gradients), also when it fails; the loop and Trainer integrations
probe at the steps they say; a failure (no layers, no memory, a full disk, a broken logger) is one
warning line and the training runs to its end."""

from __future__ import annotations

import errno
import math
import sys

import pandas as pd
import pytest
import torch
from torch import nn

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, load_model
from rankcollapse.monitor import COLUMNS, DEFAULT_METRICS, DIAGNOSTICS, Monitor, MonitorConfig, find_layers

#: float32 forward through the model's own modules (SDPA or eager) against analyze's layer-by-layer
#: stream: the hidden states agree to a few float32 ulps, the metrics of them to this relative error.
RTOL, ATOL = 1e-5, 1e-6


def ids_for(vocab: int, b: int = 3, n: int = 12, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, vocab, (b, n), generator=torch.Generator().manual_seed(seed))


def tiny_gpt2_lm(seed: int = 0, layers: int = 2) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=layers, n_embd=32, n_head=2, vocab_size=300, n_positions=32, bos_token_id=0, eos_token_id=0
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config)


def by_layer(rows: list[dict], metric: str) -> dict[int, float]:
    return {r["layer"]: r["value"] for r in rows if r["metric"] == metric}


def assert_rows_equal_analyze(
    rows: list[dict],
    model: object,
    ids: torch.Tensor,
    names: tuple[str, ...],
    attention_mask: torch.Tensor | None = None,
    diagnostics: bool = False,
) -> None:
    """Each (layer, metric) of ``rows`` equals the row of ``analyze`` on the same model and ids."""
    ref = analyze(
        AnalyzeConfig(metrics=DEFAULT_METRICS, diagnostics=diagnostics),
        model=model,
        ids=ids,
        attention_mask=attention_mask,
    ).rows
    assert sorted({r["layer"] for r in rows}) == [r["layer"] for r in ref]
    for name in names:
        ours = by_layer(rows, name)
        for row in ref:
            if row["layer"] not in ours:
                assert name in DIAGNOSTICS[:4] and row["layer"] == 0  # no attention before layer 1
                continue
            assert ours[row["layer"]] == pytest.approx(row[name], rel=RTOL, abs=ATOL, nan_ok=True), (
                name,
                row["layer"],
            )
    hooks = {r["layer"]: r["hook"] for r in rows}
    assert [hooks[row["layer"]] for row in ref] == [row["hook"] for row in ref]


# ---- the values ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["gpt2", "bert", "albert", "llama"])
def test_a_probe_gives_analyzes_values_on_the_same_weights_and_inputs(arch):
    """Default metrics and every diagnostic, per layer, against analyze (which streams the layers
    itself and computes the attention from its parts); ALBERT's shared layer and Llama's rotary too."""
    loaded = load_model(f"tiny:{arch}", "float32", seed=0)
    ids = ids_for(loaded.vocab_size)
    monitor = Monitor(every=1, diagnostics=True)
    rows = monitor.measure(loaded.hf_model, ids, step=7)
    assert {r["step"] for r in rows} == {7}
    assert_rows_equal_analyze(rows, loaded, ids, DEFAULT_METRICS + DIAGNOSTICS, diagnostics=True)
    assert len({r["layer"] for r in rows}) == len(loaded.layers) + 1


def test_a_right_padded_batch_is_measured_on_each_samples_real_tokens():
    loaded = load_model("tiny:bert", "float32", seed=0)
    ids = ids_for(loaded.vocab_size, b=3, n=10)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    rows = Monitor(every=1, diagnostics=True).measure(
        loaded.hf_model, {"input_ids": ids, "attention_mask": mask}
    )
    assert_rows_equal_analyze(
        rows, loaded, ids, DEFAULT_METRICS + DIAGNOSTICS, attention_mask=mask, diagnostics=True
    )
    plain = Monitor(every=1).measure(loaded.hf_model, ids)  # the padding changes the values: it was used
    assert by_layer(plain, "mu_rel")[2] != pytest.approx(by_layer(rows, "mu_rel")[2], rel=1e-4)


def test_a_model_with_a_head_is_measured_on_its_base_models_layers():
    model = tiny_gpt2_lm()
    ids = ids_for(300)
    rows = Monitor(every=1).measure(model, {"input_ids": ids, "labels": ids})  # labels are not read
    assert_rows_equal_analyze(rows, model, ids, DEFAULT_METRICS)
    assert [r["hook"] for r in rows if r["metric"] == "mu"] == [
        "blocks.0.hook_resid_pre",
        "blocks.0.hook_resid_post",
        "blocks.1.hook_resid_post",
    ]


# ---- what a probe leaves behind ------------------------------------------------------------------------
def hooks_on(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_a_probe_restores_every_modules_mode_and_leaves_no_hook_and_no_gradient():
    model = tiny_gpt2_lm()
    model.train()
    model.transformer.h[1].eval()  # a mixed state is restored module by module
    flags = [m.training for m in model.modules()]
    frozen = model.transformer.wte.weight
    frozen.requires_grad_(False)
    seen = []
    model.transformer.h[0].register_forward_hook(lambda m, a, o: seen.append(m.training))
    Monitor(every=1).measure(model, ids_for(300))
    assert seen == [False]  # the probe ran in eval mode (no dropout)
    assert [m.training for m in model.modules()] == flags
    assert hooks_on(model) == 1  # the user's own hook only
    assert all(p.grad is None for p in model.parameters())
    assert not frozen.requires_grad and model.transformer.h[0].attn.c_attn.weight.requires_grad


def test_a_probe_that_raises_still_removes_its_hooks_and_restores_the_mode_and_step_only_warns():
    model = tiny_gpt2_lm()
    model.train()

    def broken(module, args, output):
        raise RuntimeError("a layer that breaks during the probe")

    model.transformer.h[1].register_forward_hook(broken)
    monitor = Monitor(every=1)
    with pytest.raises(RankCollapseError, match=r"on the probe batch \(RuntimeError: a layer that breaks"):
        monitor.measure(model, ids_for(300))  # the model's own error, in one line of ours (issue 39)
    assert model.training and all(m.training for m in model.modules())
    assert hooks_on(model) == 1
    assert monitor.step(model, ids_for(300)) == []  # in the loop: one warning line, nothing raised
    assert monitor.failures == ["step 1: probe skipped (the forward of GPT2Model failed on the probe batch "
                                "(RuntimeError: a layer that breaks during the probe))"]
    assert model.training and hooks_on(model) == 1


def test_the_reductions_run_inside_the_hooks_while_the_forward_runs():
    """By the time the last layer runs, rows 0..L-1 are already numbers (no hidden state is kept)."""
    model = tiny_gpt2_lm(layers=3)
    monitor = Monitor(every=1)
    from rankcollapse.monitor import telemetry

    made: list[int] = []
    original = telemetry.Monitor._reduce

    def spy(self, state, x, attn):
        original(self, state, x, attn)
        made.append(len(state.rows))

    monitor._reduce = spy.__get__(monitor)
    last = []
    model.transformer.h[2].register_forward_pre_hook(lambda m, a: last.append(list(made)))
    monitor.measure(model, ids_for(300))
    k = len(DEFAULT_METRICS)
    assert last == [[k, 2 * k, 3 * k]]


# ---- the loop API --------------------------------------------------------------------------------------
def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> float:
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    return float(loss.detach())


def test_step_probes_every_k_steps_with_the_weights_of_that_step():
    model = tiny_gpt2_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    probe = ids_for(300, b=4, seed=5)
    monitor = Monitor(every=3, probe=probe)
    at_six = None
    for i in range(1, 8):
        train_step(model, opt, ids_for(300, b=4, seed=100 + i))
        rows = monitor.step(model, ids_for(300))
        assert bool(rows) == (i % 3 == 0)
        if i == 6:
            at_six = rows
            assert_rows_equal_analyze(rows, model, probe, DEFAULT_METRICS)  # the probe, not the batch given
    assert sorted({r["step"] for r in monitor.rows}) == [3, 6]
    assert monitor.to_frame().columns.tolist() == list(COLUMNS)
    assert by_layer(at_six, "mu_rel") != by_layer(monitor.rows[: len(at_six)], "mu_rel")  # the weights moved


def test_without_a_probe_step_measures_the_batch_it_is_given():
    model = tiny_gpt2_lm()
    batch = ids_for(300, seed=9)
    rows = Monitor(every=1).step(model, (batch, batch))  # (inputs, targets) as a plain loop holds them
    assert_rows_equal_analyze(rows, model, batch, DEFAULT_METRICS)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return x + self.mlp(x)


class PlainTransformer(nn.Module):
    """A transformer of plain PyTorch (no config, no family): embeddings, blocks, a head."""

    def __init__(self, vocab: int = 50, d: int = 16, depth: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_a_plain_pytorch_model_is_measured_at_its_one_list_of_layers():
    from rankcollapse.metrics import collapse_metrics

    torch.manual_seed(0)
    model = PlainTransformer()
    ids = ids_for(50, b=2, n=8)
    assert find_layers(model).modules == tuple(model.blocks)
    rows = Monitor(every=1, metrics="mu_rel,effective_rank").measure(model, ids)
    with torch.no_grad():  # the oracle: each block's output by hand
        states = [model.embed(ids)]
        for block in model.blocks:
            states.append(block(states[-1]))
    for t, x in enumerate(states):
        want = collapse_metrics(x, ("mu_rel", "effective_rank"))
        for name in want:
            assert by_layer(rows, name)[t] == pytest.approx(float(want[name].double().mean()), rel=RTOL)
    assert {r["hook"] for r in rows} == {""}  # TransformerLens has no name for these tensors


def test_layers_names_the_list_where_a_model_has_several():
    class Two(PlainTransformer):
        def __init__(self) -> None:
            super().__init__()
            self.extra = nn.ModuleList(nn.Linear(16, 16) for _ in range(3))

    with pytest.raises(RankCollapseError, match=r"several lists of 3 layers.*layers='path'"):
        find_layers(Two())
    model = Two()
    assert find_layers(model, "blocks").modules == tuple(model.blocks)
    with pytest.raises(RankCollapseError, match="has no module 'nope'"):
        find_layers(model, "nope")


# ---- the Trainer ---------------------------------------------------------------------------------------
def run_trainer(tmp_path, callback, epochs: int = 3, examples: int = 8, batch: int = 4):
    from transformers import Trainer, TrainingArguments

    model = tiny_gpt2_lm()
    ids = ids_for(300, b=examples, n=12, seed=3)
    data = [{"input_ids": row, "labels": row} for row in ids]
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        per_device_train_batch_size=batch,
        num_train_epochs=epochs,
        use_cpu=True,
        report_to=[],
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    trainer.train()
    return trainer, model, ids


def test_the_trainer_callback_probes_at_the_start_and_every_k_steps_with_analyzes_values(tmp_path):
    from rankcollapse.monitor import MonitorCallback

    callback = MonitorCallback(every=2, out=str(tmp_path / "telemetry"))
    trainer, model, ids = run_trainer(tmp_path, callback)  # 2 steps per epoch, 3 epochs: steps 1..6
    assert trainer.state.global_step == 6
    frame = callback.monitor.to_frame()
    assert sorted(frame["step"].unique()) == [0, 2, 4, 6]
    last = [r for r in callback.monitor.rows if r["step"] == 6]
    assert_rows_equal_analyze(last, model, ids[:4], DEFAULT_METRICS)  # the probe: the first 4 examples
    written = pd.read_csv(tmp_path / "telemetry" / "metrics.csv", keep_default_na=False)
    assert (
        written[["step", "layer", "metric"]].values.tolist()
        == frame[["step", "layer", "metric"]].values.tolist()
    )
    assert written["value"].to_numpy() == pytest.approx(frame["value"].to_numpy(), rel=1e-12)
    assert not callback.monitor.failures


def test_the_telemetry_does_not_change_the_training(tmp_path):
    """The same weights after training with the callback as without (dropout on: a probe runs in eval
    mode and draws nothing from the training's random stream)."""
    from transformers import TrainerCallback

    from rankcollapse.monitor import MonitorCallback

    _, watched, _ = run_trainer(tmp_path / "a", MonitorCallback(every=1))
    _, plain, _ = run_trainer(tmp_path / "b", TrainerCallback())
    assert watched.config.resid_pdrop > 0
    for (name, p), q in zip(watched.named_parameters(), plain.parameters(), strict=True):
        assert torch.equal(p, q), name


def test_the_trainer_callback_without_at_start_probes_at_k_2k_only(tmp_path):
    from rankcollapse.monitor import MonitorCallback

    callback = MonitorCallback(every=2, at_start=False)
    run_trainer(tmp_path, callback)
    assert sorted({r["step"] for r in callback.monitor.rows}) == [2, 4, 6]


def test_a_callback_whose_every_probe_fails_warns_once_and_the_training_runs_to_its_end(tmp_path, capsys):
    from rankcollapse.monitor import MonitorCallback

    callback = MonitorCallback(Monitor(every=1, probe={"pixel_values": torch.zeros(2, 3, 4)}))
    trainer, _, _ = run_trainer(tmp_path, callback)
    assert trainer.state.global_step == 6
    assert len(callback.monitor.failures) == 7 and not callback.monitor.rows  # steps 0..6
    lines = [
        line for line in capsys.readouterr().err.splitlines() if "rankcollapse: warning: monitor" in line
    ]
    assert len(lines) == 1 and "no input_ids" in lines[0]


# ---- bad input: one line, the training goes on ---------------------------------------------------------
def test_a_model_without_layers_is_one_warning_line_and_the_loop_runs_on(capsys):
    model = nn.Sequential(nn.Embedding(30, 8), nn.Linear(8, 30))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    monitor = Monitor(every=1)
    ids = ids_for(30, b=4, n=6)
    losses = []
    for _ in range(4):
        loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
        assert monitor.step(model, ids) == []
    assert losses[-1] < losses[0]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rankcollapse: warning: monitor: step 1: probe skipped")
    assert "has no list of layers" in err[0] and len(monitor.failures) == 4
    with pytest.raises(RankCollapseError, match="no list of layers"):
        monitor.measure(model, ids)  # on demand: the error itself


def test_a_probe_batch_that_does_not_fit_in_memory_is_refused_before_it_runs(monkeypatch, capsys):
    import rankcollapse.edge.validate as validate

    model = tiny_gpt2_lm()
    called = []
    model.transformer.h[0].register_forward_pre_hook(lambda m, a: called.append(1))
    monkeypatch.setattr(validate, "available_memory", lambda: 10_000)
    assert Monitor(every=1).step(model, ids_for(300)) == []
    err = capsys.readouterr().err
    assert "monitor probe of 3 x 12 tokens needs about" in err and "allowed: a smaller probe batch" in err
    assert not called


def test_an_allocation_failure_inside_the_probe_is_one_line(monkeypatch, capsys):
    model = tiny_gpt2_lm()
    model.train()

    def no_memory(module, args):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 68719476736 bytes.\nmore text"
        )

    model.transformer.h[1].register_forward_pre_hook(no_memory)
    monitor = Monitor(every=1)
    assert monitor.step(model, ids_for(300)) == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not fit in memory" in err[0]
    assert model.training and hooks_on(model) == 1


def test_a_disk_that_fills_switches_the_csv_off_in_one_line_and_keeps_every_row(
    tmp_path, monkeypatch, capsys
):
    from rankcollapse.edge.runs import RunWriter

    written = []
    original = RunWriter.write_row

    def filling(self, row):
        if len(written) >= 2 * len(DEFAULT_METRICS) * 3:  # the disk fills during the third probe
            raise OSError(errno.ENOSPC, "No space left on device", str(self.partial_path))
        written.append(row)
        original(self, row)

    monkeypatch.setattr(RunWriter, "write_row", filling)
    model = tiny_gpt2_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = tmp_path / "telemetry"
    with Monitor(every=1, out=str(out)) as monitor:
        for _ in range(5):
            train_step(model, opt, ids_for(300))
            monitor.step(model, ids_for(300))
    assert sorted({r["step"] for r in monitor.rows}) == [1, 2, 3, 4, 5]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CSV in" in err[0] and "switched off at step 3" in err[0]
    assert "No space left on device (ENOSPC)" in err[0] and "metrics.partial.csv" in err[0]
    kept = pd.read_csv(out / "metrics.partial.csv")  # what reached the disk, under the partial name
    assert sorted(kept["step"].unique()) == [1, 2] and not (out / "metrics.csv").exists()


def test_an_output_folder_that_is_not_ours_is_refused_at_construction(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RankCollapseError, match="non-empty folder that rankcollapse did not make"):
        Monitor(out=str(tmp_path))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"every": 0}, "every=0 is invalid"),
        ({"every": True}, "every=True is invalid"),
        ({"metrics": "mu,rank"}, "unknown; allowed: mu, mu_rel"),
        ({"sink_threshold": 0.5}, "applies only with diagnostics=True"),
        ({"sink_threshold": 2.0, "diagnostics": True}, "sink_threshold=2.0 is invalid"),
        ({"layers": ""}, "layers='' is invalid"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(fields, message):
    with pytest.raises(RankCollapseError, match=message.replace("(", r"\(")):
        MonitorConfig(**fields)


def test_diagnostics_on_a_model_we_do_not_dissect_are_one_line_and_the_metrics_go_on():
    torch.manual_seed(0)
    with pytest.raises(RankCollapseError, match="diagnostics need the attention weights"):
        Monitor(every=1, diagnostics=True).measure(PlainTransformer(), ids_for(50, b=2, n=8))


# ---- the sinks -----------------------------------------------------------------------------------------
class FakeWriter:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))


class FakeRun:
    def __init__(self, fail_at: int | None = None) -> None:
        self.logged: list[tuple[dict, int]] = []
        self.fail_at = fail_at

    def log(self, data: dict, step: int) -> None:
        if step == self.fail_at:
            raise ConnectionError("the logging service went away")
        self.logged.append((data, step))


def test_tensorboard_and_wandb_get_every_row_as_a_scalar_and_a_failing_one_is_switched_off(capsys):
    model = tiny_gpt2_lm()
    writer, run = FakeWriter(), FakeRun(fail_at=2)
    monitor = Monitor(every=1, tensorboard=writer, wandb=run)
    for step in (1, 2, 3):
        monitor.measure(model, ids_for(300), step=step)
    rows = monitor.rows
    assert writer.scalars == [
        (f"rankcollapse/{r['metric']}/{r['hidden_state']}", r["value"], r["step"]) for r in rows
    ]
    assert [s for _, s in run.logged] == [1]
    assert run.logged[0][0]["rankcollapse/mu_rel/layer_2_out"] == by_layer(rows, "mu_rel")[2]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "wandb scalars switched off at step 2 (ConnectionError" in err[0]


def _tensorboard_works() -> str:
    """'' where torch.utils.tensorboard imports (event files can be written and read back), else why not."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: F401
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except Exception as err:
        return f"torch.utils.tensorboard cannot be imported here ({type(err).__name__}: {err})"
    return ""


@pytest.mark.skipif(bool(_tensorboard_works()), reason=_tensorboard_works() or "runs")
def test_a_tensorboard_log_folder_gets_an_event_file_that_reads_back_as_the_rows(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = tiny_gpt2_lm()
    with Monitor(every=1, tensorboard=tmp_path / "tb", metrics="mu_rel,effective_rank") as monitor:
        for step in (0, 5):
            monitor.measure(model, ids_for(300), step=step)
    (event_file,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    events = EventAccumulator(str(event_file))
    events.Reload()
    rows = monitor.rows
    assert sorted(events.Tags()["scalars"]) == sorted({f"rankcollapse/{r['metric']}/{r['hidden_state']}"
                                                       for r in rows})
    for r in rows:
        (got,) = [e for e in events.Scalars(f"rankcollapse/{r['metric']}/{r['hidden_state']}")
                  if e.step == r["step"]]
        assert got.value == pytest.approx(r["value"], rel=1e-6)  # stored as float32
    assert monitor.failures == []


def test_a_tensorboard_folder_without_torch_utils_tensorboard_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # its import fails, as unpackaged
    with pytest.raises(RankCollapseError) as err:
        Monitor(every=1, tensorboard=str(tmp_path / "tb"))
    text = str(err.value)
    assert text.startswith(f"tensorboard='{tmp_path / 'tb'}' needs torch.utils.tensorboard")
    assert "\n" not in text
    assert "allowed: install it, or leave tensorboard out" in text and not (tmp_path / "tb").exists()


class FakeWandb:
    """The part of the wandb module a monitor uses: ``init(dir=, mode=, ...)`` gives a run that logs and
    finishes."""

    def __init__(self) -> None:
        self.inits: list[dict] = []
        self.run = FakeRun()
        self.run.finished = False

        def finish() -> None:
            self.run.finished = True

        self.run.finish = finish

    def init(self, **kwargs):
        self.inits.append(kwargs)
        return self.run


def test_a_wandb_folder_starts_an_offline_run_there_that_gets_every_row_and_is_finished(tmp_path,
                                                                                        monkeypatch):
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    model = tiny_gpt2_lm()
    with Monitor(every=1, wandb=tmp_path / "wb", metrics="mu_rel") as monitor:
        monitor.measure(model, ids_for(300), step=3)
        assert not fake.run.finished
    (init,) = fake.inits
    assert init["dir"] == str(tmp_path / "wb") and init["mode"] == "offline"
    assert init["config"]["monitor"]["metrics"] == ("mu_rel",)
    ((logged, step),) = fake.run.logged
    assert step == 3
    assert logged == {f"rankcollapse/mu_rel/{r['hidden_state']}": r["value"] for r in monitor.rows}
    assert fake.run.finished  # the offline run is complete: wandb sync uploads it


@pytest.mark.parametrize("given", [True, "wandb-runs"])
def test_wandb_without_the_package_is_refused_in_one_line(given, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(RankCollapseError) as err:
        Monitor(every=1, wandb=given)
    text = str(err.value)
    assert text.startswith(f"wandb={given!r} needs the wandb package") and "\n" not in text


@pytest.mark.parametrize(("option", "value"), [("tensorboard", 3), ("wandb", 2.5)])
def test_a_scalar_sink_of_another_type_is_refused_in_one_line(option, value):
    with pytest.raises(RankCollapseError, match=f"{option}={type(value).__name__} is invalid; allowed: "):
        Monitor(every=1, **{option: value})


def test_csv_and_parquet_hold_the_rows_of_the_frame(tmp_path):
    pytest.importorskip("pyarrow")
    model = tiny_gpt2_lm()
    with Monitor(every=1, out=str(tmp_path / "t"), metrics="mu_rel,num_rank") as monitor:
        monitor.measure(model, ids_for(300), step=0)
    frame = monitor.to_frame()
    back = pd.read_parquet(tmp_path / "t" / "metrics.parquet")
    pd.testing.assert_frame_equal(back, frame)
    assert set(frame["metric"]) == {"mu_rel", "num_rank"} and len(frame) == 2 * 3
    assert all(math.isfinite(v) for v in frame["value"])


def test_plot_monitor_draws_a_panel_per_metric_and_refuses_an_absent_one(tmp_path):
    from rankcollapse.monitor import plot_monitor

    model = tiny_gpt2_lm()
    monitor = Monitor(every=1, metrics="mu_rel,effective_rank")
    for step in (0, 1):
        monitor.measure(model, ids_for(300), step=step)
    fig = plot_monitor(monitor, tmp_path / "m.png")
    assert (tmp_path / "m.png").stat().st_size > 0
    assert [ax.get_title() for ax in fig.axes[:2]][1] == "effective rank"
    with pytest.raises(RankCollapseError, match=r"'sink_rate'.* not in the rows"):
        plot_monitor(monitor, metrics=["sink_rate"])


def test_in_multi_process_training_only_the_main_process_probes_and_writes(tmp_path):
    from types import SimpleNamespace

    from rankcollapse.monitor import MonitorCallback

    model = tiny_gpt2_lm()
    probe = ids_for(300)
    for main, probes in ((False, []), (True, [0, 2])):
        callback = MonitorCallback(Monitor(every=2, probe=probe, out=str(tmp_path / f"main{main}")))
        state = SimpleNamespace(global_step=0, is_world_process_zero=main)
        args = SimpleNamespace(per_device_train_batch_size=2)
        callback.on_train_begin(args, state, None, model=model)
        for step in (1, 2):
            state.global_step = step
            callback.on_step_end(args, state, None, model=model)
        callback.on_train_end(args, state, None)
        assert sorted({r["step"] for r in callback.monitor.rows}) == probes
        assert (tmp_path / f"main{main}" / "metrics.csv").exists() == main
