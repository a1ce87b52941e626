"""The per-test random stream of the torch extension tests (helpers: support.py)."""
import numpy as np
import pytest

from oracle import SEED


@pytest.fixture
def rng(request):
    # One stream per test, so a failing test reproduces alone with B12X_SEED.
    return np.random.default_rng([SEED, sum(map(ord, request.node.name))])
