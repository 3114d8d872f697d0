"""`rankcollapse analyze` end to end, and every bad input as one line with exit code 2."""

from __future__ import annotations

import csv
import json

import pytest

from rankcollapse.cli.main import main


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("It was the best of times, it was the worst of times. " * 30)
    return path


def test_analyze_writes_metrics_config_and_plot(tmp_path, text_file, capsys):
    out = tmp_path / "run"
    code = main(["analyze", "--model", "random:gpt2", "--mode", "attn+skip", "--mask", "complete",
                 "--temperature", "2", "--layers", "5", "--text", str(text_file), "--samples", "2",
                 "--tokens", "16", "--dtype", "f64", "--seed", "1", "--out", str(out), "--plot"])
    assert code == 0, capsys.readouterr().err
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [r["hidden_state"] for r in rows] == ["embeddings"] + [f"layer_{t}_out" for t in range(1, 6)]
    assert list(rows[0])[:4] == ["layer", "hidden_state", "model_layer", "finite"]
    for col in ("mu", "mu_rel", "at_floor", "full_rank", "sigma_min", "mean_abs_cos", "mean_signed_cos",
                "effective_rank"):
        assert col in rows[0]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config"]["analyze"]["temperature"] == 2.0 and cfg["config"]["model"]["arch"] == "gpt2"
    assert (out / "token_geometry.png").is_file()


def test_analyze_with_a_window_mask_on_an_encoder(tmp_path, text_file, capsys):
    out = tmp_path / "w"
    code = main(["analyze", "--model", "random:bert", "--mode", "attn+ln", "--mask", "window:w=2",
                 "--layers", "3", "--text", str(text_file), "--samples", "2", "--tokens", "16",
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
    err = _one_line_error(["analyze", "--model", "nobody/no-such-model-xyz", "--text", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "no-such-model-xyz" in err


def test_folder_without_config(tmp_path, text_file, capsys):
    (tmp_path / "empty").mkdir()
    err = _one_line_error(["analyze", "--model", str(tmp_path / "empty"), "--text", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "config.json" in err


def test_unsupported_architecture_names_supported_ones(tmp_path, text_file, capsys):
    folder = tmp_path / "t5"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "t5",
                                                    "architectures": ["T5ForConditionalGeneration"]}))
    err = _one_line_error(["analyze", "--model", str(folder), "--text", str(text_file),
                           "--out", str(tmp_path / "o")], capsys)
    assert "T5ForConditionalGeneration" in err and "supported are bert, albert, gpt2, llama" in err


def test_text_shorter_than_tokens(tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text("too short")
    err = _one_line_error(["analyze", "--model", "random:bert", "--text", str(short), "--tokens", "64",
                           "--out", str(tmp_path / "o")], capsys)
    assert "fewer than --tokens 64" in err


def test_tokens_beyond_context(tmp_path, text_file, capsys):
    err = _one_line_error(["analyze", "--model", "random:bert", "--text", str(text_file), "--tokens", "600",
                           "--out", str(tmp_path / "o")], capsys)
    assert "exceeds the context" in err and "512" in err


@pytest.mark.parametrize("flag,value,needle", [("--mode", "mlp", "unknown mode 'mlp'"),
                                               ("--dtype", "f16", "dtype 'f16'"),
                                               ("--corpus", "lorem", "unknown corpus 'lorem'"),
                                               ("--model", "random:t5", "random model 't5'"),
                                               ("--temperature", "-1", "temperature"),
                                               ("--mask", "bogus", "unknown mask family 'bogus'")])
def test_bad_values(tmp_path, capsys, flag, value, needle):
    err = _one_line_error(["analyze", flag, value, "--out", str(tmp_path / "o")], capsys)
    assert needle in err
