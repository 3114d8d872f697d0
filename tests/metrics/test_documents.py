"""Per-document collapse: a mask's independent parts (weakly connected components, networkx as the
oracle), mu_rel per part (closed form: mu_rel of the cut tokens), and what the theory says about them:
under pure attention every document of a packed sequence collapses to its own point while the whole
sequence keeps mu_rel away from 0 (no center: Theorem 1 does not apply to the whole)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.masks import from_dense, parse_mask
from rankcollapse.metrics import document_columns, document_mu_rel, mu_rel


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 14), st.floats(0.0, 0.4), st.integers(0, 10_000))
def test_documents_are_the_weakly_connected_components(n, p, seed):
    rng = np.random.default_rng(seed)
    dense = rng.random((n, n)) < p
    np.fill_diagonal(dense, True)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(dense), strict=True))
    want = sorted((sorted(c) for c in nx.weakly_connected_components(g)), key=lambda c: c[0])
    got = [p.tolist() for p in from_dense(dense).documents(n)]
    assert got == want


@pytest.mark.parametrize(("spec", "n", "want"), [
    ("document:lengths=3,5", 8, [[0, 1, 2], [3, 4, 5, 6, 7]]),
    ("document:lengths=3,5&causal", 8, [[0, 1, 2], [3, 4, 5, 6, 7]]),
    ("block:size=2", 6, [[0, 1], [2, 3], [4, 5]]),
    ("causal", 5, [[0, 1, 2, 3, 4]]),
    ("complete", 4, [[0, 1, 2, 3]]),
])
def test_documents_of_the_families(spec, n, want):
    assert [p.tolist() for p in parse_mask(spec).documents(n)] == want


def test_document_mu_rel_is_mu_rel_of_the_cut_tokens_and_the_max_covers_every_part():
    x = torch.randn(3, 9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    docs = [torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5, 6, 7]), torch.tensor([8])]
    per = document_mu_rel(x, docs)
    assert per.shape == (3, 3)
    for k, d in enumerate(docs):
        torch.testing.assert_close(per[:, k], mu_rel(x[:, d]), rtol=0, atol=0)
    assert bool((per[:, 2] == 0).all())  # one token: nothing to collapse
    cols = document_columns(x, docs)
    torch.testing.assert_close(cols["mu_rel_docs_max"], per.amax(-1), rtol=0, atol=0)


def test_document_columns_with_padding_cut_each_document_to_the_real_tokens():
    x = torch.randn(2, 8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    docs = [torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5, 6, 7])]
    cols = document_columns(x, docs, lengths=torch.tensor([8, 2]))
    assert math.isclose(float(cols["mu_rel_doc1"][0]), float(mu_rel(x[0, 3:])), rel_tol=1e-15)
    assert math.isclose(float(cols["mu_rel_doc0"][1]), float(mu_rel(x[1, :2])), rel_tol=1e-15)
    assert math.isnan(float(cols["mu_rel_doc1"][1]))  # no real token in document 1
    assert math.isclose(float(cols["mu_rel_docs_max"][1]), float(mu_rel(x[1, :2])), rel_tol=1e-15)


@pytest.mark.parametrize("spec", ["document:lengths=6,10", "document:lengths=6,10&causal"])
def test_pure_attention_collapses_each_document_but_not_the_packed_sequence(spec):
    cfg = SimulationConfig(tokens=16, d=8, layers=80, mask=spec, mode="attn", dtype="float64", samples=4,
                           metrics=("mu_rel",))
    last = simulate(cfg).rows[-1]
    assert last["mu_rel_doc0"] < 1e-12 and last["mu_rel_doc1"] < 1e-12 and last["mu_rel_docs_max"] < 1e-12
    assert last["mu_rel"] > 0.1  # two documents, two limits: the whole keeps its spread


def test_a_connected_mask_has_no_document_columns():
    cfg = SimulationConfig(tokens=8, d=4, layers=2, mask="causal", mode="attn", metrics=("mu_rel",))
    row = simulate(cfg).rows[0]
    assert not [k for k in row if "_doc" in k]
