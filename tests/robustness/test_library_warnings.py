"""Issue 39: transformers' own warnings never print before our line.

``models.hub.transformers_messages`` holds what transformers logs while it reads a user's model folder: a
failed load is our one line alone (exit 2); a load that succeeds tells each warning after it, as
``rankcollapse: warning: transformers: ...`` through the output layer, never transformers' own
``[transformers]`` line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ODD_ROPE = {"rope_type": "linear", "factor": 2.0, "foo": 1}  # transformers warns: Unrecognized keys


def _llama_folder(folder: Path) -> Path:
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=8, num_attention_heads=2,
                                      num_key_value_heads=2, intermediate_size=8, vocab_size=16,
                                      max_position_embeddings=32)
    torch.manual_seed(0)
    transformers.LlamaModel(config).save_pretrained(folder)
    raw = json.loads((folder / "config.json").read_text())
    raw["rope_scaling"] = ODD_ROPE
    raw.pop("rope_parameters", None)
    (folder / "config.json").write_text(json.dumps(raw))
    return folder


def _stderr(args: list[str]) -> tuple[int, list[str]]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "default"}
    done = subprocess.run([sys.executable, "-m", "rankcollapse", *args], capture_output=True, text=True,
                          env=env, timeout=300)
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


def test_a_failed_load_is_our_line_alone(tmp_path):
    folder = _llama_folder(tmp_path / "m")
    (folder / "model.safetensors").write_bytes(b"")  # weights that cannot be read
    code, lines = _stderr(["analyze", "--model", str(folder), "--corpus", "wikipedia", "--samples", "2",
                           "--tokens", "8", "--out", str(tmp_path / "o")])
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error: cannot read the weights"), lines


_LOAD = """
import sys
from rankcollapse.models.loading import load_model
print(len(load_model(sys.argv[1]).layers))
"""


def test_a_load_that_succeeds_tells_the_warning_after_it_in_our_words(tmp_path):
    """In a fresh process: transformers says a warning once per process, and another test's load in the same
    worker may have said it already."""
    folder = _llama_folder(tmp_path / "m")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _LOAD, str(folder)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-2000:]
    err = done.stderr.splitlines()
    told = [line for line in err if "Unrecognized keys" in line]
    assert len(told) == 1 and told[0].startswith("rankcollapse: warning: transformers: "), err
    assert not any(line.startswith("[transformers]") for line in err), err


def test_a_library_reason_ending_in_a_colon_keeps_its_next_line():
    from rankcollapse.models.loading import _reason

    class ValidationError(Exception):
        pass

    ValidationError.__module__ = "huggingface_hub.dataclasses"
    err = ValidationError("Validation error for field 'eps':\n    TypeError: expected float, got int")
    want = "ValidationError: Validation error for field 'eps': TypeError: expected float, got int"
    assert _reason(err) == want
