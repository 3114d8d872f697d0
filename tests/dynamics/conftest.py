"""Dynamics tests run single-threaded: tiny tensors on a shared 2-core machine are ~20x slower with
two contending intra-op threads."""

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
