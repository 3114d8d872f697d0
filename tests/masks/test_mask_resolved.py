"""``resolve_mask``: the one resolver of a run's mask (the simulator's and the LayerNorm map's).

Every form of one mask (spec, ``Mask``, bool tensor) resolves to its dense matrix, band and
completeness; ``.matrix`` is the masked softmax's form (None when complete), the contract the
LayerNorm map's own resolver had; the graph facts agree with the ``Mask``'s own analysis.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.masks import ResolvedMask, parse_mask, resolve_mask

SPECS = ["complete", "causal", "window:w=2", "causal-window:w=1", "block:size=3", "random:p=0.3,seed=2",
         "causal&window:w=2|block:size=3"]


@pytest.mark.parametrize("spec", SPECS)
def test_every_form_of_a_mask_resolves_to_its_dense_matrix(spec: str) -> None:
    n = 9
    mask = parse_mask(spec)
    dense = mask.dense(n)
    for given in (spec, f"  {spec} ", mask, dense.clone()):
        r = resolve_mask(given, n)
        assert isinstance(r, ResolvedMask)
        assert torch.equal(r.dense, dense) and r.complete == bool(dense.all())
        assert (r.matrix is None) == r.complete and (r.complete or torch.equal(r.matrix, dense))
        assert r.band == (None if isinstance(given, torch.Tensor) else mask.band(n))
    assert resolve_mask(spec, n).spec == mask.spec


@pytest.mark.parametrize("spec", ["causal", "window:w=1", "block:size=3"])
def test_the_graph_facts_of_a_matrix_are_those_of_its_mask(spec: str) -> None:
    n = 9
    mask = parse_mask(spec)
    from_matrix, from_spec = resolve_mask(mask.dense(n), n), resolve_mask(spec, n)
    assert from_matrix.radius == from_spec.radius == (None if mask.analysis(n).radius is None
                                                      else int(mask.analysis(n).radius))
    parts = [p.tolist() for p in from_spec.documents()]
    assert parts == [p.tolist() for p in from_matrix.documents()] == [list(p) for p in mask.documents(n)]


def test_none_is_the_complete_mask() -> None:
    r = resolve_mask(None, 5)
    assert r.complete and r.matrix is None and bool(r.dense.all()) and r.spec == "complete"


def test_the_simulator_and_the_layernorm_map_share_the_one_resolver() -> None:
    import rankcollapse.dynamics as dynamics
    import rankcollapse.equilibria as equilibria
    from rankcollapse.dynamics.simulate import ResolvedMask as SimResolved

    assert dynamics.resolve_mask is equilibria.resolve_mask is resolve_mask
    assert SimResolved is ResolvedMask


@pytest.mark.parametrize(("mask", "n", "words"), [
    (torch.ones(3, 3), 3, "mask matrix must be torch.bool"),
    (torch.ones(3, 4, dtype=torch.bool), 3, "mask has shape (3, 4); allowed: (3, 3)"),
    (np.ones((3, 3), dtype=bool), 3, "a Mask or a bool tensor, got numpy.ndarray"),
    (3, 3, "mask must be a spec string, a Mask or a bool tensor, got int"),
    ("causal", 0, "n"),
    ("no-such-family", 3, "no-such-family"),
])
def test_a_bad_mask_is_one_line(mask, n, words) -> None:
    with pytest.raises((RankCollapseError, TypeError)) as err:
        resolve_mask(mask, n)
    assert words in str(err.value) and "\n" not in str(err.value)
