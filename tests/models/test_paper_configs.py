"""The paper's four architectures at full size (random init of each checkpoint's exact config):
hidden-state oracle against Hugging Face, and the Wikipedia excerpts they read. Slow (BERT-base size)."""

from __future__ import annotations

import pytest

from rankcollapse.models import PAPER_CHECKPOINTS, excerpts, load_model

pytestmark = pytest.mark.slow

TOL = {"float32": 1e-5, "float64": 1e-10}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("short", list(PAPER_CHECKPOINTS))
def test_random_paper_architecture_full_mode_matches_hf(short, dtype, hf_error):
    model = load_model(f"random:{short}", dtype, seed=0, hf_casts=True)
    assert (len(model.layers), model.d_model, model.layers[0].n_heads) == (12, 768, 12)
    ids = excerpts(model, "wikipedia", samples=2, tokens=128, seed=0)
    assert ids.shape == (2, 128) and bool((ids[:, 0] == 101).all())  # [CLS] first
    for backend in ("hf", "parts"):
        errs = hf_error(model, ids, backend)
        assert len(errs) == 13
        err = max(errs)
        assert err <= TOL[dtype], (short, dtype, backend, err)
