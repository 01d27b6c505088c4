"""Bad arguments are PyTorch's errors, raised before anything reaches numpy, numba or a kernel, eager and traced
alike; data-dependent errors eager raises are raised by compiled programs too, on every call."""
import numpy as np
import pytest

import tracejit
import tracejit.nn as nn
import tracejit.nn.functional as F
from tracejit.backends.diskcache import KernelCompileError

BAD_OPERANDS = [None, "ab", (1, 2), [1, 2], {"a": 1}, np.ones(2)]


def _traced_mul():
    return tracejit.trace(lambda x, s: x * s, static_argnums=1)


@pytest.mark.parametrize("bad", BAD_OPERANDS, ids=lambda b: type(b).__name__)
def test_non_tensor_operands_are_a_type_error_naming_the_argument(bad):
    a = tracejit.ones(2)
    with pytest.raises(TypeError, match=r"mul\(\): argument 'other' \(position 2\) must be Tensor, not "):
        a * bad
    if not isinstance(bad, np.ndarray):     # (a static argument, baked in: the op in the trace refuses it)
        with pytest.raises(TypeError, match=r"mul\(\): argument 'other' \(position 2\) must be Tensor"):
            _traced_mul()(a, bad)
    with pytest.raises(TypeError, match=r"exp\(\): argument 'input' \(position 1\) must be Tensor"):
        tracejit.exp(bad)


def test_traced_functions_name_an_unusable_argument():
    f = tracejit.trace(lambda x, scale: x * scale)
    with pytest.raises(TypeError, match=r"argument 1 \('scale'\).*numpy.ndarray.*pass a tensor"):
        f(tracejit.ones(2), np.ones(2))
    with pytest.raises(TypeError, match=r"argument 1 \('scale'\).*neither a tensor"):
        f(tracejit.ones(2), {1, 2})          # unhashable, not a container of tensors
    with pytest.raises(TypeError, match=r"argument 0 \('input'\).*numpy.ndarray"):
        tracejit.trace(nn.Linear(3, 4))(np.ones(3, np.float32))
    # scalars still work, as static values (and each one compiles its own program)
    np.testing.assert_array_equal(f(tracejit.ones(2), 3).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(f(tracejit.ones(2), np.float32(2)).numpy(), [2.0, 2.0])


@pytest.mark.parametrize("scalar", [1j, np.complex64(2 + 1j)], ids=["py", "np"])
def test_complex_scalars_raise_clearly_not_as_a_kernel_error(scalar):
    a = tracejit.ones(2)
    for run in (lambda: a * scalar, lambda: tracejit.trace(lambda x: x + scalar)(a)):
        with pytest.raises(RuntimeError, match="ComplexFloat.*no complex dtypes") as info:
            run()
        assert not isinstance(info.value, KernelCompileError)


def test_operand_errors_match_torch_kinds():
    torch = pytest.importorskip("torch")
    for bad in [None, "ab", (1, 2), [1, 2], {"a": 1}]:
        with pytest.raises(TypeError):
            torch.ones(2) * bad
        with pytest.raises(TypeError):
            tracejit.ones(2) * bad
    for lib in (torch, tracejit):
        with pytest.raises(TypeError, match=r"exp\(\): argument 'input' \(position 1\) must be Tensor, not "
                                            r"numpy.ndarray"):
            lib.exp(np.ones(2))
        with pytest.raises(TypeError, match=r"linear\(\): argument 'input' \(position 1\) must be Tensor, not list"):
            lib.nn.Linear(3, 4)([1.0, 2.0, 3.0])
        for size in ("3", 3.5):
            with pytest.raises(TypeError, match="type must be tuple of ints,but got"):
                lib.nn.Linear(size, 4)


def test_one_hot_class_out_of_range_raises_on_every_traced_call():
    f = tracejit.trace(lambda i: F.one_hot(i, 3))
    ok = tracejit.tensor([0, 2, 1])
    np.testing.assert_array_equal(f(ok).numpy(), np.eye(3, dtype=np.int64)[[0, 2, 1]])
    for _ in range(2):               # the compiled program checks, on every call (not only when tracing)
        with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
            f(tracejit.tensor([0, 3, 1]))
        with pytest.raises(RuntimeError, match="Class values must be non-negative"):
            f(tracejit.tensor([0, -1, 1]))
        np.testing.assert_array_equal(f(ok).numpy(), np.eye(3, dtype=np.int64)[[0, 2, 1]])
    assert f.traces == 1
    g = tracejit.trace(lambda i: F.one_hot(i, 3).float() * 2)          # the check feeds a fused consumer too
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        g(tracejit.tensor([5]))


@pytest.mark.parametrize("name,fn,err", [
    ("getitem", lambda x, i: x[i], IndexError),
    ("index_select", lambda x, i: x.index_select(0, i), IndexError),
    ("gather", lambda x, i: x.gather(0, i), RuntimeError),
    ("embedding", lambda x, i: F.embedding(i, x.reshape(3, 1)), IndexError),
])
def test_index_out_of_bounds_raises_on_every_traced_call(name, fn, err):
    f = tracejit.trace(fn)
    x = tracejit.arange(3.0)
    good, bad = tracejit.tensor([0, 2]), tracejit.tensor([0, 5])
    want = fn(x, good).numpy()
    for _ in range(2):
        np.testing.assert_array_equal(f(x, good).numpy(), want)
        with pytest.raises(err, match="out of bounds|index out of range in self") as info:
            f(x, bad)
        assert not isinstance(info.value, KernelCompileError)
    assert f.traces == 1


def test_target_out_of_range_raises_on_every_traced_call():
    f = tracejit.trace(lambda x, y: F.cross_entropy(x, y))
    x = tracejit.zeros(2, 3)
    for _ in range(2):
        np.testing.assert_allclose(float(f(x, tracejit.tensor([0, 2]))), np.log(3), rtol=1e-6)
        for t in ([0, 3], [-2, 0]):
            with pytest.raises(IndexError, match="Target .* is out of bounds"):
                f(x, tracejit.tensor(t))


def test_a_kernel_runtime_error_is_not_called_a_compile_error():
    from numba.core.errors import TypingError
    from tracejit.backends.numba_cpu.executor import _kernel_error
    e = _kernel_error("fused_0", ValueError("bad value in the data"))
    assert type(e) is RuntimeError and "tracejit bug" not in str(e) and "bad value" in str(e)
    e = _kernel_error("fused_0", MemoryError())
    assert type(e) is RuntimeError and "MemoryError" in str(e)
    assert isinstance(_kernel_error("fused_0", TypingError("no")), KernelCompileError)


def test_amax_amin_of_empty_tensors():
    x = tracejit.zeros(0, 3)
    for name in ("amax", "amin"):
        r = getattr(x, name)(1)
        assert tuple(r.shape) == (0,)
        assert tuple(getattr(x, name)(1, keepdim=True).shape) == (0, 1)
        assert tuple(tracejit.trace(lambda t: getattr(t, name)(1))(x).shape) == (0,)
        with pytest.raises(IndexError, match=rf"{name}\(\): Expected reduction dim 0 to have non-zero size"):
            getattr(x, name)(0)
        with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
            getattr(x, name)()
    with pytest.raises(IndexError, match=r"max\(\): Expected reduction dim 0 to have non-zero size"):
        x.max(0)


def test_amax_amin_of_empty_tensors_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, tracejit):
        x = lib.zeros(0, 3)
        assert tuple(x.amax(1).shape) == (0,) and tuple(x.amin((1,), keepdim=True).shape) == (0, 1)
        with pytest.raises(IndexError):
            x.amax(0)
        with pytest.raises(IndexError):
            x.amin((0, 1))
        with pytest.raises(RuntimeError):
            x.amax()


def test_index_select_out_of_range_raises_on_every_traced_call():
    """(getitem wraps a negative index; index_select must not: PyTorch raises for it, eagerly and compiled)"""
    x = tracejit.arange(6.0).reshape(3, 2)
    f = tracejit.trace(lambda x, i: tracejit.index_select(x, 0, i) * 2)
    np.testing.assert_array_equal(f(x, tracejit.tensor([2, 0])).numpy(), [[8.0, 10.0], [0.0, 2.0]])
    for bad in ([0, -1], [0, 3]):
        for _ in range(2):
            with pytest.raises(IndexError, match="index out of range in self"):
                f(x, tracejit.tensor(bad))
            with pytest.raises(IndexError, match="index out of range in self"):
                tracejit.index_select(x, 0, tracejit.tensor(bad))
    assert f.traces == 1
