"""No network without asking: the Hugging Face hub library is offline for the whole process until the
user allows downloads.

``local_files_only=True`` is not a guarantee: ``huggingface_hub`` builds its request headers before it
looks at that argument, and building them fetches a list from the Hub whenever its 24-hour cache file is
missing (always, on a machine that never went online). So the switch is the hub library's own:
:func:`sync_offline` sets ``HF_HUB_OFFLINE=1`` in the environment (read by ``huggingface_hub`` when it is
imported, and inherited by every worker process) and, when the library is already imported, its
``constants.HF_HUB_OFFLINE``, which every request of the library checks (``get_session``'s request hook
raises ``OfflineModeIsEnabled`` before a connection is opened). It runs when ``rankcollapse`` is
imported, so no import order and no later code path of ours or of transformers can reach the network.

Downloads are allowed by ``RANKCOLLAPSE_DOWNLOAD=1`` in the environment, by ``--download`` on the command
line, or by :func:`allow_downloads` in Python (your own ``from_pretrained`` calls of a hub name need one of
these once ``rankcollapse`` is imported). A user's own ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` is
never lifted: :func:`user_offline` tells it apart from ours.
"""

from __future__ import annotations

import os
import sys

#: The environment variable that allows downloads (``--download`` sets it, so workers see it too).
DOWNLOAD_ENV = "RANKCOLLAPSE_DOWNLOAD"
#: Set beside ``HF_HUB_OFFLINE`` when that switch is ours, so a worker process can tell it from the user's.
OURS_ENV = "RANKCOLLAPSE_HELD_OFFLINE"
HUB_ENV = "HF_HUB_OFFLINE"
_TRUE = ("1", "true", "yes", "on")


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def downloads_allowed() -> bool:
    """Whether the user asked for the network: ``RANKCOLLAPSE_DOWNLOAD`` is 1, true, yes or on."""
    return _true(os.environ.get(DOWNLOAD_ENV))


def user_offline() -> bool:
    """Whether the *user* turned the hub library offline (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``),
    as opposed to :func:`sync_offline` holding it offline for want of ``--download``."""
    ours = _true(os.environ.get(OURS_ENV))
    return (_true(os.environ.get(HUB_ENV)) and not ours) or _true(os.environ.get("TRANSFORMERS_OFFLINE"))


def sync_offline() -> bool:
    """Make the hub library's offline switch say ``not downloads_allowed() or user_offline()``, in the
    environment and, if imported, in ``huggingface_hub.constants``; return the switch."""
    user = user_offline()
    offline = user or not downloads_allowed()
    if offline and not user:
        os.environ[HUB_ENV] = "1"
        os.environ[OURS_ENV] = "1"
    elif not offline and _true(os.environ.get(OURS_ENV)):
        os.environ.pop(HUB_ENV, None)
        os.environ.pop(OURS_ENV, None)
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        vars(constants)["HF_HUB_OFFLINE"] = offline
    return offline


def allow_downloads() -> None:
    """What ``--download`` does: set ``RANKCOLLAPSE_DOWNLOAD=1`` for this process and its workers, and lift
    the offline switch that :func:`sync_offline` held (never the user's own)."""
    os.environ[DOWNLOAD_ENV] = "1"
    sync_offline()


def how_to_download() -> str:
    return f"pass --download (or set {DOWNLOAD_ENV}=1) to fetch it"
