"""Simulator: reproducibility, kernel agreement, streaming, options and their errors."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.dynamics import SimulationConfig, simulate
from rankcollapse.dynamics.simulate import resolve_mask
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.metrics import METRIC_NAMES, collapse_metrics


def cfg(**kw) -> SimulationConfig:  # type: ignore[no-untyped-def]
    base = {"tokens": 16, "d": 8, "layers": 6, "samples": 3, "seed": 7}
    base.update(kw)
    return SimulationConfig(**base)


def test_rows_have_every_metric_and_row_t_is_x_t() -> None:
    r = simulate(cfg(mask="causal"), keep_trajectory=True)
    assert len(r.rows) == 7 and [row["layer"] for row in r.rows] == list(range(7))
    for name in METRIC_NAMES:
        assert name in r.rows[0] and f"{name}_min" in r.rows[0] and f"{name}_max" in r.rows[0]
    assert "attn_min" in r.rows[0]
    assert r.trajectory is not None and r.trajectory.shape == (7, 3, 16, 8)
    per = collapse_metrics(r.trajectory[4])
    assert r.rows[4]["mu_rel"] == pytest.approx(float(per["mu_rel"].mean()))
    assert torch.equal(r.trajectory[-1], r.final)
    assert r.mu.shape == (7, 3) and r.min_weight is not None and r.min_weight.shape == (6, 3)


def test_no_trajectory_by_default_and_on_layer_streams_rows() -> None:
    seen: list[dict[str, float]] = []
    r = simulate(cfg(), on_layer=seen.append)
    assert r.trajectory is None
    assert seen == r.rows


def test_same_seed_same_numbers_other_seed_other_numbers() -> None:
    a = simulate(cfg(mask="window:w=2"))
    b = simulate(cfg(mask="window:w=2"))
    c = simulate(cfg(mask="window:w=2", seed=8))
    assert torch.equal(a.final, b.final) and a.rows == b.rows
    assert not torch.allclose(a.final, c.final)


@pytest.mark.parametrize(
    ("mask", "n", "expected"),
    [("complete", 64, "sdpa"), ("causal", 64, "sdpa-causal"), ("window:w=4", 64, "band"),
     ("causal-window:w=1", 64, "band"), ("window:w=3", 50, "band")],
)
def test_fast_paths_agree_with_dense_reference_over_128_layers(mask: str, n: int, expected: str) -> None:
    """float64, 128 layers: every X(t) of the fast path within 1e-12 (relative to max|X(t)|)."""
    common = {"mask": mask, "tokens": n, "d": 16, "layers": 128, "samples": 2, "seed": 3,
              "metrics": ("mu_rel",),
              "track_min_weight": False, "value_scale": 1.0}
    fast = simulate(SimulationConfig(**common), keep_trajectory=True)
    ref = simulate(SimulationConfig(**common, kernel="dense"), keep_trajectory=True)
    assert fast.kernel == expected and ref.kernel == "dense"
    assert fast.trajectory is not None and ref.trajectory is not None
    scale = ref.trajectory.abs().amax(dim=(1, 2, 3), keepdim=True)
    err = ((fast.trajectory - ref.trajectory).abs() / scale).max()
    assert float(err) < 1e-12


def test_min_weight_tracking_does_not_change_the_numbers() -> None:
    a = simulate(cfg(mask="complete", track_min_weight=True))
    b = simulate(cfg(mask="complete", track_min_weight=False))
    assert a.kernel == b.kernel == "sdpa"
    assert torch.allclose(a.final, b.final, rtol=1e-12, atol=1e-14)


def test_float32_uses_the_same_weights_as_float64() -> None:
    a = simulate(cfg(mask="causal", layers=3, track_min_weight=False), keep_trajectory=True)
    b = simulate(cfg(mask="causal", layers=3, dtype="float32", track_min_weight=False), keep_trajectory=True)
    assert b.final.dtype == torch.float32
    assert a.trajectory is not None and b.trajectory is not None
    assert torch.allclose(b.trajectory.double(), a.trajectory, rtol=1e-4, atol=1e-5)


def test_shared_weights_and_identity_values() -> None:
    # identity W_V: X(t+1) = A X(t), every token a convex combination of the previous ones, so the
    # largest token norm never grows
    r = simulate(cfg(mask="complete", value="identity", shared_weights=True, layers=20), keep_trajectory=True)
    assert r.trajectory is not None
    top = r.trajectory.norm(dim=-1).amax(dim=-1)  # [t, b]
    assert bool((top[1:] <= top[:-1] * (1 + 1e-12)).all())


def test_user_value_matrix_and_input_tokens() -> None:
    x0 = torch.randn(16, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    wv = torch.eye(8, dtype=torch.float64) * 2
    r = simulate(cfg(mask="causal", value_matrix=wv, input_tokens=x0, layers=1), keep_trajectory=True)
    assert r.trajectory is not None
    assert torch.equal(r.trajectory[0, 0], x0) and torch.equal(r.trajectory[0, 2], x0)
    # token 0 attends only to itself: x_0(1) = x_0(0) W_V
    assert torch.allclose(r.trajectory[1, :, 0], 2 * x0[0].expand(3, 8))


def test_user_mask_matrix_and_theory_radius() -> None:
    m = torch.ones(16, 16, dtype=torch.bool).tril()
    r = simulate(cfg(mask_matrix=m, layers=4))
    assert r.kernel == "sdpa-causal" and r.radius == 1
    assert r.theory is not None and r.theory.applicable


def test_stop_below_ends_the_run_early() -> None:
    r = simulate(cfg(mask="complete", layers=500, stop_below=1e-6))
    assert len(r.rows) < 500 and "below" in r.stopped
    assert r.rows[-1]["mu_rel_max"] < 1e-6


def test_metric_subset_keeps_mu() -> None:
    r = simulate(cfg(metrics=("sigma_min",)))
    assert {"mu", "mu_rel", "sigma_min"} <= set(r.rows[0]) and "effective_rank" not in r.rows[0]


@pytest.mark.parametrize(
    ("change", "match"),
    [({"mode": "gpt"}, "unknown mode"), ({"value": "unitary"}, "value"), ({"dtype": "f16"}, "dtype"),
     ({"tokens": 1}, "tokens must"), ({"heads": 3}, "heads"), ({"d_qk": 0.0}, "d_qk"),
     ({"device": "tpu"}, "device"), ({"metrics": ("nope",)}, "metrics"), ({"inputs": "uniform"}, "inputs"),
     ({"value_matrix": torch.eye(3)}, "value_matrix"), ({"kernel": "band", "mask": "block:size=4"}, "band")],
)
def test_bad_settings_raise_one_line_user_errors(change: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(RankCollapseError, match=match) as info:
        simulate(cfg(**change))
    assert "\n" not in str(info.value)


def test_cuda_request_without_gpu_is_a_clear_error_or_runs() -> None:
    if torch.cuda.is_available():
        a = simulate(cfg(mask="causal", track_min_weight=False))
        b = simulate(cfg(mask="causal", device="cuda", track_min_weight=False))
        assert torch.allclose(a.final, b.final.cpu(), rtol=1e-9, atol=1e-12)
    else:
        with pytest.raises(RankCollapseError, match="GPU"):
            simulate(cfg(device="cuda"))


def test_resolve_mask_from_spec() -> None:
    m = resolve_mask("window:w=2", 10)
    assert m.band == (-2, 2) and not m.complete and m.radius == 3
    assert resolve_mask("complete", 10).complete


def test_sphere_ln_zero_token_raises() -> None:
    x0 = torch.zeros(16, 8, dtype=torch.float64)
    with pytest.raises(RankCollapseError, match="zero token"):
        simulate(cfg(mode="attn+sphere", input_tokens=x0))


def test_every_preset_runs_and_stays_finite() -> None:
    from rankcollapse.dynamics import PRESETS

    for name in PRESETS:
        r = simulate(cfg(mode=name, heads=2, layers=3))
        assert all(torch.isfinite(torch.tensor(row["mu"])) for row in r.rows), name
        assert (r.theory is not None and r.theory.applicable) == (name == "attn")


@pytest.mark.parametrize("mask", ["window:w=4", "complete"])
def test_multihead_fast_paths_agree_with_dense(mask: str) -> None:
    common = {"mask": mask, "tokens": 48, "d": 16, "heads": 2, "output": "gaussian", "layers": 32,
              "samples": 2,
              "seed": 5, "metrics": ("mu_rel",), "track_min_weight": False}
    fast = simulate(SimulationConfig(**common), keep_trajectory=True)
    ref = simulate(SimulationConfig(**common, kernel="dense"), keep_trajectory=True)
    assert fast.kernel != "dense"
    assert fast.trajectory is not None and ref.trajectory is not None
    scale = ref.trajectory.abs().amax(dim=(1, 2, 3), keepdim=True)
    assert float(((fast.trajectory - ref.trajectory).abs() / scale).max()) < 1e-12


def test_mix_ln_runs_post_ln_then_pre_ln_by_depth() -> None:
    """Mix-LN with share 1 is the post-LN transformer, with share 0 the pre-LN one, exactly; the default
    (25 %) is neither."""
    from rankcollapse.dynamics.simulate import SimulationConfig, simulate

    def final(mode: str, **kw: float) -> torch.Tensor:
        return simulate(SimulationConfig(mode=mode, tokens=6, d=4, layers=8, samples=2, seed=1,
                                         metrics=("mu", "mu_rel"), **kw)).final

    post, pre, mix = final("transformer"), final("transformer-pre"), final("transformer-mix")
    assert torch.equal(final("transformer-mix", mix_post_share=1.0), post)
    assert torch.equal(final("transformer-mix", mix_post_share=0.0), pre)
    assert not torch.allclose(mix, post) and not torch.allclose(mix, pre)
