"""The network, only when asked: downloads from the Hugging Face Hub, announced, bounded, one line on failure.

Nothing in the package touches the network unless the user asks for it: ``analyze --download``
(or ``reproduce --download``), or ``RANKCOLLAPSE_DOWNLOAD=1`` in the environment (what the flags
set, so worker processes see it too). Until then the hub library itself is offline for the whole
process (``edge.network``: its own switch, set when ``rankcollapse`` is imported), and every Hugging
Face load passes ``local_files_only=True`` and ``trust_remote_code=False``: no download, no prompt, no
code from a model folder.

A download (:func:`download`):

1. is announced on stderr before the first byte (``rankcollapse: downloading ...``);
2. starts with one request to the Hub's API with a timeout of :data:`TIMEOUT_S` seconds and no
   retry, so a network that never answers, a failing DNS or an unknown repository is one line
   within :data:`TIMEOUT_S` seconds;
3. then fetches the snapshot of ``main`` with ``huggingface_hub.snapshot_download`` (its
   retry warnings silenced; its timeouts ``HF_HUB_ETAG_TIMEOUT`` / ``HF_HUB_DOWNLOAD_TIMEOUT``
   set to :data:`TIMEOUT_S` unless the user set them), restricted to :data:`FILES`: the config,
   safetensors weights (never a pickle) and the tokenizer.

The endpoint is the Hub's (``HF_ENDPOINT`` overrides it, as for ``huggingface_hub``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.messages import say
from rankcollapse.edge.network import downloads_allowed, how_to_download, sync_offline, user_offline
from rankcollapse.edge.validate import quote

#: Seconds the first request may take, and the hub library's per-request timeouts during a download.
TIMEOUT_S = 10
#: What a download fetches: config, safetensors weights (no pickles), tokenizer files.
FILES: tuple[str, ...] = ("config.json", "generation_config.json", "*.safetensors",
                          "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt", "spiece.model",
                          "tokenizer.model", "added_tokens.json")


def endpoint() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.ENDPOINT).rstrip("/")
    except ImportError:  # pragma: no cover - a declared dependency of the models extra
        return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """The hub library's retry warnings and progress bars off, its timeouts bounded, for one download."""
    from huggingface_hub import constants
    from huggingface_hub.utils import logging as hub_logging

    logger = hub_logging.get_logger()
    level = logger.level
    saved = (constants.HF_HUB_ETAG_TIMEOUT, constants.HF_HUB_DOWNLOAD_TIMEOUT)
    if not os.environ.get("HF_HUB_ETAG_TIMEOUT"):
        constants.HF_HUB_ETAG_TIMEOUT = TIMEOUT_S
    if not os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT"):
        constants.HF_HUB_DOWNLOAD_TIMEOUT = TIMEOUT_S
    hub_logging.set_verbosity_error()
    try:
        yield
    finally:
        logger.setLevel(level)
        constants.HF_HUB_ETAG_TIMEOUT, constants.HF_HUB_DOWNLOAD_TIMEOUT = saved


@contextlib.contextmanager
def transformers_messages() -> Iterator[None]:
    """What transformers logs or warns while it reads a user's files, told after the load, never before.

    Its warnings (``Unrecognized keys in rope_parameters``...) are held during the block. If the block
    raises, they are dropped: the one error line says why the load failed, and nothing precedes it. If it
    succeeds, each distinct one is told as ``rankcollapse: warning: transformers: <first line>``, through
    the one output layer (escaped), in the order said.
    """
    import logging
    import warnings as py_warnings

    from transformers.utils import logging as hf_logging

    from rankcollapse.edge.messages import warning

    held: list[str] = []

    class _Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            held.append(record.getMessage())

    root = hf_logging.get_logger()
    handlers, propagate = root.handlers[:], root.propagate
    hold = _Hold(level=logging.WARNING)
    for handler in handlers:
        root.removeHandler(handler)
    root.addHandler(hold)
    root.propagate = False
    try:
        with py_warnings.catch_warnings(record=True) as said:
            py_warnings.simplefilter("always")
            yield
        held.extend(str(w.message) for w in said if (w.filename or "").find("transformers") >= 0)
    finally:
        root.removeHandler(hold)
        for handler in handlers:
            root.addHandler(handler)
        root.propagate = propagate
    for text in dict.fromkeys(" ".join(t.split()) for t in held if t.strip()):
        warning(f"transformers: {text[:300]}")


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return (text[:160] if text else type(err).__name__).rstrip(".")


def revision_of(repo: str) -> str:
    """The commit of ``repo``'s main branch: one API request, :data:`TIMEOUT_S` seconds, no retry."""
    from huggingface_hub.utils import get_session

    url = f"{endpoint()}/api/models/{repo}/revision/main"
    try:
        response = get_session().get(url, timeout=TIMEOUT_S, follow_redirects=True)
    except Exception as err:  # httpx's ConnectError, ReadTimeout, ... (the transport's own classes)
        kind = "no answer from" if "timeout" in type(err).__name__.lower() else "cannot connect to"
        raise RankCollapseError(
            f"cannot download {repo!r}: {kind} {endpoint()} within {TIMEOUT_S} s ({_reason(err)})"
        ) from None
    if response.status_code in (401, 403, 404):
        raise RankCollapseError(
            f"cannot download {repo!r}: {endpoint()} has no public repository of that name "
            f"(HTTP {response.status_code})"
        )
    if response.status_code != 200:
        msg = f"cannot download {repo!r}: {endpoint()} answered HTTP {response.status_code}"
        raise RankCollapseError(msg)
    try:
        sha = response.json().get("sha")
    except (ValueError, AttributeError):
        sha = None
    if not isinstance(sha, str) or not sha:
        raise RankCollapseError(f"cannot download {repo!r}: {endpoint()} did not name a commit")
    return sha


def download(repo: str, why: str = "--download") -> Path:
    """Fetch ``repo``'s config, safetensors weights and tokenizer into the Hugging Face cache; return
    the snapshot folder. Announced on stderr first; RankCollapseError (one line) on any failure."""
    if not downloads_allowed():
        msg = f"model {quote(repo)} is not in the local Hugging Face cache; {how_to_download()}"
        raise RankCollapseError(msg)
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover
        msg = "--download needs huggingface_hub: pip install 'rankcollapse[models]'"
        raise RankCollapseError(msg) from None
    if sync_offline():  # lifts the switch held for want of --download; never the user's own
        if not user_offline():  # pragma: no cover - downloads_allowed() was checked above
            raise RankCollapseError(f"cannot download {repo!r}: downloads are off; {how_to_download()}")
        raise RankCollapseError(
            f"cannot download {repo!r}: HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set in the environment; "
            "unset it to download"
        )
    say(f"downloading {repo!r} from {endpoint()} into the Hugging Face cache ({why}; config, safetensors "
        f"weights, tokenizer; no answer within {TIMEOUT_S} s is an error)")
    revision_of(repo)  # the bounded first request: no answer, no such repository -> one line, now
    try:
        with _quiet_hub():  # by branch, so the cache records main -> commit and later runs find it offline
            folder = Path(snapshot_download(repo, revision="main", allow_patterns=list(FILES),
                                            etag_timeout=TIMEOUT_S))
    except RankCollapseError:
        raise
    except Exception as err:  # the hub's HTTP errors, OSError of the cache, httpx's transport errors
        raise RankCollapseError(f"cannot download {repo!r} from {endpoint()}: {_reason(err)}") from None
    if not (folder / "config.json").is_file():
        raise RankCollapseError(f"downloaded {repo!r} but it has no config.json; not a Hugging Face model")
    if not any(folder.glob("*.safetensors")):
        raise RankCollapseError(
            f"downloaded {repo!r} but it has no safetensors weights (rankcollapse never loads pickled "
            "weights)"
        )
    return folder


def hub_kwargs() -> dict[str, Any]:
    """Keyword arguments of every ``from_pretrained`` call: no network, no prompt, no folder code."""
    return {"local_files_only": True, "trust_remote_code": False}
