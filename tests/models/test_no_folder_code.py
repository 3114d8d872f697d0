"""A model folder's own code never runs, and nothing ever prompts, even on a terminal.

transformers asks "Do you wish to run the custom code? [y/N]" when a folder's config has
``auto_map`` and the caller did not say ``trust_remote_code``; on a terminal, answering ``y`` runs
the folder's ``configuration_*.py``. Here ``analyze`` runs on a pseudo-terminal that answers ``y``
to everything, on two folders whose code would create a sentinel file: one of a known
``model_type`` (BERT) that also ships code (loaded with transformers' own BERT, no prompt), and one
that exists only as code (refused with one line). The sentinel must never appear.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(pty, "openpty"), reason="needs a pseudo-terminal")


def _folder(root: Path, model_type: str, sentinel: Path) -> Path:
    from rankcollapse.models.loading import load_model

    folder = root / model_type
    model = load_model("tiny:bert")
    model.hf_model.save_pretrained(folder)
    model.tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = model_type
    config["auto_map"] = {"AutoConfig": "configuration_x.XConfig", "AutoModel": "modeling_x.XModel"}
    (folder / "config.json").write_text(json.dumps(config))
    code = f"open({str(sentinel)!r}, 'w').write('ran')\n"
    (folder / "configuration_x.py").write_text(
        code + "from transformers import PretrainedConfig\n"
        "class XConfig(PretrainedConfig):\n    model_type = 'x'\n"
    )
    (folder / "modeling_x.py").write_text(code)
    return folder


def _on_a_terminal_answering_yes(args: list[str], timeout: float = 120) -> tuple[int, str]:
    """Run ``python -m rankcollapse ARGS`` with stdin/stdout/stderr on a pty that answers ``y``."""
    master, slave = pty.openpty()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rankcollapse", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    seen = b""
    end = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                seen += chunk
                if b"[y/N]" in chunk or b"custom code" in chunk:
                    os.write(master, b"y\n")
        proc.wait(timeout=max(1.0, end - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            while True:
                ready, _, _ = select.select([master], [], [], 0.1)
                if not ready:
                    break
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                seen += chunk
        except OSError:
            pass
        os.close(master)
    return proc.returncode, seen.decode(errors="replace")


@pytest.mark.slow
def test_a_folder_that_ships_code_never_runs_it_nor_prompts(tmp_path: Path) -> None:
    sentinel = tmp_path / "the-folder-code-ran"
    known = _folder(tmp_path, "bert", sentinel)
    code, text = _on_a_terminal_answering_yes(
        ["analyze", "--model", str(known), "--samples", "2", "--tokens", "8", "--out", str(tmp_path / "a")]
    )
    assert code == 0, text
    assert "[y/N]" not in text and not sentinel.exists(), text
    only_code = _folder(tmp_path, "rc-code-only", sentinel)
    code, text = _on_a_terminal_answering_yes(
        [
            "analyze",
            "--model",
            str(only_code),
            "--samples",
            "2",
            "--tokens",
            "8",
            "--out",
            str(tmp_path / "b"),
        ]
    )
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "never runs a model folder's code" in lines[0], text
    assert "[y/N]" not in text and not sentinel.exists(), text
