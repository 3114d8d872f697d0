"""Diagnostics and the sinks ablation in an analyze run; TransformerLens names, DataFrames, in-memory
models, lists of texts and padding-aware metrics."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, iter_hidden_states, load_model
from rankcollapse.models.parts import damp_first_token
from rankcollapse.models.samples import measure


def _cfg(**kw):
    base = dict(model="tiny:gemma2", samples=3, tokens=12, dtype="float64", metrics=("mu", "mu_rel"))
    return AnalyzeConfig(**{**base, **kw})


def test_recorded_attention_is_hf_own_attention_per_layer(tiny_models, ids):
    """The weights the diagnostics read are those HF's eager forward computes (output_attentions)."""
    model = tiny_models("gemma3_text", "f64", hf_casts=True)
    with torch.inference_mode():
        ref = model.hf_model(input_ids=ids, output_attentions=True).attentions
    record: dict = {}
    for t, _, _ in iter_hidden_states(model, ids, record=record):
        if t:
            torch.testing.assert_close(record["attn"], ref[t - 1], rtol=1e-10, atol=1e-12)


def test_diagnostic_columns_equal_their_formulas_on_the_recorded_weights(tiny_models, ids):
    model = tiny_models("llama", "f64")
    result = analyze(_cfg(model="tiny:llama", diagnostics=True, sink_threshold=0.2), model=model, ids=ids)
    record: dict = {}
    states = iter_hidden_states(model, ids, record=record)
    next(states)
    _, _, x1 = next(states)
    a = record["attn"]
    row = result.rows[1]
    h = -(a * torch.where(a > 0, a.log(), 0.0)).sum(-1).mean(-1)  # [b, h]
    assert math.isclose(row["attention_entropy"], float(h.mean()), rel_tol=1e-12)
    assert math.isclose(row["attention_entropy_h2"], float(h[:, 2].mean()), rel_tol=1e-12)
    first = a[..., 0].mean(-1)
    assert math.isclose(row["first_token_attention"], float(first.mean()), rel_tol=1e-12)
    assert math.isclose(row["sink_rate"], float((first > 0.2).double().mean()), abs_tol=1e-15)
    per_head = first.mean(0)  # [h]: which heads sink, the batch mean of each head's attention on token 0
    for k in range(a.shape[1]):
        assert math.isclose(row[f"first_token_attention_h{k}"], float(per_head[k]), rel_tol=1e-12)
    assert row["sink_heads"] == " ".join(str(k) for k in range(a.shape[1]) if per_head[k] > 0.2)
    assert math.isclose(row["first_token_norm"], float(x1[:, 0].norm(dim=-1).mean()), rel_tol=1e-12)
    assert math.isclose(row["top_activation"], float(x1.abs().flatten(1).amax(1).mean()), rel_tol=1e-12)
    assert math.isnan(result.rows[0]["attention_entropy"]) and "attention_entropy_h3" in result.rows[0]
    assert result.rows[0]["sink_heads"] == "" and math.isnan(result.rows[0]["first_token_attention_h0"])


def test_the_layer_table_shows_sink_heads_and_a_bounded_number_of_rows():
    from rankcollapse.models.diagnose import layer_table

    rows = [{"layer": t, "mu_rel": 0.5, "full_rank": 1.0, "mean_abs_cos": 0.1, "attention_entropy": 1.0,
             "sink_rate": 0.5, "sink_heads": "0 3" if t else "", "massive_ratio": 10.0} for t in range(129)]
    lines = layer_table(rows, max_rows=13).splitlines()
    assert lines[0].split() == ["layer", "mu_rel", "full-rank%", "mean|cos|", "entropy", "sink_rate", "sink",
                                "heads", "massive_ratio"]
    assert lines[1].split()[2] == "100%"  # a share of samples, never to be read as "rank 1"
    shown = [int(line.split()[0]) for line in lines[1:-1]]
    assert shown[0] == 0 and shown[-1] == 128 and len(shown) <= 13
    assert lines[-1] == f"({len(shown)} of 129 rows; all in metrics.csv)" and "0 3" in lines[2]
    assert len(layer_table(rows[:5]).splitlines()) == 6  # short runs: every row, no footnote


def test_damping_the_first_token_renormalises_rows_and_leaves_query_zero():
    a = torch.softmax(torch.randn(2, 3, 5, 5, dtype=torch.float64), -1)
    d = damp_first_token(a, 0.25)
    torch.testing.assert_close(d.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))
    torch.testing.assert_close(d[..., 0, :], a[..., 0, :])
    want = 0.25 * a[..., 1:, 0] / (1 - 0.75 * a[..., 1:, 0])  # closed form A'_i0
    torch.testing.assert_close(d[..., 1:, 0], want)
    assert torch.equal(damp_first_token(a, 1.0), a / a.sum(-1, keepdim=True))


def test_the_sinks_ablation_is_one_run_and_damping_one_changes_nothing(tiny_models, ids):
    model = tiny_models("gemma2", "f64")
    plain = analyze(_cfg(diagnostics=True), model=model, ids=ids)
    same = analyze(_cfg(diagnostics=True, ablation="sinks", sink_damping=1.0), model=model, ids=ids)
    gone = analyze(_cfg(diagnostics=True, ablation="sinks"), model=model, ids=ids)
    for a, b in zip(plain.rows, same.rows, strict=True):
        assert math.isclose(a["mu"], b["mu"], rel_tol=1e-12)
    assert gone.model_info["sink_damping"] == 0.0
    # only query 0 still attends to token 0, with weight 1: mean over 12 queries is 1/12
    assert all(math.isclose(r["first_token_attention"], 1 / 12, rel_tol=1e-12) for r in gone.rows[1:])
    assert gone.rows[-1]["mu"] != plain.rows[-1]["mu"]


def test_option_refusals_are_one_line():
    for kw, needle in (({"sink_damping": 0.5}, "--ablation sinks"),
                       ({"ablation": "heads"}, "unknown ablation"),
                       ({"ablation": "sinks", "sink_damping": 2.0}, "--sink-damping"),
                       ({"sink_threshold": 0.5}, "--diagnostics")):
        with pytest.raises(RankCollapseError, match=needle):
            _cfg(**kw)


def test_rows_name_transformerlens_hooks_and_make_a_dataframe(tiny_models, ids):
    """TransformerLens names the model's own 4 layers; the cycled layers 5 and 6 are not its tensors,
    nor is any row of a surgery mode or a mask override (tests/models/test_transformerlens.py checks
    the names against TransformerLens itself)."""
    result = analyze(_cfg(layers=6), model=tiny_models("gemma2", "f64"), ids=ids)
    assert [r["hook"] for r in result.rows] == ["blocks.0.hook_resid_pre"] + [
        f"blocks.{t}.hook_resid_post" for t in range(4)] + ["", ""]
    for kw in ({"mode": "attn+ln"}, {"mask": "causal"}, {"d_qk": 3.0}, {"ablation": "sinks"}):
        other = analyze(_cfg(**kw, diagnostics="ablation" in kw), model=tiny_models("gemma2", "f64"), ids=ids)
        assert {r["hook"] for r in other.rows} == {""}, kw
    frame = result.to_frame()
    assert list(frame["layer"]) == list(range(7)) and frame["mu"].iloc[3] == result.rows[3]["mu"]
    info = result.model_info
    assert info["mask_schedule"] == "causal-window:w=3;causal (period 2, depth 6 = 3 x 2 layers)"
    assert info["mask_source"].startswith("own")
    over = analyze(_cfg(mask="causal"), model=tiny_models("gemma2", "f64"), ids=ids).model_info
    assert over["mask_source"].startswith("override: the given mask applies to every layer")


def test_an_in_memory_hf_model_with_a_head_gives_the_rows_of_the_loaded_model(tiny_models, ids):
    from transformers import LlamaForCausalLM

    loaded = tiny_models("llama", "f64")
    with_head = LlamaForCausalLM(loaded.hf_model.config).to(torch.float64)
    with_head.model.load_state_dict(loaded.hf_model.state_dict())
    a = analyze(_cfg(model="tiny:llama"), model=loaded, ids=ids)
    b = analyze(_cfg(model="tiny:llama"), model=with_head, ids=ids)
    assert b.model_info["arch"] == "llama" and b.model_info["source"] == "in-memory Hugging Face model"
    assert [r["mu"] for r in a.rows] == [r["mu"] for r in b.rows]


@pytest.mark.parametrize("arch", ["bert", "gemma2", "gpt2"])
def test_padded_texts_give_the_metrics_of_each_text_alone(arch):
    """Padding-aware: a batch of texts of different lengths, right-padded, has per-sample metrics
    equal to each text run alone (mu, ranks and cosines over its real tokens only)."""
    model = load_model(f"tiny:{arch}", "float64")
    texts = ["the cat sat on the mat and looked at the dog", "a short one", "it was the best of times"]
    cfg = _cfg(model=f"tiny:{arch}", metrics=("mu", "num_rank", "mean_abs_cos"), tokens=32)
    batch = analyze(cfg, model=model, texts=texts)
    alone = [analyze(cfg, model=model, texts=[t]) for t in texts]
    for name in ("mu", "num_rank", "mean_abs_cos"):
        for t in range(len(batch.rows)):
            want = sum(r.rows[t][name] for r in alone) / len(alone)
            assert math.isclose(batch.rows[t][name], want, rel_tol=1e-9), (name, t)
            assert math.isclose(batch.rows[t][f"{name}_max"], max(r.rows[t][name] for r in alone),
                                rel_tol=1e-9)


@pytest.mark.parametrize("arch", ["bert", "gpt2"])
def test_padded_texts_give_the_diagnostics_of_each_text_alone(arch):
    """--diagnostics on a padded batch: each sample's entropy, sink rate, first-token norm and
    largest activations are those of the text run alone (padding left out), averaged over samples."""
    model = load_model(f"tiny:{arch}", "float64")
    texts = ["the cat sat on the mat and looked at the dog", "a short one", "it was the best of times"]
    cfg = _cfg(model=f"tiny:{arch}", metrics=("mu",), tokens=32, diagnostics=True, sink_threshold=0.1)
    batch = analyze(cfg, model=model, texts=texts)
    alone = [analyze(cfg, model=model, texts=[t]) for t in texts]
    names = ("attention_entropy", "attention_entropy_h0", "normalized_attention_entropy",
             "first_token_attention", "sink_rate", "first_token_norm", "top_activation", "massive_ratio")
    for t in range(len(batch.rows)):
        for name in names:
            values = [r.rows[t][name] for r in alone]
            if t == 0 and name in names[:5]:
                assert math.isnan(batch.rows[t][name])
                continue
            assert math.isclose(batch.rows[t][name], sum(values) / len(values), rel_tol=1e-9), (name, t)


def test_measure_with_lengths_equals_measuring_the_cut_samples():
    x = torch.randn(3, 7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([7, 4, 4])
    _, got = measure(x, ("mu", "effective_rank"), lengths=lengths)
    _, head = measure(x[:1], ("mu", "effective_rank"))
    _, tail = measure(x[1:, :4], ("mu", "effective_rank"))
    assert math.isclose(got["mu"], (head["mu"] + 2 * tail["mu"]) / 3, rel_tol=1e-12)


def test_a_document_mask_reports_mu_rel_per_document_next_to_the_whole(tiny_models, ids):
    """Packed sequences: each document's column is mu_rel of its own tokens' hidden states; under
    pure attention each document collapses while the whole keeps its spread (no center)."""
    from rankcollapse.metrics import mu_rel

    model = tiny_models("bert", "f64")
    n = ids.shape[1]
    spec = f"document:lengths=5,{n - 5}"
    result = analyze(_cfg(model="tiny:bert", mode="attn", mask=spec, layers=30), model=model, ids=ids)
    states = list(iter_hidden_states(model, ids, mode="attn", mask=spec, layers=30))
    for (t, _, x), row in zip(states, result.rows, strict=True):
        assert math.isclose(row["mu_rel_doc0"], float(mu_rel(x[:, :5]).mean()), rel_tol=1e-12), t
        assert math.isclose(row["mu_rel_doc1"], float(mu_rel(x[:, 5:]).mean()), rel_tol=1e-12), t
    last = result.rows[-1]
    assert last["mu_rel_docs_max"] < 1e-12 < 0.05 < last["mu_rel"]
    plain = analyze(_cfg(model="tiny:bert", mode="attn", mask="causal", layers=2), model=model, ids=ids)
    assert not [k for k in plain.rows[0] if "_doc" in k]
