"""``measure_curves`` advances many layer streams together; it leaves the caller's grad mode as it was.

Each stream is suspended inside ``torch.inference_mode``: left to the garbage collector, the streams
restored their modes out of order and the thread stayed in inference mode (a later training step in
the same process failed: ``element 0 of tensors does not require grad``).
"""

from __future__ import annotations

import torch

from rankcollapse.models.measure import CurvesConfig, measure_curves


def test_measure_curves_gives_the_grad_mode_back() -> None:
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    cfg = CurvesConfig(model="tiny:bert", variants=("attn", "full"), masks=("complete", "causal"), layers=2,
                       samples=3, tokens=8, dtype="float64")
    for batch_size in (None, 2):
        m = measure_curves(cfg, lambda t: None, batch_size=batch_size)
        assert len(m.conditions) == 4
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        w = torch.ones(2, requires_grad=True)
        (w * w).sum().backward()  # a training step after a measurement
        assert torch.equal(w.grad, torch.full((2,), 2.0))
