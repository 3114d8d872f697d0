"""The monitor's tests run torch on one thread (the probes are small; a loaded machine is not slowed)."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield
