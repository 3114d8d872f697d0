"""Equilibria tests run single-threaded: the maps are tiny, and on a shared 2-core box torch's
intra-op threads only contend (the n = 6 CLI check took 20 s with 2 threads, 3 s with 1)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
