"""Equilibria tests run single-threaded: the maps are tiny, and on a shared 2-core box torch's
intra-op threads only contend (the n = 6 CLI check took 20 s with 2 threads, 3 s with 1)."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield
