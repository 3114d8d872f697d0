"""The network only when asked, against a local fake Hugging Face endpoint (``HF_ENDPOINT``).

A tiny HTTP server in this process serves what ``huggingface_hub`` asks of the Hub for a snapshot
(``/api/models/<repo>/revision/main``, ``/api/models/<repo>/tree/<sha>``, ``HEAD``/``GET``
``/<repo>/resolve/<sha>/<file>``) from a tiny BERT folder, and records every request. Each command
runs as a process with ``HF_HUB_OFFLINE`` unset and the endpoint pointed at the fake:

- without ``--download`` a hub name (or a paper checkpoint) fails at once with one line naming the
  local models, and no request reaches the endpoint;
- with ``--download`` the download is announced on stderr before it starts, the model is fetched
  (config, safetensors, tokenizer: no pickle) and analyzed, and the next run finds it cached, offline;
- ``paper:bert-base-uncased --download`` is the paper's checkpoint, not a stand-in;
- an unknown repository, a server that accepts but never answers, a refused connection, and
  ``HF_HUB_OFFLINE=1`` with ``--download``: one line, within the 30 s bound.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """The Hub's snapshot API for ``repos`` (repo -> {file name: bytes}); ``requests`` lists what came."""

    def __init__(self, repos: dict[str, dict[str, bytes]]) -> None:
        self.repos = repos
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(
                self, code: int, body: bytes = b"", headers: dict[str, str] | None = None, head: bool = False
            ) -> None:
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _route(self, head: bool) -> None:
                hub.requests.append((self.command, self.path))
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:2] == ["api", "models"] and ("revision" in parts or "tree" in parts):
                    at = parts.index("revision" if "revision" in parts else "tree")
                    files = hub.repos.get("/".join(parts[2:at]))
                    if files is None:
                        return self._send(
                            404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}
                        )
                    if parts[at] == "revision":
                        body = {
                            "id": "/".join(parts[2:at]),
                            "sha": SHA,
                            "siblings": [{"rfilename": f} for f in files],
                        }
                    else:
                        body = [
                            {"type": "file", "path": f, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                            for f, d in files.items()
                        ]
                    return self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
                if "resolve" in parts:
                    at = parts.index("resolve")
                    data = hub.repos.get("/".join(parts[:at]), {}).get("/".join(parts[at + 2 :]))
                    if data is None:
                        return self._send(404, b"", {"X-Error-Code": "EntryNotFound"})
                    tag = '"' + hashlib.sha256(data).hexdigest() + '"'
                    return self._send(200, data, {"X-Repo-Commit": SHA, "ETag": tag}, head)
                return self._send(404)

            def do_GET(self) -> None:
                self._route(False)

            def do_HEAD(self) -> None:
                self._route(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The files of a tiny BERT checkpoint (config, safetensors, tokenizer), and a pickle that must
    never be fetched."""
    from rankcollapse.models.loading import load_model

    folder = tmp_path_factory.mktemp("tiny-bert")
    model = load_model("tiny:bert")
    model.hf_model.save_pretrained(folder)
    model.tokenizer.save_pretrained(folder)
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    files["pytorch_model.bin"] = b"a pickle that is never fetched"
    return files


@pytest.fixture
def hub(tiny_bert: dict[str, bytes]) -> Iterator[FakeHub]:
    fake = FakeHub({"someone/tiny-bert": tiny_bert, "bert-base-uncased": tiny_bert})
    yield fake
    fake.close()


def run(
    args: list[str], tmp_path: Path, endpoint: str, *, offline: bool = False, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """``python -m rankcollapse ARGS`` with the Hub at ``endpoint``, a fresh cache, network allowed by the
    environment (``HF_HUB_OFFLINE`` unset) unless ``offline``. ``timeout``: the promised bound."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RANKCOLLAPSE_DOWNLOAD")
    }
    env.update(
        {
            "HF_ENDPOINT": endpoint,
            "HF_HOME": str(tmp_path / "hf"),
            "OMP_NUM_THREADS": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
    )
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "rankcollapse", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


ANALYZE = ["analyze", "--samples", "2", "--tokens", "8"]


def test_without_download_a_hub_name_fails_at_once_and_touches_no_network(
    hub: FakeHub, tmp_path: Path
) -> None:
    for model in ("someone/tiny-bert", "bert-base-uncased"):
        proc = run([*ANALYZE, "--model", model, "--out", str(tmp_path / "o")], tmp_path, hub.url)
        err = lines(proc.stderr)
        assert proc.returncode == 2 and len(err) == 1 and err[0].startswith("rankcollapse: error:"), (
            proc.stderr
        )
        assert "--download" in err[0] and ("minilm" in err[0])
    assert hub.requests == []


def test_download_is_announced_fetches_safetensors_only_and_is_cached(hub: FakeHub, tmp_path: Path) -> None:
    out = tmp_path / "o"
    proc = run(
        [*ANALYZE, "--model", "someone/tiny-bert", "--download", "--out", str(out)],
        tmp_path,
        hub.url,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    err = lines(proc.stderr)
    assert err and err[0].startswith("rankcollapse: downloading 'someone/tiny-bert' from " + hub.url), err
    fetched = {
        path.rsplit("/", 1)[-1] for method, path in hub.requests if method == "GET" and "/resolve/" in path
    }
    assert "model.safetensors" in fetched and "config.json" in fetched and "pytorch_model.bin" not in fetched
    assert (out / "metrics.csv").is_file()
    seen = len(hub.requests)
    again = run(
        [*ANALYZE, "--model", "someone/tiny-bert", "--out", str(tmp_path / "o2")],
        tmp_path,
        hub.url,
        offline=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert "downloading" not in again.stderr and len(hub.requests) == seen  # cached: offline, no request


def test_paper_checkpoint_with_download_is_the_checkpoint_not_a_stand_in(
    hub: FakeHub, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    proc = run(
        [*ANALYZE, "--model", "paper:bert-base-uncased", "--download", "--out", str(out)],
        tmp_path,
        hub.url,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    model = json.loads((out / "config.json").read_text())["config"]["model"]
    assert "bert-base-uncased (pretrained)" in json.dumps(model) and "stand-in" not in json.dumps(model)


def _silent_server() -> tuple[socket.socket, str]:
    """A socket that accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def _closed_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "case", ["unknown repository", "never answers", "connection refused", "HF_HUB_OFFLINE"]
)
def test_a_failed_download_is_one_line_within_the_bound(case: str, hub: FakeHub, tmp_path: Path) -> None:
    silent = None
    endpoint, model, offline = hub.url, "someone/tiny-bert", False
    if case == "unknown repository":
        model = "someone/no-such-model"
    elif case == "never answers":
        silent, endpoint = _silent_server()
    elif case == "connection refused":
        endpoint = _closed_port()
    else:
        offline = True
    try:
        proc = run(
            [*ANALYZE, "--model", model, "--download", "--out", str(tmp_path / "o")],
            tmp_path,
            endpoint,
            offline=offline,
            timeout=30,
        )
    finally:
        if silent is not None:
            silent.close()
    err = [line for line in lines(proc.stderr) if not line.startswith("rankcollapse: downloading")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(err) == 1 and err[0].startswith("rankcollapse: error: cannot download"), proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_tokenizer_name_goes_through_the_hub_gate_and_never_hangs(tmp_path: Path) -> None:
    """``analyze --tokenizer NAME`` without --download went online and, behind a server that never
    answers, hung with no output; now a name not cached is refused at once, with no request."""
    silent, endpoint = _silent_server()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), RANKCOLLAPSE_DOWNLOAD="")
        code = (
            "from rankcollapse.models.inputs import load_tokenizer\n"
            "from rankcollapse.edge.errors import RankCollapseError\n"
            "try:\n    load_tokenizer('someone/never-cached')\nexcept RankCollapseError as e:\n    print(e)\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
        )
    finally:
        silent.close()
    assert proc.returncode == 0, proc.stderr
    assert "is not in the local Hugging Face cache; pass --download" in proc.stdout, proc.stdout
