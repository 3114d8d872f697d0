"""models.jacobian: the probed profile equals the full autograd Jacobian's norms when every direction is
probed, is unbiased-close with a few probes, repeats per seed, and RoPE's removal is applied and refused
where there is none."""

from __future__ import annotations

import numpy as np
import pytest

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.jacobian import JacobianConfig, exact_jacobian_norms, measure_jacobian


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-qwen2"])
def test_every_probe_gives_the_exact_frobenius_norms(model: str) -> None:
    cfg = JacobianConfig(model=model, tokens=6, samples=2, probes=None, seed=3)
    got = measure_jacobian(cfg)
    assert got.exact and got.probes == 64 and got.profile.shape == (2, 6) and got.depth == 4
    assert np.allclose(got.profile, exact_jacobian_norms(cfg), rtol=1e-4)
    few = measure_jacobian(JacobianConfig(model=model, tokens=6, samples=2, probes=16, seed=3)).profile
    assert np.abs(np.log(few / got.profile)).max() < 0.5  # an estimate of the same norms


def test_a_seed_repeats_and_another_seed_differs() -> None:
    a = measure_jacobian(JacobianConfig(model="tiny-gpt2", tokens=5, probes=4, seed=1)).profile
    b = measure_jacobian(JacobianConfig(model="tiny-gpt2", tokens=5, probes=4, seed=1)).profile
    c = measure_jacobian(JacobianConfig(model="tiny-gpt2", tokens=5, probes=4, seed=2)).profile
    assert np.array_equal(a, b) and not np.allclose(a, c)


def test_removing_rope_changes_the_rotation_only_where_there_is_one() -> None:
    on = exact_jacobian_norms(JacobianConfig(model="tiny-qwen2", tokens=6, seed=0))
    off = exact_jacobian_norms(JacobianConfig(model="tiny-qwen2", tokens=6, seed=0, rope=False))
    assert not np.allclose(on, off, rtol=1e-7) and np.allclose(on, off, rtol=0.2)
    assert measure_jacobian(JacobianConfig(model="tiny-qwen2", tokens=6, probes=2, rope=False)).rope is False
    with pytest.raises(RankCollapseError, match="rope=false applies to a model with RoPE"):
        JacobianConfig(model="tiny-gpt2", rope=False)


@pytest.mark.parametrize(
    ("field", "value"), [("model", "bert"), ("tokens", 2), ("probes", 0), ("rope", "no")]
)
def test_bad_settings_are_one_line(field: str, value: object) -> None:
    with pytest.raises(RankCollapseError) as err:
        JacobianConfig(**{field: value})
    assert "\n" not in str(err.value)
