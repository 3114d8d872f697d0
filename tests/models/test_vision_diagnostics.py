"""``--diagnostics`` on a vision encoder (ViT) against an oracle: every diagnostic column computed by hand,
formula by formula, from Hugging Face's own eager forward (``output_attentions=True``,
``output_hidden_states=True``; at another image size with ``interpolate_pos_encoding=True``) on the same
pixel values; and the attention formed in blocks of query rows against the whole map.

The first token of a ViT is its CLS token: ``first_token_attention`` is the attention on CLS. The tiny
model's random weights give near-uniform attention (every entropy within 1e-4 of ``log n``), which would
hide a swapped head or a wrong mean; its query and key weights are scaled up here (``SHARPEN``) so that the
heads differ and some exceed the sink threshold while others do not.
"""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.models import AnalyzeConfig, analyze, load_model

#: Query and key weights times this: logits times its square (near-uniform attention -> entropies ~1.3 of
#: the log 37 = 3.6 of uniform attention at 48 x 48 px).
SHARPEN = 12.0

#: Relative tolerance against the hand computation. float64 (the parts reproduce HF's float32 softmax,
#: ``hf_casts``): rounding of the means only. float32: the per-layer sums in another order, ``n L eps32``.
RTOL = {"float64": 1e-12, "float32": 37 * 4 * torch.finfo(torch.float32).eps}

ATTENTION = ("attention_entropy", "normalized_attention_entropy", "first_token_attention", "sink_rate")


@pytest.fixture(scope="module")
def sharp_vit():
    """tiny:vit (float32 and float64, HF's float32 softmax reproduced) with sharpened attention; its own
    copies, not the session's cached models."""
    cache = {}

    def get(dtype: str):
        if dtype not in cache:
            model = load_model("tiny:vit", dtype, seed=0, hf_casts=True)
            with torch.no_grad():
                for layer in model.hf_model.layers:
                    layer.attention.q_proj.weight.mul_(SHARPEN)
                    layer.attention.k_proj.weight.mul_(SHARPEN)
            cache[dtype] = model
        return cache[dtype]

    return get


def _pixels(size: int) -> torch.Tensor:
    return torch.randn(3, 3, size, size, generator=torch.Generator().manual_seed(11))


def _hf(model, px: torch.Tensor):
    """Hugging Face's own eager forward: (attention maps [b, h, n, n] per layer, hidden states per row)."""
    assert model.hf_model.config._attn_implementation == "eager"
    with torch.inference_mode():
        out = model.hf_model(pixel_values=px, output_attentions=True, output_hidden_states=True,
                             interpolate_pos_encoding=px.shape[-1] != 32)
    return out.attentions, out.hidden_states


def _threshold(attentions) -> float:
    """A sink threshold that splits the heads: the middle of the widest gap in the middle half of every
    (layer, sample, head) and (layer, head) mean attention on CLS, so no value sits near it."""
    first = torch.stack([a.double()[..., 0].mean(-1) for a in attentions])  # [t, b, h]
    v = torch.cat([first.flatten(), first.mean(1).flatten()]).sort().values
    lo, hi = len(v) // 4, 3 * len(v) // 4
    gaps = v[lo + 1:hi + 1] - v[lo:hi]
    k = lo + int(gaps.argmax())
    assert float(gaps.max()) > 1e-4
    return float((v[k] + v[k + 1]) / 2)


def _by_hand(attentions, states, threshold: float) -> list[dict[str, object]]:
    """Each row's diagnostic columns from HF's tensors, in float64: for the map ``A [b, h, n, n]`` of the
    layer that made row t, ``H_i = -sum_j A_ij log A_ij`` (``0 log 0 = 0``), ``c = mean_i A_i0`` [b, h];
    means over samples (and heads); the activations of the row's state ``x [b, n, d]``."""
    heads = attentions[0].shape[1]
    rows = []
    for t, x in enumerate(states):
        x = x.double()
        mag = x.abs().flatten(1)
        top = mag.max(1).values
        row: dict[str, object] = {
            "first_token_norm": float(torch.linalg.vector_norm(x[:, 0], dim=-1).mean()),
            "top_activation": float(top.mean()),
            "massive_ratio": float((top / mag.median(1).values).mean()),  # torch's median: the lower one
        }
        if t == 0:
            row.update({k: math.nan for k in ATTENTION}, sink_heads="")
            row.update({f"{k}_h{h}": math.nan for k in ("attention_entropy", "first_token_attention")
                        for h in range(heads)})
        else:
            a = attentions[t - 1].double()
            n = a.shape[-1]
            entropy = -torch.special.xlogy(a, a).sum(-1)  # [b, h, i]
            cls = a[..., 0].mean(-1)  # [b, h]
            row["attention_entropy"] = float(entropy.mean())
            row["normalized_attention_entropy"] = float((entropy / math.log(n)).mean())
            row["first_token_attention"] = float(cls.mean())
            row["sink_rate"] = float((cls > threshold).double().mean(-1).mean())
            for h in range(heads):
                row[f"attention_entropy_h{h}"] = float(entropy[:, h].mean())
                row[f"first_token_attention_h{h}"] = float(cls[:, h].mean())
            row["sink_heads"] = " ".join(str(h) for h in range(heads) if float(cls[:, h].mean()) > threshold)
        rows.append(row)
    return rows



def _same(got: dict, want: dict, rtol: float, where: str) -> None:
    for key, w in want.items():
        g = got[key]
        if isinstance(w, str):
            assert g == w, (where, key, g, w)
        elif math.isnan(w):
            assert math.isnan(g), (where, key, g)
        else:
            assert math.isclose(g, w, rel_tol=rtol, abs_tol=rtol * 1e-3), (where, key, g, w)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("size", [32, 48], ids=["own-32px", "interpolated-48px"])
@pytest.mark.parametrize("path", ["whole map", "blocks of 5 rows"])
def test_vit_diagnostics_are_those_of_hfs_own_attention_maps_by_hand(sharp_vit, dtype, size, path):
    model = sharp_vit(dtype)
    px = _pixels(size)
    attentions, states = _hf(model, px)
    threshold = _threshold(attentions)
    cfg = AnalyzeConfig(metrics=("mu",), dtype=dtype, diagnostics=True, sink_threshold=threshold,
                        diagnostics_chunk=5 if path == "blocks of 5 rows" else None)
    maps: dict[int, torch.Tensor] = {}
    keep = (lambda t, a: maps.__setitem__(t, a.clone())) if path == "whole map" else None
    result = analyze(cfg, model=model, pixel_values=px, on_attention=keep)
    want = _by_hand(attentions, states, threshold)
    n = 1 + (size // 8) ** 2
    assert result.config.tokens == n == attentions[0].shape[-1] and len(result.rows) == len(want) == 5
    for row, w in zip(result.rows, want, strict=True):
        _same(row, w, RTOL[dtype], f"{path}, row {row['layer']}")
    sinks = [r["sink_rate"] for r in result.rows[1:]]
    assert any(0 < s < 1 for s in sinks)  # the threshold splits the heads of some layer
    assert max(r["attention_entropy"] for r in result.rows[1:]) < 0.6 * math.log(n)  # not near-uniform
    if keep is not None:  # the maps themselves: the parts' softmax is HF's
        assert sorted(maps) == [1, 2, 3, 4]
        for t, a in maps.items():
            torch.testing.assert_close(a, attentions[t - 1].to(a.dtype), rtol=0, atol=RTOL[dtype])


@pytest.mark.parametrize("chunk", [1, 5, 36, 64])
def test_vit_diagnostics_in_blocks_of_query_rows_equal_the_whole_map(sharp_vit, chunk):
    """37 tokens (48 x 48 px): one row per block, blocks that leave rows over (5: 7 x 5 + 2; 36: one
    left), one block larger than n; every column of every row as the materialising path's, float64."""
    model = sharp_vit("float64")
    px = _pixels(48)
    base = dict(metrics=("mu", "mu_rel"), dtype="float64", diagnostics=True, sink_threshold=0.05)
    seen: list[int] = []
    ref = analyze(AnalyzeConfig(**base), model=model, pixel_values=px,
                  on_attention=lambda t, a: seen.append(a.shape[-1]))
    got = analyze(AnalyzeConfig(**base, diagnostics_chunk=chunk), model=model, pixel_values=px)
    assert seen == [37] * 4
    for a, b in zip(ref.rows, got.rows, strict=True):
        assert a.keys() == b.keys()
        kept = {k: v for k, v in a.items() if isinstance(v, float | str)}
        _same(b, kept, 1e-12, f"row {a['layer']}")
