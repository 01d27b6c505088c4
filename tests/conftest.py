import numpy as np
import pytest

import tracejit


@pytest.fixture(autouse=True)
def _seed():
    tracejit.manual_seed(0)
    np.random.seed(0)
    yield
