"""What ``analyze`` reads besides a corpus: a list of texts (padded), an in-memory Hugging Face model
(borrowed: left exactly as it came) and its tokenizer."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.models.loading import LoadedModel, dissect


def text_batch(model: LoadedModel, texts: list[str], tokens: int) -> tuple[Tensor, Tensor]:
    """``(ids [b, n], attention_mask [b, n])`` of a list of texts: each tokenised (start token first,
    cut to ``tokens``), right-padded with 0 to the longest; the mask is 1 on real tokens."""
    from rankcollapse.models.corpora import tokenize

    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise RankCollapseError("texts must be a non-empty list of non-empty strings")
    if model.tokenizer is None:
        raise RankCollapseError("this model has no tokenizer; pass token ids instead of texts")
    seqs = []
    for text in texts:
        ids = tokenize(text, model.tokenizer).tolist()
        seqs.append(([model.start_token] if model.start_token is not None else []) + ids)
    seqs = [s[:tokens] for s in seqs]
    n = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), n, dtype=torch.long)
    mask = torch.zeros(len(seqs), n, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def memory_name(hf_model: Any) -> str:
    """What an in-memory Hugging Face model is called: its ``name_or_path`` (the hub name or the folder's
    name it was loaded from: ``HuggingFaceTB/SmolLM2-135M``, ``my-finetune``), else, for a model built
    from a config, its class (``LlamaForCausalLM``)."""
    config = getattr(hf_model, "config", None)
    given = getattr(hf_model, "name_or_path", None) or getattr(config, "_name_or_path", None)
    text = str(given).strip() if isinstance(given, str | Path) else ""
    if not text:
        return type(hf_model).__name__
    path = Path(text)
    return path.name if path.is_absolute() or text.startswith(".") else text


def from_memory(hf_model: Any, model_label: str | None = None) -> LoadedModel:
    """An in-memory Hugging Face model as a :class:`LoadedModel` (no tokenizer: see
    :func:`with_tokenizer`), named by :func:`memory_name` (``model_label``: other words for its titles
    and ``config.json``). Dissecting puts the model in eval mode, without gradients and with eager
    attention: call it inside :func:`borrowed`, which puts all of that back afterwards."""
    from torch import nn

    from rankcollapse.models.loading import check_label

    if not isinstance(hf_model, nn.Module) or not hasattr(hf_model, "config"):
        raise RankCollapseError(
            f"model must be a LoadedModel or a Hugging Face model, got {type(hf_model).__name__}")
    given = check_label(model_label) if model_label is not None else ""
    casts = next(hf_model.parameters()).dtype != torch.float64  # as load_model: exact float64 parts only
    loaded = dissect(hf_model, name=memory_name(hf_model), tokenizer=None, hf_casts=casts)
    loaded.given_label = given
    loaded.info["loaded_from"] = "in-memory Hugging Face model"
    loaded.info["tokenizer"] = "none"
    return loaded


@contextlib.contextmanager
def borrowed(hf_model: Any) -> Iterator[None]:
    """Run with ``hf_model`` in eval mode and eager attention; afterwards every module's training
    flag, every parameter's ``requires_grad`` and the attention implementation are as they came
    (also on an error). Forward hooks are never added. ``None``: nothing to do."""
    from torch import nn

    if not isinstance(hf_model, nn.Module):
        yield
        return
    training = [(m, m.training) for m in hf_model.modules()]
    grads = [(p, p.requires_grad) for p in hf_model.parameters()]
    config = getattr(hf_model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    try:
        hf_model.eval()
        yield
    finally:
        for m, flag in training:
            m.training = flag
        for p, flag in grads:
            if p.requires_grad != flag:
                p.requires_grad_(flag)
        if config is not None and getattr(config, "_attn_implementation", None) != impl:
            try:
                hf_model.set_attn_implementation(impl)
            except (ValueError, ImportError, AttributeError):
                config._attn_implementation = impl


#: A hub repository as the Hub spells it: ``owner/name``, or a bare legacy name (``bert-base-uncased``).
_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


def load_tokenizer(name: str | Path) -> Any:
    """A tokenizer by folder or hub name, through the one hub gate (``models.hub``): a local folder or the
    Hugging Face cache only (``hub_kwargs``: no network, no folder code); a hub name not cached is fetched
    only with ``--download`` / ``RANKCOLLAPSE_DOWNLOAD=1`` (announced, bounded by the gate's timeouts),
    else refused with one line saying how. RankCollapseError (one line) when it cannot be loaded."""
    from transformers import AutoTokenizer

    from rankcollapse.edge.network import downloads_allowed, how_to_download
    from rankcollapse.models.hub import download, hub_kwargs, transformers_messages

    def load(source: str) -> Any:
        with transformers_messages():
            return AutoTokenizer.from_pretrained(source, **hub_kwargs())

    text = str(name)
    try:
        return load(text)
    except (OSError, ValueError, TypeError, KeyError) as err:
        msg = str(err).splitlines()[0][:80] if str(err) else type(err).__name__
        if not Path(text).expanduser().exists() and not _HUB_NAME.match(text):
            raise RankCollapseError(
                f"cannot load tokenizer {quote(text)}: no such folder, and not a hub name (owner/name)"
            ) from None
        if Path(text).expanduser().exists():
            raise RankCollapseError(
                f"cannot load tokenizer {quote(text)} (a local folder or the Hugging Face cache): {msg}"
            ) from None
        if not downloads_allowed():
            raise RankCollapseError(
                f"tokenizer {quote(text)} is not in the local Hugging Face cache; {how_to_download()}"
            ) from None
    folder = download(text, "--tokenizer")  # announced; one line on any failure
    try:
        return load(str(folder))
    except (OSError, ValueError, TypeError, KeyError) as err:
        msg = str(err).splitlines()[0][:80] if str(err) else type(err).__name__
        raise RankCollapseError(f"cannot load tokenizer {quote(text)} from {folder}: {msg}") from None


def _own_tokenizer(hf_model: Any) -> tuple[Any, str] | None:
    """The tokenizer saved with ``hf_model`` (its ``name_or_path`` folder or cached hub name), or None."""
    name = str(getattr(getattr(hf_model, "config", None), "_name_or_path", "") or "")
    if not name:
        return None
    try:
        return load_tokenizer(name), f"{name} (the model's own)"
    except RankCollapseError:
        return None


def bundled_vocabulary(config: Any) -> bool:
    """True when a model config's vocabulary is the bundled BERT uncased WordPiece's: 30522 entries
    and no special token id that disagrees with it (pad 0; bos / eos, if set, [CLS] or [SEP])."""
    from rankcollapse.models.loading import bert_tokenizer

    tok = bert_tokenizer()
    special = {tok.cls_token_id, tok.sep_token_id}
    return (int(getattr(config, "vocab_size", 0) or 0) == len(tok)
            and getattr(config, "pad_token_id", None) in (None, tok.pad_token_id)
            and all(getattr(config, k, None) in (None, *special) for k in ("bos_token_id", "eos_token_id")))


def with_tokenizer(model: LoadedModel, tokenizer: Any, hf_model: Any = None) -> LoadedModel:
    """``model`` reading text with ``tokenizer`` (a Hugging Face tokenizer, or its name or folder).

    ``tokenizer`` None: an in-memory ``hf_model`` gets the tokenizer saved with it (its
    ``name_or_path``) when there is one, else the bundled BERT tokenizer when its vocabulary is
    that one (:func:`bundled_vocabulary`), else none (texts and corpora are then refused); a
    loaded model keeps its own. A given tokenizer larger than the model's vocabulary is refused.
    The result is a copy: a cached model is never changed. ``info["tokenizer"]`` says which.
    """
    from rankcollapse.models.loading import _start_token, bert_tokenizer

    what = ""
    if model.image is not None:  # a vision encoder reads pixels: it has no tokenizer
        if tokenizer is not None:
            raise RankCollapseError(f"tokenizer does not apply to vision encoder {model.label!r} (it reads "
                                    "pixel_values)")
        return model
    if tokenizer is None:
        if hf_model is None:
            return model
        own = _own_tokenizer(hf_model)
        if own is not None:
            tokenizer, what = own
        elif bundled_vocabulary(model.hf_model.config):
            tokenizer = bert_tokenizer()
            what = "bundled BERT uncased WordPiece (the model's vocabulary is BERT's)"
        else:
            return model
    elif isinstance(tokenizer, str | Path):
        what = str(tokenizer)
        tokenizer = load_tokenizer(tokenizer)
    else:
        if not callable(tokenizer) or not hasattr(tokenizer, "__len__"):
            raise RankCollapseError("tokenizer must be a Hugging Face tokenizer or its name or folder, got "
                                    f"{type(tokenizer).__name__}")
        what = str(getattr(tokenizer, "name_or_path", "") or f"given {type(tokenizer).__name__}")
    vocab = model.vocab_size or int(getattr(model.hf_model.config, "vocab_size", 0) or 0)
    if vocab and len(tokenizer) > vocab:
        raise RankCollapseError(f"tokenizer {quote(what)} has {len(tokenizer)} tokens but the model's "
                                f"vocabulary has {vocab}; allowed: the model's own tokenizer")
    out = replace(model, tokenizer=tokenizer, start_token=_start_token(tokenizer), info=dict(model.info))
    out.info["tokenizer"] = what
    return out


def no_tokenizer_message(model: LoadedModel) -> str:
    """Why an in-memory model without a tokenizer cannot read text (one line)."""
    config = model.hf_model.config
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    if vocab != 30522:
        why = f"its vocabulary ({vocab} tokens) is not the bundled BERT tokenizer's (30522)"
    else:
        keys = ("pad_token_id", "bos_token_id", "eos_token_id")
        ids = ", ".join(f"{k} {getattr(config, k, None)}" for k in keys)
        why = (f"its special token ids ({ids}) are not the bundled BERT tokenizer's "
               "(pad 0, [CLS] 101, [SEP] 102)")
    return (f"{model.name} has no tokenizer: pass tokenizer= (a Hugging Face tokenizer, or its name or "
            f"folder) or token ids; {why}")
