"""What other tools call our rows: Hugging Face's ``hidden_states``, TransformerLens hooks, nnsight paths.

Row ``t`` of an analysis is ``X(t)``: row 0 the input of the first layer, row ``t >= 1`` the output
of the t-th layer applied (:func:`rankcollapse.models.stream.hidden_state_name`). Where the run
computes the model's own tensors (mode ``full``, the model's own masks and ``d_qk``, no ablation,
``t`` within the model's depth) that tensor has a name in each tool:

- TransformerLens 4.x (``TransformerBridge``, checked against ``run_with_cache`` of 4.3.0 in
  ``tests/models/test_transformerlens.py``): ``{blocks}.0.hook_resid_pre`` for row 0 and
  ``{blocks}.{t-1}.hook_resid_post`` for row t, with ``blocks`` the family's
  :attr:`~rankcollapse.models.spec.FamilySpec.tl_blocks` (``blocks``; T5's encoder:
  ``encoder_blocks``). Post-LN encoders (BERT, RoBERTa) included: the bridge's
  ``hook_resid_post`` is the block output, after the second LayerNorm. (TransformerLens 2.x-3.x's
  ``HookedEncoder`` called that tensor ``blocks.{l}.hook_normalized_resid_post`` and its
  ``hook_resid_post`` the sum before the LayerNorm; 4.0 removed ``HookedEncoder``.)
  DistilBERT, ALBERT and MPNet have no TransformerLens adapter: no name (ViT has one: its pixels in).
- Hugging Face ``output_hidden_states``: ``hidden_states[t]`` for ``t < L``; for ``t = L`` the same
  tensor in post-LN families and ViT (whose final ``layernorm`` gives ``last_hidden_state`` only),
  ``final_norm`` of it in the others (GPT-2's ``ln_f``, Llama's ``norm``, T5's ``final_layer_norm``).
- nnsight (whose module tree is Hugging Face's): the input of the first layer module and the
  output of layer ``t - 1`` (its first element where the layer returns a tuple), on the base model.

:func:`tl_hook_names` gives the ``hook`` column of a run; :func:`crosswalk` one table row per family.
"""

from __future__ import annotations

from typing import Any

from rankcollapse.models.families import FAMILIES


def tl_hook_name(t: int, blocks: str = "blocks") -> str:
    """The TransformerLens name of row ``t`` in a family whose layers TransformerLens calls
    ``blocks``: ``{blocks}.0.hook_resid_pre`` (t = 0), else ``{blocks}.{t-1}.hook_resid_post``;
    ``""`` when ``blocks`` is ``""`` (no TransformerLens adapter)."""
    if not blocks:
        return ""
    return f"{blocks}.0.hook_resid_pre" if t == 0 else f"{blocks}.{t - 1}.hook_resid_post"


def tl_hook_names(model: Any, depth: int, own: bool) -> list[str]:
    """The ``hook`` column of rows ``t = 0..depth`` of a run on ``model`` (a ``LoadedModel``).

    ``own``: the run computes the model's own tensors (mode ``full``, its own masks and ``d_qk``,
    no ablation). Else, and for rows beyond the model's own depth (``--layers`` cycling, the fresh
    layers of a deeper random model), for a model run through Hugging Face's forward only, and for
    families TransformerLens lacks, the name is ``""``: TransformerLens has no such tensor.
    """
    fam = FAMILIES.get(model.arch)
    blocks = fam.tl_blocks if fam is not None and model.dissected and own else ""
    return [tl_hook_name(t, blocks) if t <= model.n_model_layers else "" for t in range(depth + 1)]


def nnsight_path(model_type: str, t: int) -> str:
    """The nnsight path of row ``t`` on the base model (``model`` = ``AutoModel.from_pretrained``),
    ``""`` for ALBERT (one shared module called ``L`` times) and unknown families."""
    fam = FAMILIES.get(model_type)
    if fam is None or not isinstance(fam.layers, str):
        return ""
    layers = f"model.{fam.stack + '.' if fam.stack else ''}{fam.layers}"
    if t == 0:
        return f"{layers}[0].input"
    return f"{layers}[{t - 1}].output" + ("[0]" if fam.tuple_output else "")


def crosswalk() -> list[dict[str, str]]:
    """One row per dissected family: our rows, Hugging Face's ``hidden_states``, TransformerLens,
    nnsight (``l`` = t - 1, ``L`` the depth). The table of ``docs/models.md`` is this list."""
    out: list[dict[str, str]] = []
    for name, fam in FAMILIES.items():
        hf_rows = ("`hidden_states[t]`, t ≤ L" if not fam.final_norm
                   else f"`hidden_states[t]`, t < L; `hidden_states[L]` = `{fam.final_norm}`(row L)")
        out.append({
            "family": f"`{name}`",
            "row 0 (`embeddings`)": "`hidden_states[0]`",
            "row t (`layer_{t}_out`)": hf_rows,
            "TransformerLens": (f"`{tl_hook_name(0, fam.tl_blocks)}`, `{fam.tl_blocks}.{{l}}.hook_resid_post`"
                                if fam.tl_blocks else "— (no adapter)"),
            "nnsight": (f"`{nnsight_path(name, 0)}`, `{nnsight_path(name, 1).replace('[0].', '[l].')}`"
                        if nnsight_path(name, 0) else "— (one shared module called L times)"),
        })
    merged: list[dict[str, str]] = []
    for row in out:  # families with the same names in every tool share a row
        same = next((m for m in merged if all(m[k] == row[k] for k in row if k != "family")), None)
        if same is None:
            merged.append(row)
        else:
            same["family"] += ", " + row["family"]
    return merged


def crosswalk_markdown() -> str:
    """:func:`crosswalk` as a Markdown table."""
    rows = crosswalk()
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(r[k] for k in keys) + " |" for r in rows]
    return "\n".join(lines)
