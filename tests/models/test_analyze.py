"""Streaming analysis: row names, depth by cycling, constant memory, Python API and run outputs."""

from __future__ import annotations

import csv
import json
import weakref

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, hidden_state_name, iter_hidden_states, write_run
from rankcollapse.models.parts import NO_POSITIONS
from rankcollapse.models.plots import plot_token_geometry


def test_rows_are_named_embeddings_then_layer_outputs_and_cycle_the_model_layers(tiny_models, ids):
    model = tiny_models("bert")
    result = analyze(AnalyzeConfig(model="tiny:bert", layers=10, metrics=("mu", "full_rank")),
                     model=model, ids=ids)
    assert [r["layer"] for r in result.rows] == list(range(11))
    assert result.rows[0]["hidden_state"] == "embeddings" and result.rows[3]["hidden_state"] == "layer_3_out"
    assert [r["model_layer"] for r in result.rows[1:]] == [t % 4 for t in range(10)]
    assert hidden_state_name(7) == "layer_7_out"
    assert {"mu", "mu_min", "mu_max", "full_rank"} <= set(result.rows[0])


def test_cycled_layers_repeat_the_same_functions(tiny_models, ids):
    model = tiny_models("gpt2", "f64")
    states = [x.clone() for _, _, x in iter_hidden_states(model, ids, layers=8)]
    # layer 5 is model layer 0 again: X(5) is model layer 0 applied to X(4)
    from rankcollapse.models.stream import fused_attention

    p0 = model.layers[0]
    with fused_attention(model):  # as the stream runs it: fused, the module's own causal mask
        again = p0.hf_forward(states[4], None, NO_POSITIONS)
    torch.testing.assert_close(again, states[5], rtol=0, atol=0)
    other = model.layers[1].hf_forward(states[4], _causal(ids.shape[1]), NO_POSITIONS)
    assert float((other - states[5]).abs().max()) > 1e-3


def _causal(n: int) -> torch.Tensor:
    from rankcollapse.models.stream import additive_mask

    return additive_mask(torch.ones(n, n, dtype=torch.bool).tril(), torch.float64)


@pytest.mark.parametrize("mode", ["full", "attn+skip+ln"])
def test_no_hidden_state_is_kept_while_streaming(tiny_models, ids, mode):
    """Memory does not grow with depth: at most the current (and the one being replaced) live."""
    model = tiny_models("llama")
    refs = []
    for _, _, x in iter_hidden_states(model, ids[:1], mode=mode, layers=64):
        refs.append(weakref.ref(x))
        del x  # tensors are freed by reference counting: no gc.collect needed
        assert sum(r() is not None for r in refs) <= 2
    result = analyze(AnalyzeConfig(model="tiny:llama", mode=mode, layers=16, metrics=("mu",)),
                     model=model, ids=ids[:1])
    assert len(result.rows) == 17 and all(isinstance(v, float) for v in result.column("mu"))


def test_analyze_from_text_file_writes_config_and_csv(tiny_models, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    cfg = AnalyzeConfig(model="tiny:albert", mode="attn+ln", text_file=str(text), samples=3, tokens=16,
                        layers=6, seed=3)
    result = analyze(cfg, model=tiny_models("albert"))
    again = analyze(cfg, model=tiny_models("albert"))
    assert result.rows == again.rows  # seeded windows: reproducible
    write_run(result, tmp_path / "run")
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    assert len(rows) == 7 and rows[0]["hidden_state"] == "embeddings"
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["config"]["analyze"]["mode"] == "attn+ln"
    png = plot_token_geometry(result.rows, tmp_path / "geo.png", title="t")
    assert png.stat().st_size > 1000


def test_pure_attention_shrinks_relative_mu(tiny_models, ids):
    model = tiny_models("bert", "f64")
    cfg = AnalyzeConfig(model="tiny:bert", mode="attn", layers=40, metrics=("mu_rel", "at_floor"))
    result = analyze(cfg, model=model, ids=ids)
    assert result.rows[-1]["mu_rel"] < result.rows[0]["mu_rel"]


def test_bad_mode_d_qk_and_context_are_user_errors(tiny_models, ids):
    model = tiny_models("bert")
    with pytest.raises(RankCollapseError, match="unknown mode 'attn\\+mlp'"):
        list(iter_hidden_states(model, ids, mode="attn+mlp"))
    with pytest.raises(RankCollapseError, match="d_qk must be a positive finite number"):
        list(iter_hidden_states(model, ids, d_qk=0.0))
    long_ids = torch.zeros(1, model.max_tokens + 1, dtype=torch.long)
    with pytest.raises(RankCollapseError, match="exceeds the context"):
        list(iter_hidden_states(model, long_ids))
    with pytest.raises(RankCollapseError, match="backend 'hf'"):
        list(iter_hidden_states(model, ids, mode="attn", backend="hf"))


def test_overflowing_samples_are_counted_not_crashing():
    from rankcollapse.models.samples import measure

    x = torch.randn(3, 5, 4)
    x[1, 2, 0] = float("inf")
    finite, stats = measure(x, ("mu", "full_rank"))
    assert finite == pytest.approx(2 / 3) and stats["full_rank"] == 1.0
    finite, stats = measure(torch.full((2, 5, 4), float("nan")), ("mu",))
    assert finite == 0.0 and stats["mu"] != stats["mu"]


def test_overflowing_rows_are_marked_overflow_with_a_note(tiny_models, ids):
    """attn+skip in float32 at depth overflows (token norms grow each layer): such rows say so. Row 0 too:
    its tokens (1e30) are finite, but their squares do not fit in float32, so its mu would be inf (it
    said ``status ok`` with an infinite mu, issue 39)."""
    model = tiny_models("bert")
    big = model.embed(ids) * 1e30  # a huge input overflows within a few layers
    result = analyze(AnalyzeConfig(model="tiny:bert", mode="attn+skip", layers=6, metrics=("mu",)),
                     model=_const_embed(model, big), ids=ids)
    statuses = result.column("status")
    assert statuses[0] == "overflow" and bool(torch.isfinite(big).all())
    assert all(r["mu"] != float("inf") for r in result.rows)
    bad = result.overflow_layers
    assert bad == [int(r["layer"]) for r in result.rows if r["finite"] < 1.0] and bad
    assert any("non-finite" in note for note in result.notes)


def _const_embed(model, x):
    import copy

    clone = copy.copy(model)
    clone.embed = lambda ids: x
    return clone


def test_a_repeated_first_token_is_noted_as_an_input_property(tiny_models):
    model = tiny_models("llama", "f64")
    ids = torch.tensor([[5, 5, 7, 9, 11, 13]])
    result = analyze(AnalyzeConfig(model="tiny:llama", mode="attn", layers=3, metrics=("num_rank",)),
                     model=model, ids=ids)
    assert any("repeated token" in note for note in result.notes)
    # and the duplicate really persists: rows 0 and 1 stay equal in every layer
    for _, _, x in iter_hidden_states(model, ids, mode="attn+skip", layers=5):
        torch.testing.assert_close(x[:, 0], x[:, 1], rtol=1e-12, atol=1e-12)


def test_rows_carry_the_sample_std_of_each_metric():
    from rankcollapse.metrics import mu
    from rankcollapse.models.samples import measure

    x = torch.randn(5, 6, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    _, stats = measure(x, ("mu",))
    per = mu(x)
    assert stats["mu_std"] == pytest.approx(float(per.std(correction=1)), rel=1e-12)
    assert stats["mu"] == pytest.approx(float(per.mean()), rel=1e-12)
    _, one = measure(x[:1], ("mu",))
    assert one["mu_std"] != one["mu_std"]  # NaN: no spread from one sample


def test_deep_random_models_have_their_own_layers_not_the_stored_ones_cycled():
    from rankcollapse.models import load_model, resolve_model

    deep, base = load_model("tiny:bert,layers=10", "f64"), load_model("tiny:bert", "f64")
    assert len(deep.layers) == 10 and resolve_model("tiny:bert,layers=10").depth == 10
    assert all(torch.equal(deep.layers[i].w_q, base.layers[i].w_q) for i in range(4))  # the L = 4 prefix
    w_q = [deep.layers[i].w_q for i in range(10)]
    assert not any(torch.equal(w_q[j], w_q[i]) for j in range(4, 10) for i in range(j))
    again = load_model("tiny:bert,layers=10", "f64")
    assert torch.equal(again.layers[7].w_v, deep.layers[7].w_v)  # seeded per layer
    assert abs(float(deep.layers[8].w_q.std()) - 0.02) < 0.003  # Hugging Face's own init
    assert len(load_model("tiny:gpt2,layers=2", "f64").layers) == 2  # fewer: the config's first layers


@pytest.mark.parametrize("name", ["tiny:bert,layers=7", "tiny:gpt2,layers=6", "tiny:t5,layers=6"])
def test_fresh_layers_run_the_same_on_hf_modules_and_from_parts(name, ids):
    from rankcollapse.models import load_model

    model = load_model(name, "f64", hf_casts=True)
    hf = [x.clone() for _, _, x in iter_hidden_states(model, ids, backend="hf")]
    parts = [x.clone() for _, _, x in iter_hidden_states(model, ids, backend="parts")]
    assert len(hf) == len(model.layers) + 1
    for a, b in zip(hf, parts, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_bad_depth_options_are_one_line_errors():
    from rankcollapse.models import resolve_model

    for bad, needle in [("tiny:bert,layers=0", "bad model option"), ("tiny:bert,depth=3", "bad model option"),
                        ("tiny:llama,layers=8", "cannot take layers=")]:
        with pytest.raises(RankCollapseError, match=needle):
            resolve_model(bad)


def test_a_mask_without_self_loops_is_refused(tiny_models, ids, tmp_path):
    import numpy as np

    m = np.tril(np.ones((ids.shape[1], ids.shape[1]), dtype=bool), k=-1)  # strictly causal: no diagonal
    m[0, 0] = True
    path = tmp_path / "strict.npy"
    np.save(path, m)
    with pytest.raises(RankCollapseError, match="self-loop"):
        list(iter_hidden_states(tiny_models("bert"), ids, mode="attn", mask=f"file:{path}"))


def test_rows_that_underflow_to_zero_are_marked_underflow_not_collapsed(tiny_models, ids):
    model = tiny_models("bert")
    tiny_x = model.embed(ids) * 1e-30  # attention without norms shrinks it to exactly 0 in float32
    result = analyze(AnalyzeConfig(model="tiny:bert", mode="attn", layers=12, metrics=("mu", "mu_rel")),
                     model=_const_embed(model, tiny_x), ids=ids)
    statuses = result.column("status")
    assert statuses[0] == "ok" and statuses[-1] == "underflow"
    last = result.rows[-1]
    assert last["mu"] == 0.0 and last["mu_rel"] != last["mu_rel"]  # 0/0: NaN, not "collapsed"
    assert any("underflow" in note for note in result.notes) and result.overflow_layers == []


def test_analyze_reports_progress_in_plain_lines_when_stderr_is_not_a_terminal(tiny_models, ids, capsys,
                                                                                monkeypatch):
    from rankcollapse.edge import progress as module
    from rankcollapse.models import AnalyzeConfig, analyze

    monkeypatch.setattr(module, "DELAY_S", 0.0)
    analyze(AnalyzeConfig(model="tiny:bert", layers=3, metrics=("mu",)), model=tiny_models("bert"), ids=ids,
            progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err and err.splitlines()[-1].startswith("rankcollapse: analyze tiny bert")
    assert err.splitlines()[-1].split(": ")[2].startswith("4/4 layers (100%)")


def test_a_result_shows_itself_in_one_short_line() -> None:
    config = AnalyzeConfig(model="tiny:bert", layers=3, samples=2, tokens=8, metrics=("mu", "mu_rel"))
    result = analyze(config)
    text = repr(result)  # was the whole dataclass: 13,273 characters for the README's MiniLM run
    assert len(text) < 300 and "\n" not in text and "4 rows (layers 0..3)" in text and "mu_rel" in text


def test_analyze_measures_the_metrics_it_is_given_and_refuses_unknown_ones_in_one_line(tiny_models, tmp_path):
    """analyze had no --metrics: the quadratic defaults (mean |cos|) ran at every length."""
    from rankcollapse.cli.main import main
    from rankcollapse.metrics import METRIC_NAMES

    cfg = AnalyzeConfig(model="tiny:llama", samples=2, tokens=16, metrics="mu_rel,effective_rank")
    assert cfg.metrics == ("mu_rel", "effective_rank")
    rows = analyze(cfg, model=tiny_models("llama")).rows
    measured = {k for k in rows[0] if k in METRIC_NAMES}
    assert measured == {"mu_rel", "effective_rank"}
    full = analyze(AnalyzeConfig(model="tiny:llama", samples=2, tokens=16), model=tiny_models("llama")).rows
    assert [r["mu_rel"] for r in rows] == [r["mu_rel"] for r in full]  # a subset changes no value
    with pytest.raises(RankCollapseError, match=r"metrics \['rank'\] unknown; allowed: mu, mu_rel"):
        AnalyzeConfig(model="tiny:llama", metrics=("rank",))
    out = tmp_path / "cli"
    assert main(["analyze", "--model", "tiny:llama", "--samples", "2", "--tokens", "16", "--metrics",
                 "mu,mu_rel", "--no-progress", "--no-table", "--out", str(out)]) == 0
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {k for k in header if k in METRIC_NAMES} == {"mu", "mu_rel"}
    bad = ["analyze", "--model", "tiny:llama", "--metrics", "mu,cos", "--out", str(tmp_path / "x")]
    assert main(bad) == 2
