"""No network without asking, by mechanism: every entry point that names a model or a tokenizer opens
zero connections when downloads are not allowed, with ``HF_HUB_OFFLINE`` unset as on a user's machine.

A local listener stands in for the proxy (``HTTPS_PROXY`` / ``HTTP_PROXY``) and records every connection
(``CONNECT huggingface.co:443``). ``HF_HOME`` is a fresh folder, so ``huggingface_hub``'s 24-hour cache of
the agent registry is missing: before ``edge.network`` held the hub library offline, building request
headers fetched it even under ``local_files_only=True``, and ``analyze --tokenizer NAME`` opened one
connection before its one-line refusal.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


class Listener:
    """A TCP listener on 127.0.0.1 recording the first line of every connection, then closing it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                first = conn.recv(256).split(b"\r\n")[0].decode("latin-1")
            except OSError:
                first = "(nothing sent)"
            self.seen.append(first or "(nothing sent)")
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def proxy() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.close()


def _env(proxy: Listener, tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RANKCOLLAPSE_DOWNLOAD",
                     "RANKCOLLAPSE_HELD_OFFLINE", "NO_PROXY", "no_proxy")
    }
    env.update(HTTPS_PROXY=proxy.url, HTTP_PROXY=proxy.url, https_proxy=proxy.url, http_proxy=proxy.url,
               HF_HOME=str(tmp_path / "hf"), OMP_NUM_THREADS="1")
    return env


def _run(args: list[str], proxy: Listener, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=_env(proxy, tmp_path), capture_output=True, text=True, timeout=240,
                          check=False, cwd=tmp_path)


CLI = [sys.executable, "-m", "rankcollapse"]
ANALYZE = [*CLI, "analyze", "--samples", "2", "--tokens", "8", "--no-table"]

#: CLI calls that name a model or a tokenizer by a hub name that is not cached: one line, exit 2, and the
#: line says how to allow the download.
REFUSED = {
    "analyze --tokenizer owner/name": [*ANALYZE, "--model", "tiny:bert", "--tokenizer",
                                       "someone/never-cached"],
    "analyze --tokenizer bare-name": [*ANALYZE, "--model", "tiny:bert", "--tokenizer", "bert-base-uncased"],
    "analyze --model bare paper name": [*ANALYZE, "--model", "bert-base-uncased"],
    "analyze --model owner/name": [*ANALYZE, "--model", "someone/never-cached"],
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_hub_name_without_download_is_one_line_and_no_connection(case: str, proxy: Listener,
                                                                   tmp_path: Path) -> None:
    proc = _run([*REFUSED[case], "--out", str(tmp_path / "o")], proxy, tmp_path)
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(err) == 1 and err[0].startswith("rankcollapse: error:"), proc.stderr
    assert "--download" in err[0] and "couldn't connect" not in err[0].lower(), err[0]
    assert proxy.seen == [], proxy.seen


def test_a_paper_checkpoint_not_cached_runs_its_stand_in_with_no_connection(proxy: Listener,
                                                                           tmp_path: Path) -> None:
    args = [*ANALYZE, "--model", "paper:bert-base-uncased", "--out", str(tmp_path / "o")]
    proc = _run(args, proxy, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proxy.seen == [], proxy.seen


#: Python entry points, each as a script; transformers (and so huggingface_hub) imported *before*
#: rankcollapse where a user would do so, which the switch must also cover.
SCRIPTS = {
    "API: load_tokenizer, hub imported first": """
        import huggingface_hub, transformers
        from rankcollapse.models.inputs import load_tokenizer
        from rankcollapse.edge.errors import RankCollapseError
        try:
            load_tokenizer("someone/never-cached")
        except RankCollapseError as e:
            print("refused:", e)
    """,
    "API: analyze an in-memory model named by a hub name": """
        import transformers
        from rankcollapse.edge.errors import RankCollapseError
        from rankcollapse.models import AnalyzeConfig, analyze
        from rankcollapse.models.loading import load_model
        hf = load_model("tiny:gpt2").hf_model
        hf.config._name_or_path = "openai-community/gpt2"   # its own tokenizer: a hub name, not cached
        try:
            analyze(AnalyzeConfig(samples=2, tokens=8, diagnostics=True), model=hf)
        except RankCollapseError as e:   # no tokenizer of its own in the cache, and not BERT's vocabulary
            print("refused:", e)
    """,
    "monitor: a probe of a model named by a hub name": """
        import torch, transformers
        from rankcollapse.models.loading import load_model
        from rankcollapse.monitor import Monitor
        hf = load_model("tiny:gpt2").hf_model
        hf.config._name_or_path = "openai-community/gpt2"
        monitor = Monitor(every=1, diagnostics=True)
        rows = monitor.step(hf, torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0)))
        print("rows", len(rows))
    """,
}


@pytest.mark.parametrize("case", SCRIPTS, ids=list(SCRIPTS))
def test_python_entry_points_open_no_connection(case: str, proxy: Listener, tmp_path: Path) -> None:
    proc = _run([sys.executable, "-c", textwrap.dedent(SCRIPTS[case])], proxy, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "refused:" in proc.stdout or "rows" in proc.stdout, proc.stdout
    assert proxy.seen == [], proxy.seen


def test_reproduce_naming_a_paper_checkpoint_opens_no_connection(proxy: Listener, tmp_path: Path) -> None:
    """A sweep whose grid names paper checkpoints (not cached: their stand-ins run) and a hub name."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "hub.yaml").write_text(
        "title: hub names\ntask: model_curves\n"
        "base: {variants: [full], masks: [causal], layers: 2, corpus: wikipedia, tokens: 8, samples: 1}\n"
        "grid: {model: ['paper:bert-base-uncased', 'someone/never-cached'], seed: [0]}\n"
    )
    proc = _run([*CLI, "reproduce", "--config-dir", str(cfg), "--profile", "full", "--no-progress", "--out",
                 str(tmp_path / "out")], proxy, tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proxy.seen == [], (proxy.seen, proc.stderr[-2000:])


def test_download_lifts_only_our_switch_never_the_users(tmp_path: Path) -> None:
    """``allow_downloads`` lifts the offline switch ``rankcollapse`` held, in this process and for its
    workers; a user's own ``HF_HUB_OFFLINE=1`` stays on."""
    code = textwrap.dedent("""
        import os, huggingface_hub.constants as c
        import rankcollapse
        from rankcollapse.edge.network import allow_downloads, user_offline
        held = (c.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE"))
        allow_downloads()
        print(held, c.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE"), user_offline())
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RANKCOLLAPSE_DOWNLOAD",
                        "RANKCOLLAPSE_HELD_OFFLINE")}
    mine = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert mine.stdout.split() == ["(True,", "'1')", "False", "None", "False"], mine.stdout
    users = subprocess.run([sys.executable, "-c", code], env={**env, "HF_HUB_OFFLINE": "1"},
                           capture_output=True, text=True, check=True)
    assert users.stdout.split() == ["(True,", "'1')", "True", "1", "True"], users.stdout
