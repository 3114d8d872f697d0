"""models.rollout: the rollout of a model's own attention against Hugging Face's own attention weights and a
plain product loop; per-head and head-averaged; batches; the sink measures beside it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics.rollout import uniform_causal_gap
from rankcollapse.models import excerpts
from rankcollapse.models.rollout import RolloutConfig, measure_rollout
from rankcollapse.models.run_model import load_model_cached

LAMS = (0.0, 0.3)


def _hf_attentions(name: str, cfg: RolloutConfig) -> list[torch.Tensor]:
    """Hugging Face's own eager attention weights [b, h, n, n] per layer, float64, on the run's excerpts."""
    model = load_model_cached(name, cfg.dtype, cfg.seed)
    ids = excerpts(model, cfg.corpus, cfg.samples, cfg.tokens, cfg.seed)
    with torch.inference_mode():
        out = model.hf_model(input_ids=ids, output_attentions=True)
    return [a.double() for a in out.attentions]


def _plain_rollout(attns: list[torch.Tensor], lam: float) -> list[torch.Tensor]:
    """P(t) = (lam I + (1 - lam) A(t)) P(t-1), one sample and head at a time with explicit loops."""
    b, h, n, _ = attns[0].shape
    eye = torch.eye(n, dtype=torch.float64)
    out = [eye.expand(b, h, n, n).clone()]
    for a in attns:
        nxt = torch.empty_like(out[-1])
        for s in range(b):
            for k in range(h):
                nxt[s, k] = (lam * eye + (1 - lam) * a[s, k]) @ out[-1][s, k]
        out.append(nxt)
    return out


@pytest.mark.parametrize("name", ["tiny:gpt2", "tiny:bert"])
def test_rollout_is_the_product_of_hf_own_attention_per_head_and_averaged(name: str) -> None:
    cfg = RolloutConfig(model=name, tokens=12, samples=3, lams=LAMS, ends=2, dtype="float64")
    m = measure_rollout(cfg, lambda t: None)
    attns = _hf_attentions(name, cfg)
    for lam in LAMS:
        per_head = _plain_rollout(attns, lam)
        mean = _plain_rollout([a.mean(1, keepdim=True) for a in attns], lam)  # product of the averages
        for t in range(len(attns) + 1):
            np.testing.assert_allclose(m.profile[lam][:, t], mean[t][:, 0, -1].numpy(), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(m.head_share[lam][:, :, t], per_head[t][..., :, 0].mean(-1).numpy(),
                                       rtol=1e-9, atol=1e-12)
            gap = mean[t][:, 0, :, 1:].sum(-1).amax(-1).numpy()
            got = m.columns[lam]["first_token_gap_max"][:, t]
            np.testing.assert_allclose(got, gap, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(m.head_profile[lam], per_head[-1][:, :, -1].numpy(), rtol=1e-9, atol=1e-12)
    first = torch.stack([a[..., 0].mean(-1) for a in attns], dim=-1)  # [b, h, L]
    np.testing.assert_allclose(m.head_first_token_attention, first.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m.sinks["sink_rate"], (first > cfg.sink_threshold).double().mean(1).numpy())


def test_the_head_average_is_not_the_average_of_the_per_head_products() -> None:
    cfg = RolloutConfig(model="tiny:gpt2", tokens=12, samples=2, lams=(0.0,), ends=2, dtype="float64")
    m = measure_rollout(cfg, lambda t: None)
    averaged = m.columns[0.0]["first_token_share_mean"][:, -1]
    of_heads = m.head_share[0.0][:, :, -1].mean(1)
    assert np.abs(averaged - of_heads).max() > 1e-6


def test_a_causal_model_puts_token_0_on_its_own_as_the_graph_says() -> None:
    # token 0 attends only to itself under a causal mask: P(t)[0, 0] = 1, so the mean share stays >= 1/n
    cfg = RolloutConfig(model="tiny:gpt2", tokens=12, samples=2, lams=LAMS, ends=2, dtype="float64")
    m = measure_rollout(cfg, lambda t: None)
    assert m.model["own_mask"] == "causal"
    for lam in LAMS:
        share = m.columns[lam]["first_token_share_mean"]
        assert np.all(share >= 1 / 12 - 1e-12)
        np.testing.assert_allclose(share[:, 0], 1 / 12)


def test_uniform_causal_attention_gives_the_closed_form_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every head attending uniformly over its allowed keys, the rollout's gap is the closed form."""
    from rankcollapse.models import rollout as module

    real = module._Rollouts.step

    def uniform(self: object, attn: torch.Tensor, threshold: float) -> None:
        n = attn.shape[-1]
        causal = torch.ones(n, n, dtype=torch.float64).tril()
        real(self, (causal / causal.sum(-1, keepdim=True)).expand(attn.shape).clone(), threshold)

    monkeypatch.setattr(module._Rollouts, "step", uniform)
    cfg = RolloutConfig(model="tiny:gpt2", tokens=12, samples=2, lams=(0.0,), ends=2, dtype="float64")
    m = measure_rollout(cfg, lambda t: None)
    for t in range(m.layers + 1):
        np.testing.assert_allclose(m.columns[0.0]["first_token_gap_max"][:, t], uniform_causal_gap(11, t),
                                   rtol=1e-10)


def test_batches_give_the_values_of_one_batch() -> None:
    cfg = RolloutConfig(model="tiny:bert", tokens=12, samples=3, lams=LAMS, ends=2, dtype="float64")
    one = measure_rollout(cfg, lambda t: None)
    split = measure_rollout(cfg, lambda t: None, batch_size=2)
    for lam in LAMS:
        np.testing.assert_allclose(split.profile[lam], one.profile[lam], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(split.head_profile[lam], one.head_profile[lam], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(split.sinks["first_token_attention"], one.sinks["first_token_attention"])


def test_on_layer_is_called_once_per_layer_in_order() -> None:
    seen: list[int] = []
    measure_rollout(RolloutConfig(model="tiny:bert", tokens=12, samples=3, ends=2), seen.append, batch_size=2)
    assert seen == list(range(5))


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"lams": (0.0, 1.5)}, "allowed: numbers in \\[0, 1\\]"),
        ({"lams": (0.5, 0.5)}, "repeats a value"),
        ({"ends": 6, "tokens": 12}, "2 k < n"),
        ({"samples": 0}, "samples=0 is invalid"),
        ({"sink_threshold": 2}, "sink_threshold=2 is invalid"),
    ],
)
def test_bad_settings_are_one_line(kw: dict, words: str) -> None:
    with pytest.raises(RankCollapseError, match=words):
        RolloutConfig(**{"model": "tiny:bert", "tokens": 12, "ends": 2, **kw})
