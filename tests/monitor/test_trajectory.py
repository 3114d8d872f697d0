"""monitor.trajectory: the probed values are the metrics of the model's own hidden states, recomputed by
hand from a plain reference forward (decoder and encoder); the encoder's masked-language loss counts the
masked positions only; a seed reproduces itself bit for bit; a bad config is one line."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics import diagnostics as dg
from rankcollapse.metrics import measures
from rankcollapse.monitor.trajectory import (
    IGNORED,
    MASK_TOKEN,
    VARIANTS,
    ByteLM,
    TrajectoryConfig,
    excerpts,
    train_trajectory,
    training_pair,
)

TINY = dict(layers=2, d=8, heads=2, tokens=12, batch=4, steps=4, warmup=2, every=2, probe=3, lr=0.01)


def _ln(x: torch.Tensor) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5)


def _reference_states(model, ids: torch.Tensor, variant: str, mask: torch.Tensor):
    """Hidden states X(0..L) [b, n, d] and attention [b, h, n, n] per layer, written out by hand
    (module docstring of monitor.trajectory), independent of dynamics.layers."""
    x = model.embed[ids] + model.position[: ids.shape[1]]
    states, attns = [x], []
    for blk in model.blocks:
        e = blk.w_q.shape[-1]

        def attn(z, blk=blk, e=e):
            q = torch.einsum("bnd,hde->bhne", z, blk.w_q)
            k = torch.einsum("bnd,hde->bhne", z, blk.w_k)
            v = torch.einsum("bnd,hde->bhne", z, blk.w_v)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(e)
            a = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
            attns.append(a)
            return torch.einsum("bhne,hed->bnd", a @ v, blk.w_o)

        def mlp(z, blk=blk):
            return torch.nn.functional.gelu(z @ blk.w_1) @ blk.w_2

        if variant == "post-ln":
            y = _ln(x + attn(x))
            x = _ln(y + mlp(y))
        elif variant == "pre-ln":
            y = x + attn(_ln(x))
            x = y + mlp(_ln(y))
        elif variant == "no-ln":
            y = x + attn(x)
            x = y + mlp(y)
        else:  # no-skip
            y = _ln(attn(x))
            x = _ln(mlp(y))
        states.append(x)
    return states, attns


def _check_against_reference(cfg: TrajectoryConfig):
    """Train ``cfg`` and compare its last probe with the reference forward; returns (run, its rows)."""
    run = train_trajectory(cfg)
    assert run.failures == []
    assert sorted(run.frame["step"].unique()) == [0, 2, 4]
    with torch.no_grad():
        states, attns = _reference_states(run.model, run.probe, cfg.variant, cfg.mask_dense)
    at = run.frame[run.frame["step"] == cfg.steps]

    def got(metric: str, t: int) -> float:
        return float(at[(at["metric"] == metric) & (at["layer"] == t)]["value"].iloc[0])

    for t, x in enumerate(states):
        mu = torch.linalg.vector_norm(x - x.mean(1, keepdim=True), dim=(1, 2))
        rel = mu / torch.linalg.vector_norm(x, dim=(1, 2))
        s = torch.linalg.svdvals(x)
        p = s / s.sum(-1, keepdim=True)
        erank = torch.exp(-(p * torch.log(p)).sum(-1))
        u = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        cos = (u @ u.transpose(1, 2)).abs()
        n = x.shape[1]
        mean_cos = (cos.sum((1, 2)) - n) / (n * (n - 1))
        assert got("mu_rel", t) == pytest.approx(float(rel.mean()), rel=1e-9)
        assert got("effective_rank", t) == pytest.approx(float(erank.mean()), rel=1e-9)
        assert got("mean_abs_cos", t) == pytest.approx(float(mean_cos.mean()), rel=1e-9)
        assert got("mu_rel", t) == pytest.approx(float(measures.mu_rel(x).mean()), rel=1e-9)
        if t >= 1:
            a = attns[t - 1]
            first = a[..., 0].mean(-1)  # [b, h]: mean over queries of A_i0
            assert got("first_token_attention", t) == pytest.approx(float(first.mean()), rel=1e-9)
            assert got("sink_rate", t) == pytest.approx(float(dg.sink_rate(a).mean()), abs=1e-12)
            assert bool((a[..., cfg.mask_dense.logical_not()] == 0).all())  # the mask is applied
    return run, at


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_probed_values_equal_the_metrics_of_the_reference_hidden_states(variant):
    cfg = TrajectoryConfig(variant=variant, mask="causal-window:w=4", dtype="float64", **TINY)
    _, at = _check_against_reference(cfg)
    # the window bounds the first-token attention averaged over queries by (W + 1) / n
    first = at[at["metric"] == "first_token_attention"]["value"].dropna()
    assert (first <= 5 / cfg.tokens + 1e-12).all()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("mask", ["complete", "window:w=3"])
def test_an_encoders_probed_values_equal_the_metrics_of_the_reference_hidden_states(variant, mask):
    cfg = TrajectoryConfig(architecture="encoder", variant=variant, mask=mask, dtype="float64", **TINY)
    run, _ = _check_against_reference(cfg)
    assert run.model.embed.shape[0] == 258  # the bytes, the start token and [MASK]
    # bidirectional: a later token changes an earlier token's state at the first block's output
    ids = run.probe[:1].clone()
    other = ids.clone()
    other[0, 2] = (other[0, 2] + 1) % 256
    with torch.no_grad():
        a = _reference_states(run.model, ids, variant, cfg.mask_dense)[0][1]
        b = _reference_states(run.model, other, variant, cfg.mask_dense)[0][1]
    assert not torch.allclose(a[0, 1], b[0, 1])


def test_a_decoders_earlier_tokens_do_not_see_a_later_one():
    cfg = TrajectoryConfig(dtype="float64", **TINY)
    model = ByteLM(cfg, torch.Generator().manual_seed(0))
    ids = torch.randint(256, (1, cfg.tokens), generator=torch.Generator().manual_seed(1))
    other = ids.clone()
    other[0, 5] = (other[0, 5] + 1) % 256
    with torch.no_grad():
        a, b = model(ids), model(other)
    assert torch.equal(a[0, :5], b[0, :5]) and not torch.allclose(a[0, 5], b[0, 5])


def test_the_encoders_loss_is_the_cross_entropy_of_the_masked_positions_only():
    cfg = TrajectoryConfig(architecture="encoder", mask_rate=0.3, dtype="float64", **TINY)
    model = ByteLM(cfg, torch.Generator().manual_seed(0))
    ids = excerpts(torch.arange(500) % 256, 6, cfg.tokens, torch.Generator().manual_seed(2))
    inputs, targets = training_pair(ids, cfg, torch.Generator().manual_seed(3))
    chosen = targets != IGNORED
    assert chosen.any() and not chosen[:, 0].any()  # the start token is never masked
    assert torch.equal(inputs[chosen], torch.full_like(inputs[chosen], MASK_TOKEN))
    clean = ids[:, :-1]
    assert torch.equal(inputs[~chosen], clean[~chosen]) and torch.equal(targets[chosen], clean[chosen])
    share = float(chosen[:, 1:].double().mean())
    assert 0.1 < share < 0.5  # about mask_rate of the positions after the start token
    from rankcollapse.monitor.trajectory import _loss

    with torch.no_grad():
        logp = torch.log_softmax(model(inputs), -1)  # [b, n, v]
        by_hand = -logp[chosen].gather(-1, targets[chosen][:, None]).mean()
        assert float(_loss(model, (inputs, targets))) == pytest.approx(float(by_hand), rel=1e-6)  # float32 CE
    # a decoder's pair is the excerpt and the excerpt shifted by one byte
    dec = TrajectoryConfig(**TINY)
    x, y = training_pair(ids, dec, torch.Generator())
    assert torch.equal(x, ids[:, :-1]) and torch.equal(y, ids[:, 1:])


def test_an_encoder_trains_its_masked_language_loss_down():
    run = train_trajectory(TrajectoryConfig(architecture="encoder", **{**TINY, "steps": 30, "every": 10}))
    loss = run.loss.set_index("step")["probe_loss"]
    assert loss.loc[30] < loss.loc[0]
    assert run.config.mask == "complete" and run.config.mask_rate == 0.15


def test_training_moves_the_weights_and_lowers_the_probe_loss():
    run = train_trajectory(TrajectoryConfig(**{**TINY, "steps": 30, "every": 10, "lr": 0.01}))
    loss = run.loss.set_index("step")["probe_loss"]
    assert loss.loc[30] < loss.loc[0]
    assert math.isnan(run.loss["train_loss"].iloc[0]) and run.loss["train_loss"].iloc[1:].notna().all()


def test_a_seed_reproduces_itself_bit_for_bit_and_another_seed_differs():
    a = train_trajectory(TrajectoryConfig(seed=3, **TINY))
    b = train_trajectory(TrajectoryConfig(seed=3, **TINY))
    c = train_trajectory(TrajectoryConfig(seed=4, **TINY))
    assert a.frame.equals(b.frame) and a.loss.equals(b.loss)
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert torch.equal(a.probe, c.probe)  # one held-out probe for every network
    assert not a.frame["value"].equals(c.frame["value"])


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"variant": "post"}, "variant='post' is invalid; allowed: post-ln (transformer), pre-ln"),
        ({"mask": "complete"}, "lets a token see a later one; allowed: a causal mask"),
        ({"mask": "window:w=2"}, "lets a token see a later one"),
        ({"d": 10, "heads": 4}, "d=10 is not a multiple of heads=4"),
        ({"warmup": 50, "steps": 10}, "warmup=50 is longer than steps=10"),
        ({"every": 0}, "every=0 is invalid"),
        ({"lr": 0.0}, "lr=0.0 is invalid; allowed: a number in (0, 1]"),
        ({"lr": float("nan")}, "lr=nan is invalid"),
        ({"corpus": "novels"}, "corpus='novels' is invalid; allowed: wikipedia"),
        ({"dtype": "float16"}, "float16"),
        ({"steps": True}, "steps=True is invalid"),
        ({"architecture": "seq2seq"}, "architecture='seq2seq' is invalid; allowed: decoder, encoder"),
        ({"architecture": "encoder", "mask": "causal"}, "lets no token see a later one; allowed: a bidirect"),
        ({"mask_rate": 0.2}, "mask_rate=0.2 applies only to architecture='encoder'"),
        ({"architecture": "encoder", "mask_rate": 0.0}, "mask_rate=0.0 is invalid; allowed: a number in (0"),
    ],
)
def test_a_bad_config_is_one_line_naming_the_value(fields, words):
    with pytest.raises(RankCollapseError) as err:
        TrajectoryConfig(**fields)
    text = str(err.value)
    assert words in text and "\n" not in text


def test_a_probe_that_does_not_fit_is_one_line_and_the_training_runs_to_its_end(monkeypatch, capsys):
    import rankcollapse.monitor.telemetry as telemetry

    def no_memory(*args, **kwargs):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 68719476736 bytes.\nmore text"
        )

    monkeypatch.setattr(telemetry, "_run_probe", no_memory)  # no probe fits, from step 0 (the init) on
    run = train_trajectory(TrajectoryConfig(**{**TINY, "steps": 6, "every": 2}))
    assert run.frame.empty and list(run.loss["step"]) == [0, 2, 4, 6]  # every step trained, every loss kept
    assert len(run.failures) == 4 and all("probe skipped" in f and "\n" not in f for f in run.failures)
    err = [line for line in capsys.readouterr().err.splitlines() if "rankcollapse: warning: monitor" in line]
    assert len(err) == 1 and "probe skipped (RuntimeError" in err[0]  # each distinct message once


def test_a_config_that_is_not_one_is_refused_in_one_line():
    with pytest.raises(RankCollapseError, match="config must be a TrajectoryConfig"):
        train_trajectory({"variant": "pre-ln"})  # type: ignore[arg-type]


def test_diagnostics_from_a_models_own_attention_refuse_a_padded_batch_in_one_line():
    from rankcollapse.monitor import Monitor
    from rankcollapse.monitor.trajectory import ByteLM

    cfg = TrajectoryConfig(**TINY)
    model = ByteLM(cfg, torch.Generator().manual_seed(0))
    ids = torch.zeros(2, cfg.tokens, dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    monitor = Monitor(every=1, diagnostics=True)
    with pytest.raises(RankCollapseError, match="need an unpadded batch") as err:
        monitor.measure(model, {"input_ids": ids, "attention_mask": mask}, step=0)
    assert "\n" not in str(err.value)
    rows = monitor.measure(model, ids, step=1)  # unpadded: the diagnostics of its own attention
    sink = {r["layer"]: r["value"] for r in rows if r["metric"] == "sink_rate"}
    assert sorted(sink) == [1, 2] and all(0 <= v <= 1 for v in sink.values())  # row 0: no attention


def test_each_trained_block_is_a_simulator_preset_under_its_stored_label():
    """One block vocabulary: the monitor's variants are presets of ``dynamics.layers.PRESETS`` (post-ln is
    ``transformer``), their labels the ones configs and stored runs use, each the spec it always was."""
    from rankcollapse.dynamics.layers import PRESETS, LayerSpec, get_preset

    assert list(VARIANTS) == ["post-ln", "pre-ln", "no-ln", "no-skip"]
    assert all(preset in PRESETS for preset in VARIANTS.values())
    assert VARIANTS["post-ln"] == "transformer"
    assert {label: get_preset(preset) for label, preset in VARIANTS.items()} == {
        "post-ln": LayerSpec(norm="layernorm", placement="post", skip=1.0, mlp=True),
        "pre-ln": LayerSpec(norm="layernorm", placement="pre", skip=1.0, mlp=True),
        "no-ln": LayerSpec(norm="none", placement="post", skip=1.0, mlp=True),
        "no-skip": LayerSpec(norm="layernorm", placement="post", skip=None, mlp=True),
    }


@pytest.mark.parametrize("label", list(VARIANTS))
def test_a_variant_named_by_its_preset_is_the_same_config_as_by_its_label(label):
    """The simulator's preset names are accepted too, and stored as the label: the same config (and run)."""
    by_preset = TrajectoryConfig(variant=VARIANTS[label], **TINY)
    assert by_preset.variant == label
    assert by_preset == TrajectoryConfig(variant=label, **TINY)
