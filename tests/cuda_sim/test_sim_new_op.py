"""A new elementwise op with a scalar template is one registry entry: it runs on cuda eagerly and traced with no
CUDA-side code (the CUDA code generator inlines its template as the CPU one does)."""
import numpy as np
import pytest

import tracejit as torch
from tracejit.ops.elementwise import pointwise
from tracejit.ops.registry import OPS, apply

from simutil import close


@pytest.fixture
def cube():
    op = pointwise("cube_for_sim_test", lambda x: x * x * x, lambda c, g: (3 * g * c.inputs[0] * c.inputs[0],),
                   "({0} * {0} * {0})", "promote", "i")
    yield lambda x: apply(op, x)
    del OPS["cube_for_sim_test"]


def test_new_elementwise_op_eager_and_traced_on_cuda(cube):
    x = torch.tensor(np.linspace(-2, 2, 6, dtype=np.float32))
    close(cube(x.cuda()), cube(x))

    @torch.trace
    def f(a):
        return torch.exp(cube(a) * 0.5)

    close(f(x.cuda()), torch.exp(cube(x) * 0.5))
    assert "cube_for_sim_test" in f.graph(x.cuda()).entry.fwd_fn.source()
