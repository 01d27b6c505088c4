import pytest

import tracejit


@pytest.fixture(autouse=True)
def _verify_ir():
    prev = tracejit.config.verify_ir
    tracejit.config.verify_ir = True
    yield
    tracejit.config.verify_ir = prev


def _backends():
    out = ["interpreter"]
    try:
        from tracejit.backends import get_backend
        get_backend("numba")
        out.append("numba")
    except Exception:
        pass
    return out


@pytest.fixture(params=_backends())
def backend(request):
    return request.param
