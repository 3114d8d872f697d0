"""What other tools call our rows: the nnsight path of each row reads our tensor from Hugging Face's own
module tree, and the crosswalk table of docs/models.md is the one the code gives.
(TransformerLens's names are checked against TransformerLens itself: test_transformerlens.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from rankcollapse.models import iter_hidden_states
from rankcollapse.models.families import FAMILIES
from rankcollapse.models.images import random_pixels
from rankcollapse.models.names import crosswalk_markdown, nnsight_path, tl_hook_name
from rankcollapse.models.stream import fusable, fused_attention

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def _module(root: torch.nn.Module, path: str) -> tuple[torch.nn.Module, str]:
    """``model.encoder.layer[2].output[0]`` -> (that module, ``output[0]``)."""
    body, _, what = path.removeprefix("model.").rpartition(".")
    module = root
    for part in body.split("."):
        name, *index = re.split(r"[\[\]]", part)[:2]
        module = getattr(module, name)
        if index and index[0]:
            module = module[int(index[0])]
    return module, what


@pytest.mark.parametrize("family", [f for f in FAMILIES if nnsight_path(f, 0)])
def test_each_rows_nnsight_path_reads_that_row_from_the_hf_module_tree(family, tiny_models, ids):
    """What nnsight's ``.input`` / ``.output`` would give, read with plain module hooks (the first
    argument of the module, its output or the output's first element)."""
    model = tiny_models(family, "f64")
    inputs = ids if model.image is None else random_pixels(model.image, 3, seed=1)  # ViT reads images
    ours = [x.clone() for _, _, x in iter_hidden_states(model, inputs, backend="hf")]
    seen: dict[int, torch.Tensor] = {}
    handles = []
    for t in (0, 1, len(ours) - 1):
        module, what = _module(model.hf_model, nnsight_path(family, t))
        if what == "input":
            def pre(mod, args, kwargs, t=t):
                seen[t] = args[0] if args else kwargs["hidden_states"]
            handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        else:
            def post(mod, args, out, t=t, what=what):
                seen[t] = out[0] if what == "output[0]" else out
            handles.append(module.register_forward_hook(post))
    try:  # the hf backend's attention: fused where that is the same function
        with torch.inference_mode(), fused_attention(model, fusable(model, torch.float64)):
            model.hf_model(**{model.input_name: inputs})
    finally:
        for h in handles:
            h.remove()
    for t, x in seen.items():
        assert torch.equal(x, ours[t]), (family, t)


def test_the_docs_crosswalk_table_is_the_codes():
    assert crosswalk_markdown() in DOCS.read_text(encoding="utf-8")


def test_tl_names_follow_the_family_prefix():
    assert tl_hook_name(0) == "blocks.0.hook_resid_pre" and tl_hook_name(3) == "blocks.2.hook_resid_post"
    assert tl_hook_name(1, "encoder_blocks") == "encoder_blocks.0.hook_resid_post"
    assert tl_hook_name(2, "") == ""
    assert {f for f, spec in FAMILIES.items() if not spec.tl_blocks} == {"distilbert", "albert", "mpnet"}
