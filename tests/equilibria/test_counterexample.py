"""The N = d = 2 counterexample: analytic fixed points, stability, basin arc, value-matrix family."""

import math

import numpy as np
import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria import (
    angle_map,
    antipode_threshold,
    basin_arc,
    causal_mask,
    counterexample_2d,
    fixed_points_on_circle,
    iterate,
    ln_attention_map,
    scan_value_family,
    simulate_pair,
)


@pytest.fixture(scope="module")
def cx():
    return counterexample_2d()


@pytest.fixture(scope="module")
def fps(cx):
    return fixed_points_on_circle(cx)


@pytest.fixture(scope="module")
def arc(cx):
    return basin_arc(cx)


def test_token0_converges_to_plus_or_minus_sink(cx):
    np.testing.assert_allclose(cx.sink, [0.0, 1.0], atol=1e-15)
    ends = simulate_pair(np.array([0.6, 0.8]), np.array([0.0]), cx, steps=1500)[0, 0]
    np.testing.assert_allclose(ends, [0.0, 1.0], atol=1e-12)
    ends = simulate_pair(np.array([-0.6, -0.8]), np.array([0.0]), cx, steps=1500)[0, 0]
    np.testing.assert_allclose(ends, [0.0, -1.0], atol=1e-12)


def test_angle_map_equals_the_torch_layer(cx):
    th = np.linspace(0.1, 6.2, 37)
    x = torch.zeros(len(th), 2, 2, dtype=torch.float64)
    x[:, 0] = torch.tensor([0.0, 1.0])
    x[:, 1, 0] = torch.as_tensor(np.cos(th))
    x[:, 1, 1] = torch.as_tensor(np.sin(th))
    y = ln_attention_map(x, cx.torch_w_v(), causal_mask(2))[:, 1].numpy()
    np.testing.assert_allclose(np.arctan2(y[:, 1], y[:, 0]), angle_map(th, cx), atol=1e-14)


def test_four_fixed_points_with_expected_stability(fps):
    assert [p.stable for p in fps] == [True, False, True, False]
    a, p, b, minus_u = fps
    assert a.theta == pytest.approx(math.pi / 2, abs=1e-12)
    assert minus_u.theta == pytest.approx(3 * math.pi / 2, abs=1e-12)
    assert a.derivative == pytest.approx(0.475, abs=1e-8)  # a * (1 - 1/2) at the sink
    assert minus_u.derivative == pytest.approx(0.95 * (1 - 0.1192029220221175) / (1 - 2 * 0.1192029220221175),
                                               abs=1e-8)
    assert b.point[0] == pytest.approx(-0.0860232277, abs=1e-9)
    assert b.point[1] == pytest.approx(-0.9962931317, abs=1e-9)
    assert 0 < b.derivative < 1 < p.derivative


def test_analytic_fixed_points_match_simulation_to_1e_8(cx, fps):
    stable = [p for p in fps if p.stable]
    starts = np.array([1.0, 2.0, 3.0, 4.0, 4.7, 5.5])
    ends = simulate_pair(cx.sink, starts, cx, steps=3000)[:, 1]
    for end in ends:
        dist = min(np.linalg.norm(end - np.asarray(p.point)) for p in stable)
        assert dist < 1e-8
    # and the fixed points are fixed under the torch layer itself
    for p in fps:
        x = torch.tensor([[0.0, 1.0], list(p.point)], dtype=torch.float64)
        y = ln_attention_map(x, cx.torch_w_v(), causal_mask(2))
        assert float((y - x).abs().max()) < 1e-12


def test_basin_arc_ends_are_the_unstable_fixed_points(arc, fps):
    unstable = [p.theta for p in fps if not p.stable]
    assert arc.start == pytest.approx(unstable[0], abs=1e-6)
    assert arc.end == pytest.approx(unstable[1], abs=1e-6)
    assert arc.start_fixed_point == unstable[0] and arc.end_fixed_point == unstable[1]


def test_basin_arc_ends_separate_a_from_b(cx, arc):
    a = np.array([0.0, 1.0])
    b = np.asarray(arc.target_point)
    eps = 1e-4
    starts = np.array([arc.start - eps, arc.start + eps, arc.end - eps, arc.end + eps])
    ends = simulate_pair(cx.sink, starts, cx, steps=4000)[:, 1]
    assert np.linalg.norm(ends[0] - a) < 1e-8
    assert np.linalg.norm(ends[1] - b) < 1e-8
    assert np.linalg.norm(ends[2] - b) < 1e-8
    assert np.linalg.norm(ends[3] - a) < 1e-8


def test_full_rank_kept_from_the_arc_with_layernorm(cx, arc):
    mid = 0.5 * (arc.start + arc.end)
    x = simulate_pair(np.array([0.6, 0.8]), np.array([mid]), cx, steps=2000)[0]
    assert abs(np.linalg.det(x)) > 0.05


def test_without_layernorm_both_tokens_meet(cx):
    y = simulate_pair(np.array([0.6, 0.8]), np.array([0.3, 1.2, 2.2]), cx, steps=800, layer_norm=False)
    for x in y:
        assert np.linalg.norm(x[0] - x[1]) < 1e-8 * np.linalg.norm(x[0])


def test_pair_simulation_equals_a_plain_numpy_iteration(cx):
    """simulate_pair (the project's map) against the two-token map written out here in NumPy."""
    th = np.array([0.4, 2.9, 4.0])
    fast = simulate_pair(np.array([0.6, 0.8]), th, cx, steps=25)
    x0 = np.tile([0.6, 0.8], (3, 1))
    x1 = np.stack([np.cos(th), np.sin(th)], axis=-1)
    for _ in range(25):
        q = x1 @ cx.w_qk
        s0, s1 = (q * x0).sum(-1), (q * x1).sum(-1)
        alpha = (1.0 / (1.0 + np.exp(s1 - s0)))[:, None]
        y0, y1 = x0 @ cx.w_v, (alpha * x0 + (1 - alpha) * x1) @ cx.w_v
        x0 = y0 / np.linalg.norm(y0, axis=-1, keepdims=True)
        x1 = y1 / np.linalg.norm(y1, axis=-1, keepdims=True)
    np.testing.assert_allclose(fast, np.stack([x0, x1], axis=1), atol=1e-13)


def test_family_works_exactly_above_the_antipode_threshold():
    cx = counterexample_2d()
    a_star = antipode_threshold(cx)
    assert a_star == pytest.approx((1 - 2 / (1 + math.e**2)) / (1 - 1 / (1 + math.e**2)), abs=1e-12)
    rows = scan_value_family(np.array([0.80, 0.86, 0.87, 0.95]), np.array([0.0, 0.5, 2.0]), grid=2000)
    works = {(r.a, r.s): r.works for r in rows}
    for (a, s), ok in works.items():
        assert ok == (a > a_star and s != 0.0), (a, s)


def test_bad_value_matrix_is_a_one_line_error():
    with pytest.raises(RankCollapseError):
        counterexample_2d([[1.0, 0.0], [0.0, 1.0]])  # no strictly dominant eigenvalue
    with pytest.raises(RankCollapseError):
        counterexample_2d([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def test_iterate_keeps_unit_norm():
    x = torch.randn(3, 4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = iterate(x, torch.eye(3, dtype=torch.float64), 3)
    torch.testing.assert_close(torch.linalg.vector_norm(y, dim=-1), torch.ones(3, 4, dtype=torch.float64))
