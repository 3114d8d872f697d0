"""core.positions: the one rotary embedding, against Hugging Face's own and a plain per-pair rotation."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.core.positions import apply_rotary, rotary, rotary_angles, rotary_frequencies
from rankcollapse.edge.errors import RankCollapseError


def test_the_rotation_is_hugging_faces_apply_rotary_pos_emb_on_the_same_tensors() -> None:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 9, 8, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, 9, 8, generator=g, dtype=torch.float64)
    cos, sin = rotary_angles(torch.arange(9)[None].expand(2, 9), 8, 500.0)  # [b, n, e]
    want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin)  # unsqueeze_dim=1: over the heads
    got_q = apply_rotary(q, cos.unsqueeze(1), sin.unsqueeze(1))
    got_k = apply_rotary(k, cos.unsqueeze(1), sin.unsqueeze(1))
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=1e-15)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=1e-15)


@pytest.mark.parametrize(("base", "factor"), [(10000.0, None), (100.0, None), (10000.0, 4.0)])
def test_the_angles_are_llamas_rotary_embedding(base: float, factor: float | None) -> None:
    """Default RoPE (``scale`` 1) and Hugging Face's linear scaling by ``factor`` (``scale = 1/factor``):
    our float64 angles against Llama's float32 ones (up to its float32 rounding of ``p θ``)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rope = {"rope_type": "default", "rope_theta": base} if factor is None else {
        "rope_type": "linear", "rope_theta": base, "factor": factor}
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_parameters=rope)
    pos = torch.arange(40)[None]
    want_cos, want_sin = LlamaRotaryEmbedding(cfg)(torch.zeros(1, dtype=torch.float32), pos)
    cos, sin = rotary_angles(pos, 16, base, 1.0 if factor is None else 1.0 / factor)
    torch.testing.assert_close(cos.float(), want_cos, rtol=0, atol=2e-5)
    torch.testing.assert_close(sin.float(), want_sin, rtol=0, atol=2e-5)


def _plain(x: torch.Tensor, p: float, base: float, scale: float) -> torch.Tensor:
    """Pair k = (x_k, x_{k + e/2}) turned by ``p θ_k`` with a 2 x 2 rotation matrix, one pair at a time."""
    e = x.shape[-1]
    out = x.clone()
    for k in range(e // 2):
        a = p * scale * base ** (-2.0 * k / e)
        c, s = math.cos(a), math.sin(a)
        out[k] = c * x[k] - s * x[k + e // 2]
        out[k + e // 2] = s * x[k] + c * x[k + e // 2]
    return out


def test_each_pair_turns_by_position_times_its_frequency() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 10, generator=g, dtype=torch.float64)
    got = rotary(x, torch.arange(7), 50.0, 0.3)
    want = torch.stack([_plain(x[i], i, 50.0, 0.3) for i in range(7)])
    torch.testing.assert_close(got, want, rtol=0, atol=1e-14)
    assert rotary_frequencies(10, 50.0, 0.3)[0] == 0.3  # θ_1 of Wu et al. (our θ_0) is the scale


def test_scores_depend_on_the_relative_position_only_and_fall_as_cos_for_q_equal_k() -> None:
    """``rot(q, i)·rot(k, j)`` is a function of ``i − j``; for ``q = k`` it is
    ``Σ_k |q_k|² cos((i − j) θ_k)``."""
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 12, generator=g, dtype=torch.float64)
    n = 9
    rq = rotary(q.expand(n, 12), torch.arange(n), 1000.0)
    rk = rotary(k.expand(n, 12), torch.arange(n), 1000.0)
    s = rq @ rk.T
    for d in range(-(n - 1), n):
        torch.testing.assert_close(s.diagonal(-d), s.diagonal(-d)[:1].expand(n - abs(d)), rtol=0, atol=1e-13)
    theta = rotary_frequencies(12, 1000.0)
    pair = q[:6] ** 2 + q[6:] ** 2
    rq = rotary(q.expand(n, 12), torch.arange(n), 1000.0)
    own = rq @ rq.T
    closed = torch.stack([(pair * torch.cos(d * theta)).sum() for d in range(n)])
    torch.testing.assert_close(own[:, 0], closed, rtol=0, atol=1e-13)


@pytest.mark.parametrize(("width", "base", "scale", "words"), [
    (7, 100.0, 1.0, "must be even"), (8, 1.0, 1.0, "rope_base"), (8, math.inf, 1.0, "rope_base"),
    (8, 100.0, 0.0, "rope_scale"), (8, 100.0, -1.0, "rope_scale")])
def test_bad_settings_are_one_line(width: int, base: float, scale: float, words: str) -> None:
    with pytest.raises(RankCollapseError, match=words):
        rotary_frequencies(width, base, scale)
