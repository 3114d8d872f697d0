"""Hostile files for every command that reads one: property-based, through the CLI front door.

Whatever a path names -- a FIFO, a link to /dev/zero, a directory, a socket, a dangling or looping
link, a name over 255 bytes, a path under a regular file, a file whose reads fail (EIO), a file
over its kind's cap, a .npy header claiming 74.5 GiB, a truncated or pickled array, a YAML alias
bomb, a python tag, JSON nested 200 000 deep, corrupt, truncated or pickled weights, a model folder
that needs its own code -- every command that reads it answers at once with exit 2 and one line
``rankcollapse: error: ...``, no traceback, bounded memory, and runs nothing from the file; so does
``scripts/write_results.py`` on a reproduce folder whose claims.json or experiments.json is hostile.

Each example runs ``rankcollapse.cli.main.main`` in this process under a guard: an alarm turns a
blocking open or read into a failure (not a hung suite), and an address-space limit turns an
unbounded read into a failure (not an OOM-killed machine). Hypothesis draws the file's name (odd
characters, spaces, newlines, non-ASCII) and the junk bytes; every (command, hostile kind) pair is
run. The pickled and YAML payloads would create a sentinel file if run; it must not exist.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import resource
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from rankcollapse.cli.main import main

EXAMPLES = settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
GUARD_SECONDS = 30
GUARD_BYTES = 3 << 30
SENTINEL = Path(tempfile.gettempdir()) / f"rankcollapse-hostile-ran-{os.getpid()}"


class HungError(Exception):
    """The command blocked (a FIFO open, an endless read) past the guard's alarm."""


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Fail, do not hang or exhaust the machine: SIGALRM after ``GUARD_SECONDS``, and at most
    ``GUARD_BYTES`` more address space than this process already has."""

    def ring(signum: int, frame: object) -> None:
        raise HungError(f"blocked for {GUARD_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, ring)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as fh:
        current = int(fh.read().split()[0]) * resource.getpagesize()
    cap = current + GUARD_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    signal.alarm(GUARD_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_cli(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with guarded(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except BaseException as exc:  # a hang, a MemoryError, any escape: the failure looked for
            pytest.fail(
                f"rankcollapse {' '.join(args)[:300]!r} raised {type(exc).__name__}: {str(exc)[:300]}"
            )
    return code, err.getvalue()


def assert_refused(args: list[str]) -> str:
    code, err = run_cli(args)
    shown = f"rankcollapse {' '.join(args)}"[:300]
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, f"{shown}: exit {code}\n{err[-1500:]}"
    assert "Traceback" not in err, f"{shown}: traceback\n{err[-1500:]}"
    assert len(lines) == 1 and lines[0].startswith("rankcollapse: error:"), f"{shown}:\n{err[-1500:]}"
    assert len(lines[0]) <= 500, lines[0]
    assert not SENTINEL.exists(), f"{shown}: the file's code ran"
    return lines[0]


# ---- hostile files -----------------------------------------------------------------------------------
class Scene:
    """A temporary folder in which one hostile path is made (sockets live in a short folder:
    AF_UNIX paths are limited to 108 bytes)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rc-hostile-"))
        self._socks: list[socket.socket] = []

    def socket_at(self, path: Path) -> None:
        short = Path(tempfile.mkdtemp(prefix="rcs", dir="/tmp")) / "s"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(short))
        self._socks.append(sock)
        path.symlink_to(short)

    def close(self) -> None:
        for sock in self._socks:
            name = sock.getsockname()
            sock.close()
            shutil.rmtree(Path(name).parent, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)
        SENTINEL.unlink(missing_ok=True)


class RunCode:
    """Unpickling this runs code (creates the sentinel); nothing may unpickle it."""

    def __reduce__(self) -> tuple:
        return (open, (str(SENTINEL), "w"))


def _npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as fh:
        fh.truncate(size)


# a maker writes the hostile object at ``path`` and returns the path to give the command
Maker = Callable[[Scene, Path, bytes], Path]


def _link(target: str) -> Maker:
    def make(scene: Scene, path: Path, junk: bytes) -> Path:
        path.symlink_to(target)
        return path

    return make


def _write(data: Callable[[bytes], bytes]) -> Maker:
    def make(scene: Scene, path: Path, junk: bytes) -> Path:
        path.write_bytes(data(junk))
        return path

    return make


def _fifo(scene: Scene, path: Path, junk: bytes) -> Path:
    os.mkfifo(path)
    return path


def _directory(scene: Scene, path: Path, junk: bytes) -> Path:
    path.mkdir()
    return path


def _socket(scene: Scene, path: Path, junk: bytes) -> Path:
    scene.socket_at(path)
    return path


def _long_name(scene: Scene, path: Path, junk: bytes) -> Path:
    return path.parent / ("n" * 300)


def _under_file(scene: Scene, path: Path, junk: bytes) -> Path:
    path.write_bytes(b"a regular file\n")
    return path / "inside"


def _loop(scene: Scene, path: Path, junk: bytes) -> Path:
    path.symlink_to(path.name)
    return path


def _nul(scene: Scene, path: Path, junk: bytes) -> Path:
    return Path(str(path) + "\x00tail")


def _oversize(size: int) -> Maker:
    def make(scene: Scene, path: Path, junk: bytes) -> Path:
        _sparse(path, size)
        return path

    return make


GENERIC: dict[str, Maker] = {
    "fifo": _fifo,
    "link to /dev/zero": _link("/dev/zero"),
    "link to /dev/urandom": _link("/dev/urandom"),
    "directory": _directory,
    "socket": _socket,
    "dangling link": _link("/nonexistent/rankcollapse/target"),
    "link loop": _loop,
    "name over 255 bytes": _long_name,
    "path under a regular file": _under_file,
    "NUL in the name": _nul,
    "reads fail with EIO (/proc/self/mem)": _link("/proc/self/mem"),
    "empty file": _write(lambda junk: b""),
    "junk bytes": _write(lambda junk: b"\xff\xfe" + junk),
}

NPY: dict[str, Maker] = {
    "npy header claiming 74.5 GiB": _write(lambda junk: _npy_header((100_000, 100_000)) + junk[:64]),
    "npy bool header claiming 10^12 entries": _write(lambda junk: _npy_header((1_000_000, 1_000_000), "|b1")),
    "npy truncated data": _write(lambda junk: _npy_header((3, 3)) + b"\x00" * 20),
    "npy negative shape": _write(lambda junk: _npy_header((-1, 3))),
    "npy of pickled objects": _write(lambda junk: _npy_object()),
    "npy header that is not a dict": _write(
        lambda junk: b"\x93NUMPY\x01\x00\x10\x00" + b"__import__('os')\n"
    ),
}


def _npy_object() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array([RunCode(), 1], dtype=object), allow_pickle=True)
    return buf.getvalue()


def _yaml_bomb(junk: bytes) -> bytes:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 12):
        name, prev = chr(ord("a") + i), chr(ord("a") + i - 1)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines += ["name: x", "title: bomb", "task: toy", "grid: {n: *l}"]
    return ("\n".join(lines) + "\n").encode()


YAML: dict[str, Maker] = {
    "yaml alias bomb (9^12 nodes in 600 bytes)": _write(_yaml_bomb),
    "yaml merge-key bomb": _write(lambda junk: _merge_bomb()),
    "yaml recursive alias": _write(lambda junk: b"name: x\ntitle: t\ntask: toy\ngrid: &g {n: [*g]}\n"),
    "yaml python tag": _write(
        lambda junk: f"!!python/object/apply:builtins.open ['{SENTINEL}', 'w']\n".encode()
    ),
    "yaml nested 100000 deep": _write(lambda junk: b"[" * 100_000 + b"]" * 100_000),
    "yaml over 1 MiB": _oversize((1 << 20) + 1),
    "yaml that is not UTF-8": _write(lambda junk: b"name: \xff\xfe" + junk),
}


def _merge_bomb() -> bytes:
    lines = ["a0: &a0 {k0: 1, k1: 2, k2: 3, k3: 4}"]
    for i in range(1, 16):
        lines.append(f"a{i}: &a{i} {{<<: [" + ", ".join([f"*a{i - 1}"] * 8) + "]}")
    return ("\n".join(lines) + "\n").encode()


JSON: dict[str, Maker] = {
    "json nested 200000 deep": _write(lambda junk: b"[" * 200_000 + b"]" * 200_000),
    "json that is not JSON": _write(lambda junk: b'{"model_type": "gpt2", ' + junk),
    "json over 16 MiB": _oversize((16 << 20) + 1),
}

def _yaml_text(text: Callable[[bytes], str]) -> Maker:
    return _write(lambda junk: text(junk).encode())


def _junk_word(junk: bytes) -> str:
    """The junk as a YAML double-quoted string (JSON is YAML): a word where a number goes."""
    return json.dumps("x" + junk.decode("latin-1"))


_SIM = "title: t\ntask: simulate\n"
#: Custom sweeps that parse as YAML but say nonsense: each one line before any run, never a traceback.
YAML_PARAMS: dict[str, Maker] = {
    "yaml param: a word as a size": _yaml_text(lambda j: _SIM + f"base: {{n: {_junk_word(j)}, d: 2}}\n"),
    "yaml param: a negative size": _yaml_text(lambda j: _SIM + f"base: {{n: {-1 - len(j)}, d: 2}}\n"),
    "yaml param: a size of 10^(64 + junk)": _yaml_text(
        lambda j: _SIM + f"base: {{n: 1{'0' * (64 + len(j))}}}\n"
    ),
    "yaml param: a list as a size": _yaml_text(lambda j: _SIM + f"base: {{layers: [{len(j)}, 2]}}\n"),
    "yaml param: a missing key": _yaml_text(lambda j: "title: t\ntask: ln_bounds\nbase: {d: 2}\n"),
    "yaml param: base a list": _yaml_text(lambda j: _SIM + f"base: [{_junk_word(j)}]\n"),
    "yaml param: profiles a number": _yaml_text(lambda j: _SIM + f"base: {{n: 4}}\nprofiles: {len(j)}\n"),
    "yaml param: a profile's grid a word": _yaml_text(
        lambda j: _SIM + f"base: {{n: 4}}\nprofiles: {{tiny: {{grid: {_junk_word(j)}}}}}\n"
    ),
}

#: A run's metrics.csv that is no table a figure can be drawn from.
TABLE: dict[str, Maker] = {
    "csv: a word as a layer": _write(lambda junk: b"layer,mu_rel\nx" + junk + b",0.5\n"),
    "csv: no mu_rel column": _write(lambda junk: b"layer,mu\n0,0.5\n"),
    "csv: NaN as a layer": _write(lambda junk: b"layer,mu_rel\nnan,0.5\n"),
    "csv: a word in a number column": _write(
        lambda junk: b"layer,mu_rel\n0,x" + junk.replace(b"\n", b"").replace(b",", b"") + b"\n"
    ),
    "csv: a ragged row": _write(lambda junk: b"layer,mu_rel\n0,0.5,1\n"),
    "csv: header only": _write(lambda junk: b"layer,mu_rel\n"),
}

TEXT: dict[str, Maker] = {
    "text over 256 MiB": _oversize((256 << 20) + 1),
    "text that is not UTF-8": _write(lambda junk: b"caf\xe9 " * 100 + junk),
}


# ---- model folders ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT folder (config, safetensors, tokenizer) every folder case starts from."""
    from rankcollapse.models.loading import load_model

    folder = tmp_path_factory.mktemp("template") / "bert"
    model = load_model("tiny:bert")
    model.hf_model.save_pretrained(folder)
    model.tokenizer.save_pretrained(folder)
    return folder


def _edit_config(folder: Path, **fields: object) -> None:
    import json

    config = json.loads((folder / "config.json").read_text())
    config.update(fields)
    (folder / "config.json").write_text(json.dumps(config))


def _replace(folder: Path, name: str, maker: Callable[[Path], None]) -> None:
    (folder / name).unlink()
    maker(folder / name)


def _weights_bytes(folder: Path) -> bytes:
    return (folder / "model.safetensors").read_bytes()


def _drop_weights(folder: Path, part: str) -> None:
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    kept = {k: v for k, v in load_file(path).items() if part not in k}
    save_file(kept, path, metadata={"format": "pt"})


FolderMaker = Callable[[Path], None]
FOLDER: dict[str, FolderMaker] = {
    "weights: corrupt safetensors header": lambda f: (f / "model.safetensors").write_bytes(
        (16).to_bytes(8, "little") + b"{not json at all" + b"x" * 64
    ),
    "weights: truncated safetensors": lambda f: (f / "model.safetensors").write_bytes(
        _weights_bytes(f)[: len(_weights_bytes(f)) // 2]
    ),
    "weights: header claiming 1 TB": lambda f: (f / "model.safetensors").write_bytes(
        (10**12).to_bytes(8, "little") + b"{}"
    ),
    "weights: a pickle that runs code": lambda f: (
        (f / "model.safetensors").unlink(),
        (f / "pytorch_model.bin").write_bytes(pickle.dumps({"w": RunCode()})),
    ),
    "weights: a FIFO": lambda f: _replace(f, "model.safetensors", os.mkfifo),
    "weights: one layer missing (it would load at its random init)": lambda f: _drop_weights(f, ".layer.1."),
    "config.json: a FIFO": lambda f: _replace(f, "config.json", os.mkfifo),
    "config.json: a link to /dev/zero": lambda f: _replace(
        f, "config.json", lambda p: p.symlink_to("/dev/zero")
    ),
    "config.json: nested 200000 deep": lambda f: (f / "config.json").write_bytes(
        b"[" * 200_000 + b"]" * 200_000
    ),
    "config.json: over 16 MiB": lambda f: _sparse(f / "config.json", (16 << 20) + 1),
    "config.json: auto_map code of its own": lambda f: (
        _edit_config(
            f,
            model_type="rc-hostile",
            auto_map={"AutoConfig": "configuration_x.XConfig", "AutoModel": "modeling_x.XModel"},
        ),
        (f / "configuration_x.py").write_text(f"open({str(SENTINEL)!r}, 'w')\n"),
        (f / "modeling_x.py").write_text(f"open({str(SENTINEL)!r}, 'w')\n"),
    ),
    "config.json: unknown model_type": lambda f: _edit_config(f, model_type="frobnicator"),
    "sizes: 10^6 layers of width 1024 (it built for minutes)": lambda f: _edit_config(
        f, num_hidden_layers=10**6, hidden_size=1024, num_attention_heads=16
    ),
    "sizes: 0 heads (integer modulo by zero)": lambda f: _edit_config(f, num_attention_heads=0),
    "sizes: a vocabulary of 0": lambda f: _edit_config(f, vocab_size=0),
    "sizes: -3 layers": lambda f: _edit_config(f, num_hidden_layers=-3),
    "tokenizer: no tokenizer files": lambda f: [p.unlink() for p in list(f.iterdir()) if "token" in p.name],
    "tokenizer: a link to /dev/zero": lambda f: _replace(
        f, "tokenizer.json", lambda p: p.symlink_to("/dev/zero")
    ),
    "tokenizer: corrupt tokenizer.json": lambda f: (f / "tokenizer.json").write_bytes(b'{"version": 1.0, '),
}


# ---- the commands ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reader:
    """A command reading one file: ``args(path, out)`` builds its command line."""

    name: str
    args: Callable[[str, str], list[str]]
    kinds: tuple[str, ...]


_ALL: dict[str, Maker] = {**GENERIC, **NPY, **YAML, **JSON, **TEXT, **YAML_PARAMS, **TABLE}
_PATH_SHAPES = ("name over 255 bytes", "path under a regular file", "NUL in the name")
_NPY_READERS = (*GENERIC, *NPY)
READERS = (
    Reader("mask file:", lambda p, o: ["mask", f"file:{p}", "--tokens", "4"], _NPY_READERS),
    Reader(
        "simulate --mask file:",
        lambda p, o: [
            "simulate",
            "--mask",
            f"file:{p}",
            "--tokens",
            "4",
            "--d",
            "2",
            "--layers",
            "2",
            "--no-progress",
            "--out",
            o,
        ],
        _NPY_READERS,
    ),
    Reader(
        "equilibria --value",
        lambda p, o: ["equilibria", "--tokens", "3", "--d", "3", "--value", p, "--layers", "5", "--starts",
                      "2"],
        _NPY_READERS,
    ),
    Reader("mask --hf-config", lambda p, o: ["mask", "--hf-config", p, "--tokens", "4"], (*GENERIC, *JSON)),
    Reader(
        "analyze --text-file",
        lambda p, o: [
            "analyze",
            "--model",
            "tiny:bert",
            "--text-file",
            p,
            "--samples",
            "2",
            "--tokens",
            "8",
            "--out",
            o,
        ],
        (*GENERIC, *TEXT),
    ),
    Reader(
        "reproduce --config-dir (its x.yaml)",
        lambda p, o: [
            "reproduce",
            "--config-dir",
            str(Path(p).parent),
            "--profile",
            "tiny",
            "--no-progress",
            "--out",
            o,
        ],
        (
            *(
                k
                for k in GENERIC
                if k not in ("name over 255 bytes", "path under a regular file", "NUL in the name")
            ),
            *YAML,
            *YAML_PARAMS,
        ),
    ),
    Reader(
        "plot (its metrics.csv)",
        lambda p, o: ["plot", str(Path(p).parent), "--out", o + ".png"],
        (*(k for k in GENERIC if k not in _PATH_SHAPES), *TABLE),
    ),
    Reader(
        "reproduce --config-dir (the folder)",
        lambda p, o: ["reproduce", "--config-dir", p, "--profile", "tiny", "--no-progress", "--out", o],
        tuple(k for k in GENERIC if k not in ("directory",)),
    ),
)
CASES = [(r, k) for r in READERS for k in r.kinds]

#: File names hypothesis draws: any characters a file name may hold (no '/' or NUL), up to 60 of them.
NAMES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=60
).filter(lambda s: s not in (".", "..") and len(s.encode()) < 200)


_RUN: list[Path] = []


def _finished_run() -> Path:
    """A finished simulate run (config.json, metrics.csv, marker), made once per session."""
    if not _RUN:
        run = Path(tempfile.mkdtemp(prefix="rc-hostile-run-")) / "run"
        args = ["simulate", "--tokens", "4", "--d", "2", "--layers", "2", "--no-progress", "--out", str(run)]
        assert main(args) == 0
        _RUN.append(run)
    return _RUN[0]


def _place(scene: Scene, reader: Reader, name: str) -> Path:
    """Where the hostile object goes: a file named ``name``, ``x.yaml`` in a folder named ``name``, or the
    ``metrics.csv`` of a finished run copied to a folder named ``name``."""
    if reader.name == "plot (its metrics.csv)":
        folder = scene.root / name
        shutil.copytree(_finished_run(), folder)
        (folder / "metrics.csv").unlink()
        return folder / "metrics.csv"
    if reader.name == "reproduce --config-dir (its x.yaml)":
        folder = scene.root / name
        folder.mkdir()
        return folder / "x.yaml"
    return scene.root / name


@pytest.mark.parametrize(("reader", "kind"), CASES, ids=[f"{r.name} <- {k}" for r, k in CASES])
@EXAMPLES
@example(name="plain.npy", junk=b"")
@given(name=NAMES, junk=st.binary(max_size=64))
def test_a_hostile_file_is_one_line_and_exit_2(reader: Reader, kind: str, name: str, junk: bytes) -> None:
    scene = Scene()
    try:
        path = _ALL[kind](scene, _place(scene, reader, name), junk)
        out = scene.root / "out"
        assert_refused(reader.args(str(path), str(out)))
        assert not (out / "metrics.csv").exists()  # nothing that looks like a finished run
    finally:
        scene.close()


FOLDER_CASES = [
    (cmd, k) for cmd in ("analyze", "mask") for k in FOLDER if cmd == "analyze" or k.startswith("config.json")
]


@pytest.mark.parametrize(
    ("command", "kind"), FOLDER_CASES, ids=[f"{c} --model <- {k}" for c, k in FOLDER_CASES]
)
@EXAMPLES
@example(name="model")
@given(name=NAMES)
def test_a_hostile_model_folder_is_one_line_and_exit_2(
    model_template: Path, command: str, kind: str, name: str
) -> None:
    scene = Scene()
    try:
        folder = scene.root / name
        shutil.copytree(model_template, folder)
        FOLDER[kind](folder)
        out = scene.root / "out"
        args = (
            ["analyze", "--model", str(folder), "--samples", "2", "--tokens", "8", "--out", str(out)]
            if command == "analyze"
            else ["mask", "--model", str(folder), "--tokens", "4"]
        )
        line = assert_refused(args)
        assert not (out / "metrics.csv").exists()
        if command == "analyze" and kind.startswith("tokenizer: no"):
            assert "no tokenizer files" in line  # not "use a longer text"
        if command == "analyze" and "auto_map" in kind:
            assert "never runs a model folder's code" in line
        if command == "analyze" and "layer missing" in kind:
            assert "random init" in line and "layer.1." in line
        if command == "analyze" and "unknown model_type" in kind:
            assert "frobnicator" in line and "offline" not in line
    finally:
        scene.close()


def test_the_intact_template_folder_runs(model_template: Path, tmp_path: Path) -> None:
    """The control: the same folder, unharmed, analyzes fine (the refusals above are the files')."""
    code, err = run_cli(
        [
            "analyze",
            "--model",
            str(model_template),
            "--samples",
            "2",
            "--tokens",
            "8",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0, err
    assert (tmp_path / "out" / "metrics.csv").is_file()


# ---- scripts/write_results.py ------------------------------------------------------------------------
#: What a reproduce folder's claims table or metadata may hold besides a hostile file: no table at all.
CLAIMS: dict[str, Maker] = {
    "claims: {} (no table)": _write(lambda junk: b"{}"),
    "claims: an empty list": _write(lambda junk: b"[]"),
    "claims: a row that is no claim": _write(lambda junk: json.dumps([{"x": junk.hex()}]).encode()),
    "claims: a list of numbers": _write(lambda junk: b"[1, 2, 3]"),
}
_RESULTS_KINDS = (*(k for k in GENERIC if k not in _PATH_SHAPES), *JSON, *CLAIMS)
_RESULTS_CASES = [(f, k) for f in ("claims.json", "experiments.json") for k in _RESULTS_KINDS]


def run_write_results(args: list[str]) -> tuple[int, str]:
    """``python scripts/write_results.py ARGS`` in this process, under the same guard as the CLI."""
    import importlib.util
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "write_results.py"
    spec = importlib.util.spec_from_file_location("write_results_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = [str(script), *args]
    try:
        with guarded(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = module.main()
            except BaseException as exc:  # a hang, a MemoryError, any escape: the failure looked for
                shown = " ".join(args)[:300]
                pytest.fail(f"write_results.py {shown!r} raised {type(exc).__name__}: {exc!s:.300}")
    finally:
        sys.argv = argv
    return code, err.getvalue()


def _judged_folder(folder: Path) -> None:
    """A folder ``reproduce`` marked complete, with one claims row and its metadata (each then spoiled)."""
    from rankcollapse.experiments.contract.verdicts import Claim

    folder.mkdir()
    (folder / ".rankcollapse.json").write_text(json.dumps({"command": "reproduce", "complete": True}))
    row = Claim("theorem1.collapse", "theorem1", "collapse", "theorem1.bound", "it collapses", "paper §4.1",
                "paper setting", "reproduced", "reproduced", "reproduced", "a rule", "some evidence", n=4)
    (folder / "claims.json").write_text(json.dumps([row.to_dict()]))
    (folder / "experiments.json").write_text(json.dumps({"meta": {"commit": "abc"}, "experiments": []}))


@pytest.mark.parametrize(
    ("spoiled", "kind"), _RESULTS_CASES, ids=[f"write_results <- {f} {k}" for f, k in _RESULTS_CASES]
)
@EXAMPLES
@example(name="decided", junk=b"")
@given(name=NAMES, junk=st.binary(max_size=64))
def test_write_results_on_a_hostile_folder_is_one_line_and_exit_2(spoiled: str, kind: str, name: str,
                                                                  junk: bytes) -> None:
    """The script that publishes a reproduce folder reads the same hostile files as every command (a FIFO
    blocked it, /dev/zero filled the memory, a bad input was a traceback): one line, exit 2, no page."""
    scene = Scene()
    try:
        folder = scene.root / name
        _judged_folder(folder)
        (folder / spoiled).unlink()
        _ALL_RESULTS[kind](scene, folder / spoiled, junk)
        page = scene.root / "page" / "results.md"
        page.parent.mkdir()
        for extra in ([], ["--commit", "abc123"]):
            code, err = run_write_results([str(folder), "--to", str(page), *extra])
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2 and "Traceback" not in err, err[-1500:]
            assert len(lines) == 1 and lines[0].startswith("write_results: error:"), err[-1500:]
            assert not page.exists() and not SENTINEL.exists()
    finally:
        scene.close()


_ALL_RESULTS: dict[str, Maker] = {**GENERIC, **JSON, **CLAIMS}


def test_write_results_publishes_the_intact_folder(tmp_path: Path) -> None:
    """The control: the same folder, unspoiled, is published (the refusals above are the files')."""
    _judged_folder(tmp_path / "decided")
    page = tmp_path / "page" / "results.md"
    page.parent.mkdir()
    code, err = run_write_results([str(tmp_path / "decided"), "--to", str(page), "--commit", "abc123"])
    assert code == 0 and page.exists() and "theorem1.collapse" in page.read_text(), err


def test_write_results_commit_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    """``--commit`` wrote ``experiments.json`` through a planted link, non-atomically and unlocked; it goes
    through the output layer: the link's target is never written."""
    _judged_folder(tmp_path / "decided")
    target = tmp_path / "elsewhere.json"
    target.write_bytes((tmp_path / "decided" / "experiments.json").read_bytes())
    before = target.read_bytes()
    (tmp_path / "decided" / "experiments.json").unlink()
    (tmp_path / "decided" / "experiments.json").symlink_to(target)
    page = tmp_path / "results.md"
    code, err = run_write_results([str(tmp_path / "decided"), "--to", str(page), "--commit", "abc123"])
    assert target.read_bytes() == before and "Traceback" not in err
    assert code == 2 and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("marker", ["complete: false", "no marker", "another command's marker"])
def test_write_results_refuses_an_unfinished_folder_in_one_line(tmp_path: Path, marker: str) -> None:
    """A normal-looking page was written from a folder whose reproduce call never finished."""
    folder = tmp_path / "decided"
    _judged_folder(folder)
    spoil = {"complete: false": {"command": "reproduce", "complete": False},
             "another command's marker": {"command": "simulate", "complete": True}}
    if marker == "no marker":
        (folder / ".rankcollapse.json").unlink()
    else:
        (folder / ".rankcollapse.json").write_text(json.dumps(spoil[marker]))
    page = tmp_path / "results.md"
    code, err = run_write_results([str(folder), "--to", str(page)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and not page.exists(), err
