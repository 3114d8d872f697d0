"""core.precision: the four dtype names, their eps and floors in closed form, half precision refused by
default (a command opts in) in one line naming the commands that run it, and bfloat16 refused on a GPU
that cannot compute in it (CUDA faked by monkeypatching torch's answers)."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.core.precision import (
    ALL_DTYPE_NAMES,
    DTYPE_NAMES,
    FLOOR_FACTOR,
    HALF_DTYPE_NAMES,
    check_half_device,
    dtype_name,
    eps,
    floor_rel,
    is_half,
    parse_dtype,
    precision_floor,
)
from rankcollapse.edge.errors import RankCollapseError

#: Each dtype's eps is 2^-(mantissa bits): the floor of mu_rel is FLOOR_FACTOR times it.
MANTISSA = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}


@pytest.mark.parametrize("name", ALL_DTYPE_NAMES)
def test_eps_and_floor_of_each_dtype_are_its_closed_form(name: str) -> None:
    assert eps(name) == 2.0 ** -MANTISSA[name]
    assert floor_rel(name) == FLOOR_FACTOR * 2.0 ** -MANTISSA[name]
    assert floor_rel(parse_dtype(name)) == floor_rel(name)  # a torch dtype reads the same floor
    assert floor_rel("bfloat16") == 0.25 and floor_rel("float16") == 2.0**-5


@pytest.mark.parametrize(("alias", "name"), [("bf16", "bfloat16"), ("fp16", "float16"), ("half", "float16"),
                                             ("f16", "float16"), ("torch.bfloat16", "bfloat16"),
                                             ("f32", "float32"), ("double", "float64")])
def test_aliases_read_as_their_canonical_name_where_half_precision_is_allowed(alias: str, name: str) -> None:
    assert dtype_name(alias, half=True) == name
    assert parse_dtype(alias) == getattr(torch, name)
    assert is_half(alias) == (name in HALF_DTYPE_NAMES)


@pytest.mark.parametrize("given", ["bfloat16", "bf16", "float16", torch.bfloat16, torch.float16])
def test_half_precision_is_refused_by_default_in_one_line_naming_where_it_runs(given: object) -> None:
    with pytest.raises(RankCollapseError) as err:
        dtype_name(given)
    text = str(err.value)
    assert "half precision" in text and "analyze and the monitor" in text and "\n" not in text
    assert text.endswith(f"allowed: {', '.join(DTYPE_NAMES)}")


def test_an_unknown_dtype_names_the_allowed_ones_of_its_command() -> None:
    with pytest.raises(RankCollapseError, match=r"unknown dtype 'int8'; allowed: float64, float32$"):
        dtype_name("int8")
    with pytest.raises(RankCollapseError, match=r"allowed: float64, float32, bfloat16, float16$"):
        dtype_name("int8", half=True)
    with pytest.raises(RankCollapseError, match="allowed: float64, float32, bfloat16, float16"):
        dtype_name(torch.int8, half=True)


def test_the_floor_of_a_half_precision_state_is_its_own_dtype_summed_in_float32() -> None:
    x = torch.full((2, 300, 64), 3.0)  # ||x||_F = 3 sqrt(19200) = 415.7: bf16 alone would round the sum
    want = FLOOR_FACTOR * 2.0**-7 * float(torch.linalg.vector_norm(x[0]))
    got = precision_floor(x.to(torch.bfloat16))
    assert got.dtype == torch.float32 and torch.allclose(got, torch.full((2,), want), rtol=1e-6)
    assert float(precision_floor(x)[0]) == pytest.approx(want * 2.0**-16, rel=1e-6)  # float32's floor


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # parse_device's check: one GPU seen
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Fake T4")


def test_bfloat16_on_a_gpu_below_compute_capability_8_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(monkeypatch, (7, 5))
    with pytest.raises(RankCollapseError) as err:
        check_half_device("bfloat16", "cuda")
    text = str(err.value)
    assert "bfloat16 is not supported" in text and "7.5" in text and "--dtype float16" in text
    assert "\n" not in text
    for fine in ("float16", "float32", "float64"):
        check_half_device(fine, "cuda:0")  # float16 runs there; float64 is parse_device's to judge
    check_half_device("bfloat16", "cpu")  # the CPU computes in both half dtypes
    _fake_gpu(monkeypatch, (8, 0))
    check_half_device("bfloat16", "cuda:0")
