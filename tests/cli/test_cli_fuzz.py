"""Property-based test of the CLI front door: generated arguments for every command.

Each example runs ``rankcollapse.cli.main.main(args)`` in this process (stdout and stderr
captured) and asserts what a user is promised whatever they type:

- the exit code is 0 (done) or 2 (refused), never 1 (a crash) or anything else;
- no traceback, and no exception escapes ``main``;
- a refusal (exit 2) is exactly one line on stderr, ``rankcollapse: error: ...``, short.

Arguments mix valid values, values out of range, wrong types, bad specs and awkward paths
(empty, an existing file, under a file, an existing non-empty folder). Sizes stay small so every
example is quick; the heavier commands (``analyze`` with tiny models, ``portrait``, valid
``equilibria`` runs) are marked slow.
"""

from __future__ import annotations

import contextlib
import io
import math
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rankcollapse.cli.main import main

# derandomized (the same examples every run) and not shrunk (a failure is reported as generated)
_PHASES = (Phase.explicit, Phase.reuse, Phase.generate)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True, phases=_PHASES)
SLOW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True, phases=_PHASES)


def known_failure(reason: str) -> pytest.MarkDecorator:
    """A known finding: xfail until fixed; strict, so a fix that makes it pass fails until the mark goes."""
    return pytest.mark.xfail(reason=reason, strict=True)

MAX_ERROR_LINE = 500


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """``main(args)`` with stdout/stderr captured; an exception escaping main fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except BaseException as exc:  # any escape is the failure we look for
            pytest.fail(f"rankcollapse {' '.join(args)!r} raised {type(exc).__name__}: {exc}")
    return code, out.getvalue(), err.getvalue()


def check(args: list[str]) -> tuple[int, str, str]:
    """Run and assert the promises (module docstring)."""
    code, out, err = run_cli(args)
    shown = f"rankcollapse {' '.join(args)}"[:400]
    assert code in (0, 2), f"{shown}: exit {code}\n{err[-2000:]}"
    assert "Traceback" not in err, f"{shown}: traceback\n{err[-2000:]}"
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, f"{shown}: {len(lines)} lines on stderr for exit 2:\n{err[-2000:]}"
        assert lines[0].startswith("rankcollapse: error:"), f"{shown}: {lines[0]}"
        assert len(lines[0]) <= MAX_ERROR_LINE, f"{shown}: error line of {len(lines[0])} characters"
    return code, out, err


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A fresh folder holding ``file.txt`` (a file), ``full/`` (a non-empty folder) and ``w.npy``."""
    root = Path(tempfile.mkdtemp(prefix="rc-fuzz-"))
    try:
        (root / "file.txt").write_text("not a folder\n")
        (root / "full").mkdir()
        (root / "full" / "x.txt").write_text("x\n")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- value strategies ----------------------------------------------------------------------------
BAD_NUMBERS = ["", "abc", "2.5", "1e3", "-0", "nan", "inf", "-inf", "0x10", "99999999999999999999", " 3"]


def ints(low: int, high: int, huge: tuple[int, ...] = ()) -> st.SearchStrategy[str]:
    """Small integers around a range, the occasional huge one, and text that is no integer."""
    return st.one_of(st.integers(low, high).map(str), st.sampled_from([str(h) for h in huge] or ["-1"]),
                     st.sampled_from(BAD_NUMBERS))


def floats(values: tuple[float, ...]) -> st.SearchStrategy[str]:
    extra = (0.0, -1.0, math.nan, math.inf, 1e308, 1e-308)
    return st.one_of(st.sampled_from([repr(v) for v in (*values, *extra)]), st.sampled_from(BAD_NUMBERS))


VALID_SPECS = ["complete", "causal", "window:w=2", "causal-window:w=1", "block:size=4", "prefix:k=2",
               "dilated:w=2,dilation=2", "strided:stride=2", "random:p=0.5,seed=1", "causal&window:w=3",
               "block:size=2|prefix:k=1", "sinks:w=2,sinks=1", "longformer:w=2,global=1",
               "bigbird:w=1,global=1,random=1,seed=0", "(causal|window:w=1)&block:size=4"]
BAD_SPECS = ["", " ", "nonsense", "window", "window:w=", "window:w=-1", "window:w=abc", "window:q=2",
             "causal&", "&causal", "causal||window:w=1", "((causal)", "causal)", "file:/no/such/file.npy",
             "random:p=2", "block:size=0", "causal:w=1", "window:w=1e9999", "x" * 5000]


def nested(depth: int) -> str:
    return "(" * depth + "causal" + ")" * depth


SPECS = st.one_of(st.sampled_from(VALID_SPECS), st.sampled_from(BAD_SPECS),
                  st.integers(1, 2000).map(nested), st.text(max_size=40))


def path_choice(root: Path, kind: str) -> str:
    return {"new": str(root / "new" / "run"), "empty": "", "file": str(root / "file.txt"),
            "under-file": str(root / "file.txt" / "sub"), "full": str(root / "full"),
            "dot-dir": str(root)}[kind]


PATH_KINDS = st.sampled_from(["new", "new", "new", "empty", "file", "under-file", "full"])


@st.composite
def options(draw: st.DrawFn, table: dict[str, st.SearchStrategy[str] | None]) -> list[str]:
    """A random subset of the options in ``table`` (None: a flag), in random order."""
    names = draw(st.lists(st.sampled_from(sorted(table)), unique=True, max_size=len(table)))
    args: list[str] = []
    for name in names:
        strategy = table[name]
        args += [name] if strategy is None else [name, draw(strategy)]
    return args


# ---- commands ------------------------------------------------------------------------------------
MASK_OPTIONS = {"--tokens": ints(1, 64, (0, 200_000, 10**12, 99999999999999999999)), "--json": None,
                "--summary": None, "--full": None}


@FAST
@given(spec=SPECS, opts=options(MASK_OPTIONS), plot=st.sampled_from(["none", "png", "empty", "dir", "file"]))
def test_mask(spec: str, opts: list[str], plot: str) -> None:
    with scratch() as root:
        extra = {"none": [], "png": ["--plot", str(root / "m.png")], "empty": ["--plot", ""],
                 "dir": ["--plot", str(root / "full")], "file": ["--plot", str(root / "file.txt" / "m.png")]}
        if plot != "none" and "--tokens" in opts and opts[opts.index("--tokens") + 1] not in ("1", "2", "8",
                                                                                              "16"):
            opts = [*opts[: opts.index("--tokens")], "--tokens", "8", *opts[opts.index("--tokens") + 2 :]]
        check(["mask", spec, *opts, *extra[plot]])


MODEL_NAMES = ["tiny:gemma3_text", "tiny:bert", "random:gpt2", "random:gpt2,layers=3", "tiny:nonsense",
               "bogus-model", "", "/no/such/dir", "minilm"]
MASK_MODEL_OPTIONS = {"--model": st.sampled_from(MODEL_NAMES), "--tokens": ints(1, 64, (0, 10**12)),
                      "--layers": ints(1, 6, (0, 10**9)), "--json": None, "--summary": None}


@FAST
@given(opts=options(MASK_MODEL_OPTIONS), spec=st.sampled_from([None, "causal"]))
def test_mask_of_a_model(opts: list[str], spec: str | None) -> None:
    check(["mask", *([spec] if spec else []), *opts])


MODELS_OPTIONS = {"--prepare": st.sampled_from(["minilm", "nonsense", "", "gpt2"]), "--json": None}


@FAST
@given(opts=options(MODELS_OPTIONS))
def test_models(opts: list[str]) -> None:
    check(["models", *opts])


SIMULATE_OPTIONS = {
    "--mask": SPECS, "--tokens": ints(2, 24, (1, 0, 10**6, 2 * 10**9, 10**20)),
    "--d": ints(1, 8, (0, 10**9)), "--layers": ints(0, 6, (10**15,)),
    "--mode": st.sampled_from(["attn", "attn+sphere", "attn+ln", "attn+skip+ln", "attn+layernorm",
                                 "attn+rmsnorm", "attn+skip", "transformer", "transformer-pre", "gpt", ""]),
    "--heads": ints(1, 3, (0,)), "--d-qk": floats((1.0, 0.25, 64.0, 4.0)),
    "--value": st.sampled_from(["gaussian", "orthogonal", "identity", "scaled-identity", "unitary"]),
    "--value-scale": floats((1.0, 0.5, 1e3)), "--qk-scale": floats((1.0, 0.0, 3.0)),
    "--inputs": st.sampled_from(["gaussian", "sphere", "hemisphere", "uniform"]),
    "--samples": ints(1, 3, (0,)), "--seed": ints(0, 5, (-1, 2**70)),
    "--dtype": st.sampled_from(["float64", "float32", "f64", "f32", "f16", "int8", ""]),
    "--device": st.sampled_from(["cpu", "cuda", "cuda:7", "tpu", ""]),
    "--kernel": st.sampled_from(["auto", "dense", "sdpa", "band", "flash"]),
    "--metrics": st.sampled_from(["mu", "mu_rel,sigma_min", "all", "", "mu,bogus", ",,,"]),
    "--stop-below": floats((1e-3, 1.0)), "--threads": ints(1, 2, (0, 1000)),
    "--json": None, "--no-progress": None, "--overwrite": None,
}


@FAST
@given(opts=options(SIMULATE_OPTIONS), out=PATH_KINDS, plot=st.booleans())
def test_simulate(opts: list[str], out: str, plot: bool) -> None:
    with scratch() as root:
        args = ["simulate", *opts, "--out", path_choice(root, out)]
        check([*args, "--plot"] if plot and "--layers" not in opts else args)


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


EQUILIBRIA_BAD = {
    "--tokens": ints(1, 4, (0, 10**9)), "--d": ints(1, 3, (0, 10**9)), "--rank": ints(-1, 4, (10**6,)),
    "--mask": SPECS, "--starts": ints(0, 4, (-5, 10**12)), "--layers": ints(-1, 20, (10**15,)),
    "--d-qk": floats((1.0, 2.0)), "--seed": ints(0, 3, (-1,)), "--threads": ints(0, 2, (1000,)),
    "--json": None,
}
VALUE_FILES = st.sampled_from(["none", "missing", "dir", "text", "nan", "complex", "wrong-shape", "zero",
                               "huge"])


def value_file(root: Path, kind: str, d: int) -> list[str]:
    arrays = {"nan": np.full((d, d), np.nan), "complex": np.eye(d) * (1 + 1j), "wrong-shape": np.eye(d + 1),
              "zero": np.zeros((d, d)), "huge": np.eye(d) * 1e300}
    if kind == "none":
        return []
    if kind in arrays:
        np.save(root / f"{kind}.npy", arrays[kind])
        return ["--value", str(root / f"{kind}.npy")]
    return ["--value", {"missing": str(root / "missing.npy"), "dir": str(root / "full"),
                        "text": str(root / "file.txt")}[kind]]


@pytest.mark.slow
@settings(FAST, max_examples=25)
@given(opts=options(EQUILIBRIA_BAD), value=VALUE_FILES)
def test_equilibria_refuses_or_runs_small(opts: list[str], value: str) -> None:
    # keep a run small: unless the test is about them, starts and steps stay tiny
    if "--starts" not in opts:
        opts = [*opts, "--starts", "2"]
    if "--layers" not in opts:
        opts = [*opts, "--layers", "5"]
    for name in ("--tokens", "--d"):
        if name not in opts:
            opts = [*opts, name, "2"]
    with scratch() as root:
        d = opts[opts.index("--d") + 1]
        size = int(d) if d.isdigit() and 0 < int(d) < 5 else 2
        check(["equilibria", *opts, *value_file(root, value, size)])


COUNTEREXAMPLE_OPTIONS = {"--w": floats((2.0, 1.5, 1.0, 0.5)),
                          "--construction": st.sampled_from(["paper", "ours", "bogus", ""]), "--json": None}


@FAST
@given(opts=options(COUNTEREXAMPLE_OPTIONS))
def test_counterexample(opts: list[str]) -> None:
    check(["counterexample", *opts])


REPRODUCE_BAD = [
    ["--profile", "bogus"], ["--only", ""], ["--only", "no_such_experiment"], ["--executor", "bogus"],
    ["--executor", "dask", "--scheduler", "notaurl"], ["--scheduler", "tcp://127.0.0.1:1"],
    ["--workers", "0"], ["--workers", "-1"], ["--workers", "2.5"],
    ["--quick", "--full"], ["--config-dir", "/no/such/folder"], ["--list", "--only", "x"],
    ["--workers", "1000"], ["--profile", ""],
    ["--device", "gpu"], ["--device", "cuda:99"], ["--device", ""], ["--batch-size", "0"],
    ["--batch-size", "x"],
]


@pytest.mark.parametrize("opts", REPRODUCE_BAD, ids=lambda o: " ".join(o) if isinstance(o, list) else None)
def test_reproduce_bad_options(opts: list[str], tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    # should a bad option be accepted, the run stays the smallest there is
    small = [] if "--profile" in opts or "--quick" in opts else ["--profile", "tiny"]
    small += [] if "--only" in opts or "--list" in opts else ["--only", "theorem2.hemisphere"]
    code, _, _ = check(["reproduce", *opts, *small, "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == 2, f"reproduce {opts} was not refused"


@pytest.mark.parametrize("out", ["", "file", "under-file"])
def test_reproduce_bad_out(out: str, tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    target = {"": "", "file": str(tmp_path / "file.txt"), "under-file": str(tmp_path / "file.txt" / "o")}[out]
    code, _, _ = check(["reproduce", "--profile", "tiny", "--only", "theorem2.hemisphere", "--out", target,
                        "--no-progress"])
    assert code == 2


def _commands() -> list[str]:
    from rankcollapse.cli.app import COMMAND_MODULES

    return list(COMMAND_MODULES)


COMMANDS = _commands()  # every registered command, a new one included


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_option_and_help(command: str) -> None:
    check([command, "--no-such-option"])
    assert check([command, "--help"])[0] == 0


# ---- slower commands -----------------------------------------------------------------------------
ANALYZE_OPTIONS = {
    "--model": st.sampled_from(["tiny:gpt2", "tiny:bert", "tiny:nonsense", "bogus-model", "",
                                "/no/such/dir"]),
    "--mode": st.sampled_from(["attn", "attn+skip", "attn+ln", "attn+skip+ln", "full", "attn+sphere", "x"]),
    "--mask": st.sampled_from(["causal", "complete", "window:w=1", "nonsense"]),
    "--d-qk": floats((1.0, 16.0)), "--layers": ints(1, 3, (0, 10**9)),
    "--corpus": st.sampled_from(["wikipedia", "shakespeare", "kjv", "pydocs", "klingon"]),
    "--samples": ints(1, 2, (0, 100_000_000)), "--tokens": ints(4, 12, (0, 10**9)),
    "--dtype": st.sampled_from(["float32", "float64", "f16"]), "--seed": ints(0, 2, (-1,)),
    "--backend": st.sampled_from(["auto", "hf", "parts", "onnx"]), "--threads": ints(1, 2, (0, 1000)),
    "--device": st.sampled_from(["cpu", "cuda", "cuda:7", "tpu", ""]), "--batch-size": ints(1, 3, (0,)),
}


@pytest.mark.slow
@SLOW
@given(opts=options(ANALYZE_OPTIONS), out=PATH_KINDS,
       text=st.sampled_from(["none", "file", "missing", "dir"]))
def test_analyze(opts: list[str], out: str, text: str) -> None:
    if "--model" not in opts:
        opts = [*opts, "--model", "tiny:gpt2"]
    for name, small in (("--samples", "2"), ("--tokens", "8"), ("--layers", "2")):
        if name not in opts:
            opts = [*opts, name, small]
    with scratch() as root:
        extra = {"none": [], "file": ["--text-file", str(root / "file.txt")],
                 "missing": ["--text-file", str(root / "no")],
                 "dir": ["--text-file", str(root / "full")]}[text]
        check(["analyze", *opts, *extra, "--out", path_choice(root, out)])


@pytest.mark.slow
@SLOW
@given(a=floats((0.95, 0.5, 1.0, 2.0)), s=floats((1.0, 0.0, -3.0)), out=PATH_KINDS)
def test_portrait(a: str, s: str, out: str) -> None:
    with scratch() as root:
        check(["portrait", "--a", a, "--s", s, "--out", path_choice(root, out)])


@pytest.mark.slow
@SLOW
@given(n=st.integers(1, 4), d=st.integers(1, 3), rank=st.integers(0, 4),
       mask=st.sampled_from(VALID_SPECS[:6]), value=VALUE_FILES)
def test_equilibria_valid_sizes(n: int, d: int, rank: int, mask: str, value: str) -> None:
    args = ["equilibria", "--tokens", str(n), "--d", str(d), "--starts", "4", "--layers", "30", "--mask",
            mask]
    if rank:
        args += ["--rank", str(rank)]
    with scratch() as root:
        check([*args, *value_file(root, value, d)])


# ---- the reported cases, one by one --------------------------------------------------------------
def _huge_header_npy(path: Path) -> None:
    """A .npy file whose header claims a 10^6 x 10^6 boolean matrix but holds 16 bytes."""
    header = "{'descr': '|b1', 'fortran_order': False, 'shape': (1000000, 1000000), }"
    header += " " * (64 - (len(header) + 11) % 64) + "\n"
    magic = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
    path.write_bytes(magic + header.encode() + b"\x01" * 16)


def _model_dir(path: Path, config: str) -> None:
    path.mkdir()
    (path / "config.json").write_text(config)


REPORTED = [
    ("simulate --seed -1", None), ("simulate --threads 1000", None), ("simulate --tokens 2000000000", None),
    ("simulate --tokens 99999999999999999999", None), ("simulate --value identity --value-scale 5", None),
    ("simulate --layers 2.5", None), ("simulate --out ''", None),
    ("mask NESTED400 --tokens 4", None), ("mask LONGSPEC --tokens 4", None), ("mask causal --tokens 200000",
                                                                              None),
    ("mask file:HUGE --tokens 4", None), ("mask causal --tokens 8 --plot ''", None),
    ("mask causal --tokens 8 --plot DIR", None),
    ("equilibria --tokens 2 --d 2 --rank 1 --mask nonsense --d-qk 5", None),
    ("equilibria --tokens 2 --d 2 --mask nonsense", None),
    ("portrait --out FILE", None), ("portrait --out NEW --a 5", "no-folder"),
    ("portrait --out FILE/sub", None),
    ("analyze --model tiny:gpt2 --corpus kjv --text-file FILE --out NEW", None),
    ("analyze --model tiny:gpt2 --samples 100000000 --out NEW", None),
    ("analyze --model NOWEIGHTS --out NEW", "slow"), ("analyze --model CORRUPT --out NEW", "slow"),
    ("reproduce --executor dask --scheduler notaurl --profile tiny --only theorem2 --out NEW", None),
    ("reproduce --scheduler tcp://x:1 --profile tiny --only theorem2.hemisphere --out NEW", None),
    ("reproduce --only '' --out NEW", None),
]


def _reported_params() -> Iterator[Any]:
    for line, note in REPORTED:
        marks = []
        if note is not None and note.startswith("slow"):
            marks.append(pytest.mark.slow)
        if note is not None and (note.startswith("slow-known:") or note.startswith("known:")):
            marks.append(known_failure(note.split(":", 1)[1]))
        yield pytest.param(line, note, marks=marks, id=line[:60])


@pytest.mark.parametrize(("line", "note"), list(_reported_params()))
def test_reported_cases(line: str, note: str | None, tmp_path: Path) -> None:
    import shlex

    (tmp_path / "file.txt").write_text("x\n")
    (tmp_path / "dir").mkdir()
    _huge_header_npy(tmp_path / "huge.npy")
    _model_dir(tmp_path / "noweights", '{"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 8}')
    _model_dir(tmp_path / "corrupt", '{"model_type": "gpt2", ')
    words = {"NESTED400": nested(400), "LONGSPEC": "x" * 100_000, "HUGE": str(tmp_path / "huge.npy"),
             "DIR": str(tmp_path / "dir"), "FILE": str(tmp_path / "file.txt"), "NEW": str(tmp_path / "new"),
             "NOWEIGHTS": str(tmp_path / "noweights"), "CORRUPT": str(tmp_path / "corrupt")}
    args = []
    for word in shlex.split(line):
        for key, value in words.items():
            word = word.replace(key, value)
        args.append(word)
    if args[0] == "simulate" and "--out" not in args:
        args += ["--out", str(tmp_path / "new")]
    code, _, _ = check(args)
    if note == "no-folder":
        assert code == 2 and not (tmp_path / "new").exists(), "a failed run left a folder behind"
