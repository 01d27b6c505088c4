"""Every op run eagerly in tests/ops also checks its shape/dtype rule: `meta` of the inputs' avals must
equal the eager output's shape and dtype (the tracer and the IR verifier trust `meta`), and that an output
shares no operand's memory unless the op says it may (`Op.may_alias`: the buffer plan trusts it)."""
import numpy as np
import pytest

from tracejit import _dtype as D
from tracejit.ops import registry

SEEN = set()        # names of the ops whose meta was checked against eager in this session


def _aval(a):
    if isinstance(a, np.ndarray):
        return registry.AVal(a.shape, D.from_numpy_dtype(a.dtype))
    return a


def _checked(op, impl):
    def run(*args, **attrs):
        out = impl(*args, **attrs)
        try:
            m = op.meta(*[_aval(a) for a in args], **attrs)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"meta of op {op.name!r} raised {type(e).__name__}: {e} where eager succeeded "
                                 f"(inputs {[_aval(a) for a in args]}, attrs {attrs})") from e
        outs = (out,) if op.nout == 1 else tuple(out)
        ms = (m,) if op.nout == 1 else tuple(m)
        assert len(outs) == len(ms), f"meta of {op.name!r}: {len(ms)} outputs, eager {len(outs)}"
        for k, (o, a) in enumerate(zip(outs, ms)):
            o = np.asarray(o)
            got = (tuple(a.shape), a.dtype)
            want = (tuple(o.shape), D.from_numpy_dtype(o.dtype))
            assert got == want, (f"meta of op {op.name!r} output {k} says {got}, eager gives {want} "
                                 f"(inputs {[_aval(x) for x in args]}, attrs {attrs})")
        if not op.may_alias:         # the buffer plan trusts this (tracejit/passes/buffers.py)
            for k, o in enumerate(outs):
                for j, a in enumerate(args):
                    if isinstance(o, np.ndarray) and isinstance(a, np.ndarray) and np.may_share_memory(o, a):
                        raise AssertionError(f"op {op.name!r}: output {k} shares memory with operand {j}, but "
                                             f"the op does not say so (give it the trait aliases=True)")
        SEEN.add(op.name)
        return out
    run._meta_checked = impl
    return run


@pytest.fixture(scope="module", autouse=True)
def check_meta_against_eager():
    saved = {}
    for op in registry.OPS.values():
        if op.meta is not None and not hasattr(op.impl, "_meta_checked"):
            saved[op] = op.impl
            op.impl = _checked(op, op.impl)
    yield SEEN
    for op, impl in saved.items():
        op.impl = impl
