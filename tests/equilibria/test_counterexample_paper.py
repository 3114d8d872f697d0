"""The paper's counterexample (W_V = [[1, w], [0, 1]], W_Q = W_K = 0): closed forms against a plain
float64 iteration of the map written here independently (NumPy, no project code)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.equilibria.counterexample_paper import (
    arc_limits_by_iteration,
    moving_token1,
    paper_counterexample,
    token1_limit,
)

WS = (1.2, 2.0, 3.0, 10.0)


def plain_map(x1: np.ndarray, x2: np.ndarray, w: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """X <- D A X W_V with A = [[1, 0], [1/2, 1/2]] (causal, uniform): x1, x2 [b, 2]."""
    wv = np.array([[1.0, w], [0.0, 1.0]])
    for _ in range(steps):
        y1 = x1 @ wv
        y2 = 0.5 * (x1 + x2) @ wv
        x1 = y1 / np.linalg.norm(y1, axis=-1, keepdims=True)
        x2 = y2 / np.linalg.norm(y2, axis=-1, keepdims=True)
    return x1, x2


def on_circle(theta: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


@pytest.mark.parametrize("w", WS)
def test_a_and_b_closed_forms_are_fixed_and_b_attracts(w: float) -> None:
    cx = paper_counterexample(w)
    s = math.sqrt(1 - 1 / w**2)
    assert cx.A == pytest.approx((-1 / w, s), abs=1e-15) and cx.B == pytest.approx((-1 / w, -s), abs=1e-15)
    north = np.array([[0.0, 1.0]])
    for pt in (cx.A, cx.B):
        _, x2 = plain_map(north, np.array([pt]), w, 1)
        assert np.abs(x2[0] - pt).max() < 1e-15
    # B attracts from both sides inside the red segment; A repels
    th = np.array(
        [cx.theta_b - 0.3 * (cx.theta_b - cx.theta_a), cx.theta_b + 0.5 * (1.5 * math.pi - cx.theta_b)]
    )
    _, x2 = plain_map(np.repeat(north, 2, 0), on_circle(th), w, 3000)
    assert np.abs(x2 - np.array(cx.B)).max() < 1e-12
    _, x2 = plain_map(north, on_circle(np.array([cx.theta_a + 1e-9])), w, 200)
    assert np.linalg.norm(x2[0] - np.array(cx.A)) > 0.1


@pytest.mark.parametrize("w", WS)
def test_four_arcs_have_exact_ends_and_each_limit_is_the_iterated_one(w: float) -> None:
    cx = paper_counterexample(w)
    ends = [e for a in cx.arcs for e in (a.start, a.end)]
    assert ends == pytest.approx(
        [
            math.pi / 2,
            cx.theta_a,
            cx.theta_a,
            cx.theta_b,
            cx.theta_b,
            1.5 * math.pi,
            1.5 * math.pi,
            2.5 * math.pi,
        ],
        abs=1e-15,
    )
    assert cx.theta_a == pytest.approx(math.atan2(math.sqrt(1 - 1 / w**2), -1 / w), abs=1e-15)
    assert [a.limit_name for a in cx.arcs] == ["token1", "B", "B", "token1"]
    north = np.array([0.0, 1.0])
    for arc in cx.arcs:
        th = np.linspace(arc.start + 1e-3, arc.end - 1e-3, 41)
        _, x2 = plain_map(np.tile(north, (41, 1)), on_circle(th), w, 6000)
        assert np.abs(x2 - np.array(arc.limit)).max() < 1e-6, (arc, w)


def test_red_segment_is_the_union_of_the_arcs_to_b() -> None:
    cx = paper_counterexample(2.0)
    assert cx.red_segment == pytest.approx((2 * math.pi / 3, 1.5 * math.pi), abs=1e-15)
    # a dense grid of starts: exactly those inside the red segment end at B (rank 2 kept)
    th = (np.arange(3600) + 0.5) * (2 * math.pi / 3600)
    _, x2 = plain_map(np.tile([0.0, 1.0], (3600, 1)), on_circle(th), 2.0, 4000)
    at_b = np.linalg.norm(x2 - np.array(cx.B), axis=-1) < 1e-6
    inside = (th > cx.red_segment[0]) & (th < cx.red_segment[1])
    assert np.array_equal(at_b, inside)


def test_project_map_agrees_with_each_arc_limit() -> None:
    for row in arc_limits_by_iteration(2.0, per_arc=16, steps=3000):
        assert row["share_at_limit"] == 1.0 and row["token1_stays"] == 0.0


@pytest.mark.parametrize("x11", [0.3, -0.3])
def test_token1_limit_follows_the_sign_of_x11_algebraically(x11: float) -> None:
    w, steps = 2.0, 2000
    x1, _ = plain_map(np.array([[x11, 0.5]]), np.array([[1.0, 0.0]]), w, steps)
    lim = np.array(token1_limit(x11))
    dist = float(np.linalg.norm(x1[0] - lim))
    assert dist == pytest.approx(1 / (w * steps), rel=0.01)  # X12/X11 grows by w per layer: angle ~ 1/(w t)
    with pytest.raises(RankCollapseError):
        token1_limit(0.0)


def test_token1_not_converged_yet_shrinks_the_basin_of_b() -> None:
    m = moving_token1(2.0, token1=(0.6, 0.8), grid=360, steps=3000)
    assert m["share_to_B_if_token1_converged"] == pytest.approx(5 / 12)
    assert 0.1 < m["share_to_B_measured"] < m["share_to_B_if_token1_converged"]
    assert m["token1_distance_after_layers"] == pytest.approx(1 / (2 * 3000), rel=0.05)
    assert m["layers"] == 3000 and "steps" not in m  # the depth under the names table's key


@pytest.mark.parametrize("w", [1.0, 0.5, -3.0, float("nan"), float("inf"), "x"])
def test_bad_w_is_refused(w: object) -> None:
    with pytest.raises(RankCollapseError, match="w must be"):
        paper_counterexample(w)  # type: ignore[arg-type]


def test_cli_prints_one_object_with_w_a_b_arcs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["counterexample", "--w", "2", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert {"w", "A", "B", "arcs"} <= set(obj) and obj["w"] == 2.0
    assert obj["B"] == pytest.approx([-0.5, -math.sqrt(0.75)])
    assert [set(a) >= {"start", "end", "limit"} for a in obj["arcs"]] == [True] * 4


@pytest.mark.parametrize(
    "args",
    [
        ["--w", "1"],
        ["--w", "0.5", "--json"],
        ["--construction", "ours", "--w", "3"],
        ["--construction", "nope"],
        ["--construction", "ours", "--measure"],
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["counterexample", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rankcollapse: error:")


def test_figures_name_the_paper_construction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rankcollapse.equilibria.plots_paper import (
        plot_paper_figure1,
        plot_paper_figure5,
        write_paper_portrait,
    )

    fig1, fig5 = plot_paper_figure1(2.0, steps=10), plot_paper_figure5(2.0)
    for fig in (fig1, fig5):
        assert "the paper's construction" in fig._suptitle.get_text()
    assert "X(t) / ||X(t)||_F" in fig1.axes[0].get_title()
    paths = write_paper_portrait(tmp_path, 2.0)
    assert json.loads(open(paths["paper_numbers"]).read())["red_segment"][1] == pytest.approx(1.5 * math.pi)
