"""The paper's four architectures at full size (random init of each checkpoint's exact config):
hidden-state oracle against Hugging Face, and the Wikipedia excerpts they read. Slow (BERT-base size)."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.models import PAPER_CHECKPOINTS, excerpts, iter_hidden_states, load_model

pytestmark = pytest.mark.slow

TOL = {"float32": 1e-5, "float64": 1e-10}


def _max_rel_err(model, ids, backend):
    with torch.inference_mode():
        ref = model.hf_model(input_ids=ids, output_hidden_states=True).hidden_states
    errs = []
    for t, _, x in iter_hidden_states(model, ids, backend=backend):
        if t == len(ref) - 1 and model.final_norm is not None:
            x = model.final_norm(x)
        errs.append(float((x - ref[t]).abs().max() / ref[t].abs().max()))
    assert len(errs) == len(ref) == 13
    return max(errs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("short", list(PAPER_CHECKPOINTS))
def test_random_paper_architecture_full_mode_matches_hf(short, dtype):
    model = load_model(f"random:{short}", dtype, seed=0, hf_casts=True)
    assert (len(model.layers), model.d_model, model.layers[0].n_heads) == (12, 768, 12)
    ids = excerpts(model, "wikipedia", samples=2, tokens=128, seed=0)
    assert ids.shape == (2, 128) and bool((ids[:, 0] == 101).all())  # [CLS] first
    for backend in ("hf", "parts"):
        err = _max_rel_err(model, ids, backend)
        assert err <= TOL[dtype], (short, dtype, backend, err)
