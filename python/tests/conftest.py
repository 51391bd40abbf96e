import zlib

import numpy as np
import pytest

import arbiter


@pytest.fixture(scope="session")
def ctx():
    with arbiter.Context() as context:
        yield context


@pytest.fixture
def rng(request):
    # A seed per test, the same in every run (str hashes are salted per process).
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
