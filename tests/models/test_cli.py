"""`rankcollapse analyze` end to end, and every bad input as one line with exit code 2."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest
import torch

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("It was the best of times, it was the worst of times. " * 30)
    return path


def test_analyze_writes_metrics_config_and_plot(tmp_path, text_file, capsys):
    out = tmp_path / "run"
    code = main(["analyze", "--model", "tiny:gpt2", "--mode", "attn+skip", "--mask", "complete",
                 "--d-qk", "2", "--layers", "5", "--text-file", str(text_file), "--samples", "2",
                 "--tokens", "16", "--dtype", "f64", "--seed", "1", "--out", str(out), "--plot"])
    assert code == 0, capsys.readouterr().err
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [r["hidden_state"] for r in rows] == ["embeddings"] + [f"layer_{t}_out" for t in range(1, 6)]
    assert list(rows[0])[:4] == ["layer", "hidden_state", "model_layer", "finite"]
    for col in ("mu", "mu_rel", "at_floor", "full_rank", "sigma_min", "mean_abs_cos", "mean_signed_cos",
                "effective_rank"):
        assert col in rows[0]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config"]["analyze"]["d_qk"] == 2.0 and cfg["config"]["model"]["arch"] == "gpt2"
    assert cfg["config"]["model"]["d_qk"] == 2.0 and cfg["config"]["model"]["own_d_qk"] == 16.0
    assert (out / "mu.png").is_file()


def test_analyze_with_a_window_mask_on_an_encoder(tmp_path, text_file, capsys):
    out = tmp_path / "w"
    code = main(["analyze", "--model", "tiny:bert", "--mode", "attn+ln", "--mask", "window:w=2",
                 "--layers", "3", "--text-file", str(text_file), "--samples", "2", "--tokens", "16",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert len(list(csv.DictReader((out / "metrics.csv").open()))) == 4


def _one_line_error(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("rankcollapse: error:") and "\n" not in err and "Traceback" not in err
    return err


def test_unknown_model_offline(tmp_path, text_file, capsys):
    err = _one_line_error(["analyze", "--model", "nobody/no-such-model-xyz", "--text-file", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "no-such-model-xyz" in err


def test_folder_without_config(tmp_path, text_file, capsys):
    (tmp_path / "empty").mkdir()
    err = _one_line_error(["analyze", "--model", str(tmp_path / "empty"), "--text-file", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "config.json" in err


def test_folder_with_config_but_no_weights(tmp_path, text_file, capsys):
    folder = tmp_path / "t5"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "t5",
                                                    "architectures": ["T5ForConditionalGeneration"]}))
    # a supported family without weights: named as such
    err = _one_line_error(["analyze", "--model", str(folder), "--text-file", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "config.json but no weights" in err


def test_text_shorter_than_tokens(tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text("too short")
    err = _one_line_error(["analyze", "--model", "tiny:bert", "--text-file", str(short), "--tokens", "64",
                           "--out", str(tmp_path / "o")], capsys)
    assert "fewer than --tokens 64" in err


def test_tokens_beyond_context(tmp_path, text_file, capsys):
    err = _one_line_error(["analyze", "--model", "tiny:bert", "--text-file", str(text_file),
                           "--tokens", "600",
                           "--out", str(tmp_path / "o")], capsys)
    assert "exceeds the context" in err and "512" in err


@pytest.mark.parametrize("flag,value,needle", [("--mode", "mlp", "unknown mode 'mlp'"),
                                               ("--dtype", "f8", "dtype 'f8'"),
                                               ("--corpus", "lorem", "unknown corpus 'lorem'"),
                                               ("--model", "random:t5", "random model 't5'"),
                                               ("--model", "tiny:falcon", "tiny model 'falcon'"),
                                               ("--d-qk", "-1", "--d-qk must be a positive"),
                                               ("--mask", "bogus", "unknown mask family 'bogus'")])
def test_bad_values(tmp_path, capsys, flag, value, needle):
    err = _one_line_error(["analyze", flag, value, "--out", str(tmp_path / "o")], capsys)
    assert needle in err


def test_config_without_weights_is_one_line_for_any_architecture(tmp_path, text_file, capsys):
    folder = tmp_path / "gemma"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma", "architectures": ["GemmaModel"]}))
    err = _one_line_error(["analyze", "--model", str(folder), "--text-file", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "no weights" in err


def _saved_undissected_model(tmp_path):
    """A tiny random OPT (a family we do not dissect), saved as a local folder."""
    from transformers import OPTConfig, OPTModel

    torch.manual_seed(0)
    cfg = OPTConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
                    word_embed_proj_dim=32, max_position_embeddings=64, pad_token_id=0)
    folder = tmp_path / "opt"
    OPTModel(cfg).save_pretrained(folder)
    from rankcollapse.models.loading import bert_tokenizer

    bert_tokenizer().save_pretrained(folder)
    return folder


def test_undissected_architecture_runs_full_mode_and_refuses_surgery(tmp_path, text_file, capsys):
    folder = _saved_undissected_model(tmp_path)
    capsys.readouterr()  # the saving progress bar
    err = _one_line_error(["analyze", "--model", str(folder), "--mode", "attn", "--text-file", str(text_file),
                           "--samples", "2", "--tokens", "8", "--out", str(tmp_path / "a")], capsys)
    assert "'opt' is not dissected" in err and "mode 'attn'" in err
    code = main(["analyze", "--model", str(folder), "--text-file", str(text_file), "--samples", "2",
                 "--tokens", "8", "--out", str(tmp_path / "f")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "note: " in captured.err and "mode full only, through Hugging Face's own forward" in captured.err
    rows = list(csv.DictReader((tmp_path / "f" / "metrics.csv").open()))
    # HF's forward only: its last row is after the final norm, not a TransformerLens residual: no names
    assert len(rows) == 3 and {r["hook"] for r in rows} == {""}
    info = json.loads((tmp_path / "f" / "config.json").read_text())["config"]["model"]
    assert info["dissected"] is False and "not dissected" in info["note"]


def test_corrupt_config_json(tmp_path, text_file, capsys):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert", ')
    err = _one_line_error(["analyze", "--model", str(folder), "--text-file", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "config.json is not valid JSON" in err


def test_corpus_with_text_is_refused(tmp_path, text_file, capsys):
    err = _one_line_error(["analyze", "--model", "tiny:bert", "--corpus", "kjv", "--text-file",
                           str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "--corpus does not apply with --text-file" in err


def test_d_qk_is_the_one_spelling_and_the_retired_temperature_is_refused(tmp_path, text_file, capsys):
    out = tmp_path / "t"
    code = main(["analyze", "--model", "tiny:bert", "--mode", "attn", "--d-qk", "4", "--layers", "1",
                 "--text-file", str(text_file), "--samples", "2", "--tokens", "8", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads((out / "config.json").read_text())["config"]["analyze"]["d_qk"] == 4.0
    err = _one_line_error(["analyze", "--temperature", "2", "--out", str(tmp_path / "o")], capsys)
    assert "No such option: --temperature" in err and not (tmp_path / "o").exists()


def test_overflow_is_reported_not_hidden(tmp_path, text_file, capsys, monkeypatch):
    """A run whose metrics overflow its dtype says so in its summary line and marks the rows (a state of
    entries near 1e30 is finite in float32, its squared singular values are not: issue 39 counts such a
    sample as an overflow, never ``ok`` with an infinite mu); the same inputs at 1e17 stay finite."""
    from rankcollapse.models import loading

    real = loading.load_model
    for scale, status in ((1e17, "ok"), (1e30, "overflow")):

        def scaled(*args, scale=scale, **kwargs):
            model = real(*args, **kwargs)
            embed = model.embed
            model.embed = lambda ids: embed(ids) * scale
            return model

        monkeypatch.setattr(loading, "load_model", scaled)
        out = tmp_path / f"ovf{scale:g}"
        code = main(["analyze", "--model", "tiny:bert", "--mode", "attn+skip", "--layers", "6",
                     "--text-file", str(text_file), "--samples", "2", "--tokens", "16", "--out", str(out)])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        rows = list(csv.DictReader((out / "metrics.csv").open()))
        assert {r["status"] for r in rows} == {status}, scale
        if status == "ok":
            assert "all finite" in captured.out and all(math.isfinite(float(r["mu"])) for r in rows)
        else:
            assert all(r["mu"] == "nan" for r in rows)
            assert "NON-FINITE (overflow) in 7 rows from layer 0 on" in captured.out
            assert "all finite" not in captured.out


def test_check_masks_writes_one_verdict_per_layer(tmp_path, text_file, capsys):
    out = tmp_path / "m"
    code = main(["analyze", "--model", "tiny:qwen2", "--check-masks", "--text-file", str(text_file),
                 "--samples", "2", "--tokens", "10", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.count("ok       layer") == 4 and "causal-window:w=3" in captured.out
    report = json.loads((out / "mask_check.json").read_text())
    assert report["matches"] is True and [r["spec"] for r in report["layers"]] == [
        "causal", "causal", "causal-window:w=3", "causal-window:w=3"]


def test_a_mask_override_is_announced_and_a_schedule_must_fit_the_depth(tmp_path, text_file, capsys):
    code = main(["analyze", "--model", "tiny:gemma2", "--mask", "causal", "--text-file", str(text_file),
                 "--samples", "2", "--tokens", "10", "--out", str(tmp_path / "o")])
    assert code == 0 and "applies to every layer" in capsys.readouterr().err
    err = _one_line_error(["analyze", "--model", "tiny:gemma2", "--mask", "causal*3", "--text-file",
                           str(text_file), "--samples", "2", "--tokens", "10", "--out", str(tmp_path / "p")],
                          capsys)
    assert "period 3" in err and "4 layers" in err
    err = _one_line_error(["analyze", "--model", "tiny:gemma2", "--diagnostics", "--backend", "hf",
                           "--text-file",
                           str(text_file), "--samples", "2", "--tokens", "10", "--out", str(tmp_path / "q")],
                          capsys)
    assert "backend 'hf'" in err


def test_save_attention_writes_the_weights_of_each_layer_and_needs_diagnostics(tmp_path, text_file, capsys):
    import numpy as np

    from rankcollapse.models import AnalyzeConfig, analyze, load_model
    from rankcollapse.models.analyze import token_batch

    out = tmp_path / "a"
    argv = ["analyze", "--model", "tiny:llama", "--layers", "2", "--text-file", str(text_file),
            "--samples", "2",
            "--tokens", "10", "--out", str(out), "--diagnostics", "--save-attention"]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "sink heads" in printed.splitlines()[0]  # the diagnostics table
    saved = sorted(p.name for p in (out / "attention").iterdir())
    assert saved == ["layer_001.npy", "layer_002.npy"]
    cfg = AnalyzeConfig(model="tiny:llama", layers=2, text_file=str(text_file), samples=2, tokens=10,
                        diagnostics=True)
    model = load_model("tiny:llama")
    got: dict = {}
    analyze(cfg, model=model, ids=token_batch(cfg, model),
            on_attention=lambda t, a: got.setdefault(t, a.clone()))
    np.testing.assert_array_equal(np.load(out / "attention" / "layer_002.npy"), got[2].float().numpy())
    err = _one_line_error([a for a in argv if a != "--diagnostics"] + ["--overwrite"], capsys)
    assert "--save-attention applies only with --diagnostics" in err


def test_the_tokenizer_option_reads_the_text_with_that_tokenizer(tmp_path, text_file, capsys, word_tokenizer):
    word_tokenizer().save_pretrained(tmp_path / "tok")
    out = tmp_path / "t"
    assert main(["analyze", "--model", "tiny:gpt2", "--layers", "1", "--text-file", str(text_file),
                 "--samples",
                 "1",
                 "--tokens", "8", "--tokenizer", str(tmp_path / "tok"), "--out", str(out), "--no-table"]) == 0
    info = json.loads((out / "config.json").read_text())["config"]["model"]
    assert info["tokenizer"] == str(tmp_path / "tok") and info["start_token"] == 0
    err = _one_line_error(["analyze", "--model", "tiny:gpt2", "--text-file", str(text_file), "--tokenizer",
                           str(tmp_path / "none"), "--out", str(tmp_path / "n")], capsys)
    assert "cannot load tokenizer" in err


def test_label_names_the_model_in_what_analyze_writes_and_a_bad_one_is_one_line(tmp_path, text_file, capsys):
    out = tmp_path / "labelled"
    args = ["analyze", "--model", "tiny:gpt2", "--text-file", str(text_file), "--samples", "2", "--tokens",
            "8", "--metrics", "mu_rel", "--no-table", "--out", str(out)]
    assert main([*args, "--model-label", "my GPT-2 (random init, seed 0)"]) == 0, capsys.readouterr().err
    model = json.loads((out / "config.json").read_text())["config"]["model"]
    assert model["model_label"] == "my GPT-2 (random init, seed 0)" and model["model_name"] == "tiny:gpt2"
    capsys.readouterr()
    assert main([*args, "--model-label", "", "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rankcollapse: error: --model-label ''") and "\n" not in err


@pytest.mark.parametrize("kw,needle", [
    ({"save_attention": True}, "--save-attention applies only with --diagnostics"),
    ({"plot_format": "pdf"}, "--plot-format applies only with --plot"),
    ({"plot": True, "plot_format": "bmp,png"}, "--plot-format"),
])
def test_analyze_outputs_check_their_flags_on_construction(kw, needle):
    """The output flags' cross-checks live in a config that validates on construction (issue 43 item 3),
    the same one line in Python as at the CLI."""
    from rankcollapse.models.analyze.config import AnalyzeConfig, AnalyzeOutputs

    with pytest.raises(RankCollapseError, match=re.escape(needle)):
        AnalyzeOutputs(AnalyzeConfig(model="tiny:bert"), **kw)
    assert AnalyzeOutputs(AnalyzeConfig(model="tiny:bert", diagnostics=True), save_attention=True,
                          plot=True, plot_format="pdf,svg").formats == ("pdf", "svg")
