"""A row is ``ok`` only where every sample it averages was measured (issue 39, finished-looking): finite
but huge float32 states (tokens near 1e37) overflowed the measure's sums, and the row said ``status ok``
with ``mu`` inf and ``mu_rel`` NaN; the training monitor averaged over the finite probe samples with no
count and no warning, where ``analyze`` says its metrics cover finite samples only."""

from __future__ import annotations

import math

import torch
from torch import nn

from rankcollapse.models.samples import measure_samples, status_of, zero_samples
from rankcollapse.monitor import Monitor


def test_a_state_whose_metrics_overflow_is_an_overflow_row_not_ok_with_an_infinite_mu():
    x = torch.randn(3, 8, 16, generator=torch.Generator().manual_seed(0))
    x[1] *= 3e37  # finite, but its squared norms do not fit in float32
    assert bool(torch.isfinite(x).all())
    finite, stats, values = measure_samples(x, ("mu", "mu_rel", "num_rank"))
    assert finite == 2 / 3 and status_of(finite, zero_samples(x)) == "overflow"
    assert math.isfinite(stats["mu"]) and math.isfinite(stats["mu_rel"])  # the finite samples' means
    assert math.isnan(float(values["mu"][1]))
    zero = torch.zeros(2, 8, 16)  # a zero state stays an underflow (mu_rel 0/0), never an overflow
    finite, _, _ = measure_samples(zero, ("mu", "mu_rel"))
    assert status_of(finite, zero_samples(zero)) == "underflow"


class Blowup(nn.Module):
    """Layer ``k`` multiplies sample 1 by 3e37 (float32 stays finite, its metrics do not)."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        out[1] = out[1] * self.scale
        return out


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.blocks = nn.ModuleList([Blowup(1.0), Blowup(3e37)])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return x


def test_the_monitor_says_when_a_rows_mean_covers_only_the_finite_probe_samples(capsys):
    torch.manual_seed(0)
    ids = torch.randint(0, 20, (3, 8), generator=torch.Generator().manual_seed(1))
    monitor = Monitor(every=1, metrics="mu,mu_rel")
    rows = monitor.measure(Plain(), ids, step=4)
    last = {r["metric"]: r["value"] for r in rows if r["layer"] == 2}
    assert math.isfinite(last["mu"]) and math.isfinite(last["mu_rel"])  # the two finite samples' means
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 4: row 2: only 2 of 3 probe samples finite" in err[0], err
    assert monitor.failures and "finite samples only" in monitor.failures[0]
