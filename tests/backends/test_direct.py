"""direct.py: a generated kernel lowered to LLVM without numba's pipeline, the first tier of a program's kernels
until numba has compiled its own in the background. Each call of a direct kernel here is checked against numba's
kernel on copies of the arguments (every array the same bits: executor._CHECK_DIRECT)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends.numba_cpu import direct, executor
from tracejit.backends.numba_cpu.executor import compile_stats

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture()
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "cache"))     # every kernel new: direct.py lowers it
    monkeypatch.setattr(tj.config, "direct_kernels", True)
    monkeypatch.setattr(executor, "_CHECK_DIRECT", True)
    return tmp_path / "cache"


def _t(a, grad=False):
    return tj.tensor(np.asarray(a), requires_grad=grad)


rng = np.random.default_rng(0)
X = rng.standard_normal((16, 48), dtype=np.float32)
W = rng.standard_normal(48, dtype=np.float32)


def chain(x, w):       # transcendental functions, comparisons, where, broadcasting (loop and nd kernels)
    y = tj.tanh(x * w + 0.5) * tj.sigmoid(x) + tj.exp(-x * x) - tj.log(tj.abs(x) + 1)
    z = tj.where(x > 0, tj.erf(x), tj.nn.functional.gelu(x)) + tj.clamp(w, -0.5, 0.5)
    return (y * z).sum()


def rows(x, w):        # row kernels: softmax, log_softmax, layer_norm, var, max (forward and backward)
    a = tj.softmax(x * w, dim=-1)
    b = tj.nn.functional.log_softmax(x, dim=0)
    c = tj.nn.functional.layer_norm(x, (48,), weight=w, bias=w * 0.5)
    return (a * x).sum() + (b * a).mean() + c.var(dim=1).sum() + x.max(dim=1)[0].sum()


def mixed(x, w):       # float64, integers, bool logic and casts
    i = (x * 10).to(tj.int64)
    m = (i % 3 == 0) | (x > 1)
    d = x.to(tj.float64) * w.to(tj.float64)
    return (d * m.to(tj.float64)).sum().to(tj.float32) + (i * 2 + 1).to(tj.float32).mean() * x.sum()


@pytest.mark.parametrize("fn", [chain, rows, mixed])
def test_direct_kernels_give_numbas_bits_and_eagers_numbers(fresh, fn):
    s0 = compile_stats()
    x, w = _t(X, True), _t(W, True)
    got = tj.trace(fn)(x, w)
    got.backward()
    gx, gw = x.grad.numpy().copy(), w.grad.numpy().copy()
    assert compile_stats()["direct"] > s0["direct"]           # (the tier under test ran)
    x2, w2 = _t(X, True), _t(W, True)
    want = fn(x2, w2)
    want.backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(gx, x2.grad.numpy(), rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(gw, w2.grad.numpy(), rtol=2e-4, atol=1e-5)


def test_a_training_step_of_a_convnet_with_batch_norm(fresh):
    """Conv, BatchNorm (train: running statistics), ReLU, residual add, pooling, SGD with momentum: the losses
    of three traced steps run on direct kernels equal eager's."""
    def model(nn):
        tj.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    xs = rng.standard_normal((6, 3, 8, 8), dtype=np.float32)
    ys = rng.integers(0, 5, 6)
    losses = []
    for traced in (True, False):
        m = model(tj.nn)
        opt = tj.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = tj.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        s = tj.trace(step) if traced else step
        losses.append([float(s(_t(xs), _t(ys))) for _ in range(3)])
        losses.append(m[1].running_var.numpy().copy())
    assert compile_stats()["direct"] > 0
    np.testing.assert_allclose(losses[0], losses[2], rtol=1e-5)
    np.testing.assert_allclose(losses[1], losses[3], rtol=1e-5)


def test_a_kernel_direct_does_not_lower_is_numbas(fresh, monkeypatch):
    def refuse(*a, **k):
        raise direct.Unsupported("test")
    monkeypatch.setattr(direct, "lower_kernel", refuse)
    def f(x, w):        # (kernels no other test lowered in this process: direct.py's are memoized)
        return tj.cos(x * w - 0.25).sum()
    s0 = compile_stats()
    got = tj.trace(f)(_t(X), _t(W))
    s1 = compile_stats()
    assert s1["direct"] == s0["direct"] and s1["compiled"] > s0["compiled"]
    np.testing.assert_allclose(got.numpy(), f(_t(X), _t(W)).numpy(), rtol=2e-5)


SOURCE = """
import numpy as np
C0 = np.float32(0.5)

def kernel(a, b, out, n, kp):
    k0 = np.float32(kp[0])
    s = 0.0
    for i in range(n):
        v = a[i] * k0 + (b[i] if a[i] > C0 else -b[i])
        out[i] = v
        s += v
    for i in range(0, n, 2):
        out[i] = out[i] + np.float32(s)
"""


def _lowered(argtys):
    ns = {}
    exec(SOURCE, ns)
    return direct.lower_kernel(SOURCE, ns, "kernel", argtys), ns["kernel"]


def test_lowered_source_runs_as_numba_runs_it():
    import numba
    from numba.core import types
    f32, f64 = types.Array(types.float32, 1, "C"), types.Array(types.float64, 1, "C")
    k, py = _lowered((f32, f32, f32, types.int64, f64))
    a, b = rng.standard_normal(37, dtype=np.float32), rng.standard_normal(37, dtype=np.float32)
    kp = np.array([1.5])
    out1, out2 = np.zeros(37, np.float32), np.zeros(37, np.float32)
    k(a, b, out1, 37, kp)
    numba.njit(py)(a, b, out2, 37, kp)
    assert np.array_equal(out1.view(np.uint32), out2.view(np.uint32))
    # arguments of other types than it was lowered for: refused before running (the caller runs numba's)
    with pytest.raises(direct.Mismatch):
        k(a.astype(np.float64), b, out1, 37, kp)
    with pytest.raises(direct.Mismatch):
        k(a[::2], b, out1, 18, kp)
    with pytest.raises(direct.Mismatch):
        k(a, b, out1, 37.0, kp)


@pytest.mark.parametrize("src, why", [
    ("def kernel(a):\n    while a[0] > 0:\n        a[0] -= 1\n", "While"),
    ("def kernel(a):\n    for x in a:\n        pass\n", "range"),
    ("def kernel(a):\n    x = 1\n    x = a\n", "changes type"),
    ("def kernel(a):\n    a[0] = undefined_name\n", "unknown name"),
])
def test_what_it_does_not_lower_is_refused(src, why):
    from numba.core import types
    with pytest.raises(direct.Unsupported, match=why):
        direct.lower_kernel(src, {}, "kernel", (types.Array(types.float32, 1, "C"),))


def test_helpers_lower_in_parallel_and_the_next_process_loads_them(tmp_path):
    """The first process lowers the kernels (its forked helper a share, left in the cache folder); the next one
    lowers and compiles nothing: it loads them (or numba's kernels, once its background helper wrote them)."""
    script = textwrap.dedent("""
        import json, numpy as np, tracejit as tj
        from tracejit.backends.numba_cpu.executor import compile_stats
        def f(x, w):
            return (tj.softmax(tj.tanh(x) * w, dim=-1) * x).sum() + tj.relu(x - w).mean()
        x = tj.tensor(np.linspace(-2, 2, 64 * 32, dtype=np.float32).reshape(64, 32), requires_grad=True)
        w = tj.tensor(np.linspace(0, 1, 32, dtype=np.float32), requires_grad=True)
        loss = tj.trace(f)(x, w)
        loss.backward()
        print(json.dumps(dict(compile_stats(), loss=float(loss), g=float(x.grad.numpy().sum()))))
    """)
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT, TRACEJIT_COMPILE_WORKERS="1",
               TRACEJIT_DIRECT_KERNELS="1")
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True, cwd=ROOT, timeout=600).stdout.strip().splitlines()[-1])
            for _ in range(2)]
    first, second = runs
    assert first["direct"] >= 2 and first["compiled"] == 0, first
    assert any(f.endswith(".bin") for _, _, fs in os.walk(tmp_path) for f in fs)
    assert second["direct"] == 0 and second["compiled"] == 0, second
    assert second["direct_loaded"] + second["loaded"] >= first["direct"], second
    assert (first["loss"], first["g"]) == (second["loss"], second["g"])


def test_a_damaged_or_foreign_direct_file_is_lowered_again(tmp_path):
    from numba.core import types
    f32, f64 = types.Array(types.float32, 1, "C"), types.Array(types.float64, 1, "C")
    argtys = (f32, f32, f32, types.int64, f64)
    k, _ = _lowered(argtys)
    key = k.entry.rsplit("_", 1)[1]
    path = str(tmp_path / f"tj_direct_{key}.bin")
    direct.save(k, path)
    assert direct.load(path, key, argtys).entry == k.entry
    assert direct.load(path, "0" * 24, argtys) is None                  # another kernel's file under this name
    assert direct.load(path, key, argtys[:-1] + (f32,)) is None         # other argument types
    blob = open(path, "rb").read()
    for bad in (blob[:len(blob) // 2], b"", os.urandom(len(blob)), blob[:40] + b"x" + blob[41:]):
        open(path, "wb").write(bad)
        assert direct.load(path, key, argtys) is None
