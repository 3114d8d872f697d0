"""The device parsed once and the sample batches (``rankcollapse.core.execution``): every refusal is one
line naming the bad value and what is allowed; CUDA is faked by monkeypatching torch's answers."""

from __future__ import annotations

import pytest
import torch

import rankcollapse.core.execution as execution
from rankcollapse.core.execution import batch_slices, check_batch_size, parse_device
from rankcollapse.edge.errors import RankCollapseError


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def _refused(*args: object) -> str:
    with pytest.raises(RankCollapseError) as info:
        parse_device(*args)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message and message.startswith("--device")
    return message


def test_cpu_and_its_spellings_parse_to_the_cpu() -> None:
    for text in ("cpu", " CPU ", torch.device("cpu")):
        assert parse_device(text) == torch.device("cpu")
    assert parse_device("cpu", "float64") == torch.device("cpu")


@pytest.mark.parametrize("text", ["gpu", "", "cuda:", "cuda:x", "tpu", "mps", "cuda:-1", "cuda0"])
def test_an_unknown_spelling_is_refused_with_the_allowed_ones(text: str) -> None:
    message = _refused(text)
    assert "allowed: cpu, cuda, cuda:K" in message


def test_the_cpu_has_no_index() -> None:
    assert "allowed: cpu" in _refused("cpu:0")


def test_cuda_without_a_gpu_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpus(monkeypatch, 0)
    message = _refused("cuda")
    assert "no CUDA GPU here" in message and torch.__version__ in message
    assert "no CUDA GPU here" in _refused("cuda:0")


def test_a_gpu_index_beyond_those_visible_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpus(monkeypatch, 2)
    assert parse_device("cuda") == torch.device("cuda")
    assert parse_device("cuda:1") == torch.device("cuda:1")
    message = _refused("cuda:2")
    assert "torch sees 2 CUDA GPUs" in message and "cuda:0 .. cuda:1" in message


def test_float64_is_refused_only_where_torch_says_it_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpus(monkeypatch, 1)
    assert execution.supports_float64(torch.device("cuda")) and execution.supports_float64(
        torch.device("cpu")
    )
    assert parse_device("cuda", "float64") == torch.device("cuda")  # CUDA computes float64
    monkeypatch.setattr(execution, "supports_float64", lambda device: device.type == "cpu")
    message = _refused("cuda", "float64")
    assert "float64 is not supported" in message and "--dtype float32" in message
    assert parse_device("cuda", "float32") == torch.device("cuda")
    assert parse_device("cpu", "f64") == torch.device("cpu")


def test_a_device_that_is_not_a_name_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="device"):
        parse_device(3)  # type: ignore[arg-type]


def test_batches_cover_the_samples_in_order_and_a_large_batch_is_clamped() -> None:
    assert batch_slices(7, 3) == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert batch_slices(7, None) == batch_slices(7, 7) == batch_slices(7, 100) == [slice(0, 7)]
    assert batch_slices(4, 1) == [slice(i, i + 1) for i in range(4)]
    assert batch_slices(0, 3) == []
    for size in (1, 2, 3, 5, 8):
        rows = [i for part in batch_slices(8, size) for i in range(part.start, part.stop)]
        assert rows == list(range(8))


@pytest.mark.parametrize("bad", [0, -1])
def test_a_batch_size_below_one_is_refused(bad: int) -> None:
    with pytest.raises(RankCollapseError, match=f"--batch-size must be >= 1, got {bad}"):
        check_batch_size(bad)
    with pytest.raises(TypeError, match="batch_size"):
        check_batch_size(2.5)  # type: ignore[arg-type]
