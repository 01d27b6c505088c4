"""`tracejit precompile`: the library's numba kernels compiled for this machine into numba's disk cache, at once.

The hand-written kernels (tracejit/kernels/cpu: convolutions, pooling, norms, optimizers, the scalar math that
generated kernels call) are numba functions with `cache=True`: each compiles at its first call in a new
installation (or on another CPU) and loads from numba's cache afterwards. Their first compilation is long: ~30 s
of one core for the ResNet bench's step (the direct convolutions' register tiles 12 s of it), the first call of
that step ~25 s instead of ~4. This runs, once, small calls that reach every one of them with the types programs
pass them, spread over forked processes (one per core, each taking the next task when free, the longest
first), so that later processes only load them. A program's own generated kernels are not compiled here: they
depend on the program (see workers.py for how its first call compiles them in parallel).

    tracejit precompile [--workers N]

What it covers is checked by tests/backends/test_precompile.py: after it, a ResNet-style and a transformer
training step, traced and eager, compile no library kernel.
"""
import os
import sys
import time

import numpy as np


def _conv_direct_forward():
    from tracejit.kernels.cpu import convtile
    convtile.forward(_rand(2, 16, 16, 16), _rand(16, 16, 3, 3), _rand(16), (2, 2), (1, 1), (1, 1))


def _conv_winograd():
    """A 3x3 stride-1 convolution's forward and input gradient (one kernel, `_wino`), and its weight gradient."""
    from tracejit.kernels.cpu import convtile
    convtile.forward(_rand(2, 16, 16, 16), _rand(16, 16, 3, 3), _rand(16), (1, 1), (1, 1), (1, 1))
    convtile.weight_grad(_rand(2, 16, 16, 16), _rand(2, 16, 16, 16), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1))


def _conv_direct_weight_grad():
    from tracejit.kernels.cpu import convtile
    convtile.weight_grad(_rand(2, 16, 16, 16), _rand(2, 16, 8, 8), (16, 16, 3, 3), (2, 2), (1, 1), (1, 1))


def _conv_direct_input_grad():
    from tracejit.kernels.cpu import convtile
    convtile.input_grad(_rand(2, 16, 8, 8), _rand(16, 16, 3, 3), (2, 16, 16, 16), (2, 2), (1, 1), (1, 1))
    convtile.input_grad(_rand(2, 16, 15, 16), _rand(16, 16, 3, 3), (2, 16, 15, 16), (1, 1), (1, 1), (1, 1))


def _conv_prange(task):
    """A direct convolution kernel's prange variant (used where numba runs several threads; else compiled in the
    background at first use): the task run with the variants taken, on two threads."""
    from tracejit.kernels.cpu import convtile
    saved = convtile._threads, convtile._ready_variant
    convtile._threads = lambda macs: 2
    convtile._ready_variant = lambda name, args: convtile.parallel_variant(name)
    try:
        task()
    finally:        # (a worker process runs other tasks after this one)
        convtile._threads, convtile._ready_variant = saved


def _conv_columns():
    """conv.py's im2col / col2im paths (1x1 and grouped convolutions, float64, shapes the tiles do not take)."""
    import tracejit
    F = tracejit.nn.functional
    for dt in (tracejit.float32, tracejit.float64):
        x = tracejit.randn(2, 4, 9, 9, dtype=dt, requires_grad=True)
        for w, kw in ((tracejit.randn(6, 4, 1, 1, dtype=dt, requires_grad=True), dict(stride=2)),
                      (tracejit.randn(6, 4, 3, 3, dtype=dt, requires_grad=True), dict(padding=1)),
                      (tracejit.randn(4, 1, 3, 3, dtype=dt, requires_grad=True), dict(padding=1, groups=4))):
            F.conv2d(x, w, **kw).sum().backward()


def _convnet(traced):
    import tracejit
    nn = tracejit.nn

    class Block(nn.Module):
        def __init__(self, c, o, s):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, o, 3, s, 1, bias=False), nn.BatchNorm2d(o)
            self.c2, self.b2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o)
            self.down = nn.Sequential(nn.Conv2d(c, o, 1, s, bias=False), nn.BatchNorm2d(o)) if s != 1 else None

        def forward(self, x):
            y = self.b2(self.c2(tracejit.relu(self.b1(self.c1(x)))))
            return tracejit.relu(y + (x if self.down is None else self.down(x)))

    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          Block(16, 16, 1), Block(16, 32, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10))
    _train(tracejit, tracejit.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), traced,
           lambda x, y: tracejit.nn.functional.cross_entropy(model(x), y),
           tracejit.randn(4, 3, 32, 32), tracejit.randint(0, 10, (4,)))


def _transformer(traced):
    import tracejit
    nn = tracejit.nn
    emb, layer, head = nn.Embedding(50, 32), nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True,
                                                                        activation="gelu"), nn.Linear(32, 50)
    norm = nn.LayerNorm(32)
    params = [*emb.parameters(), *layer.parameters(), *head.parameters(), *norm.parameters()]
    mask = nn.Transformer.generate_square_subsequent_mask(8)
    _train(tracejit, tracejit.optim.AdamW(params, lr=1e-3), traced,
           lambda x, y: nn.functional.cross_entropy(head(norm(layer(emb(x), src_mask=mask))).reshape(-1, 50),
                                                    y.reshape(-1)),
           tracejit.randint(0, 50, (2, 8)), tracejit.randint(0, 50, (2, 8)))


def _shared_products():
    """The products shared among the threads (blas.py's stack of them, attention's q @ k^T, and the rows of one;
    convgemm.py's per-image products), float32 and float64."""
    from tracejit.kernels.cpu import blas, convgemm
    for dt in (np.float32, np.float64):
        cols, w = np.ones((2, 2, 3, 3), dt), np.ones((4, 2), dt)
        convgemm.forward_images_par(blas.gemm_address(dt), dt(1), dt(0), cols, w, 1, np.zeros(0, dt),
                                    np.empty((2, 4, 3, 3), dt))
        for kmajor in (True, False):
            convgemm.weight_grad_images_par(blas.gemm_address(dt), dt(1), dt(0), cols, np.ones((2, 4, 3, 3), dt), 1,
                                            kmajor, np.empty((2, 1, 2, 4) if kmajor else (2, 1, 4, 2), dt))
        a, b = np.ones((2, 3, 4), dt), np.ones((2, 4, 5), dt)
        c = np.empty((2, 3, 5), dt)
        blas._STACK(blas.gemm_address(dt), 0, 0, 3, 5, 4, a.ctypes.data, np.array(a.strides[:1]), 4, b.ctypes.data,
                    np.array(b.strides[:1]), 5, c.ctypes.data, c.itemsize, np.array(a.shape[:1]), dt(1), dt(0))
        for kern in (blas._SPLIT, blas._SPLIT_SERIAL):
            kern(blas.gemm_address(dt), 0, 0, 3, 5, 4, a.ctypes.data, 4, b.ctypes.data, 5, c.ctypes.data, c.itemsize,
                 2, dt(1), dt(0))


def _rows():
    """The row kernels of softmax, log_softmax and layer norm, forward and backward, eager (float32 and float64)."""
    import tracejit
    F = tracejit.nn.functional
    for dt in (tracejit.float32, tracejit.float64):
        x = tracejit.randn(2, 3, 8, dtype=dt, requires_grad=True)
        w, b = tracejit.ones(8, dtype=dt, requires_grad=True), tracejit.zeros(8, dtype=dt, requires_grad=True)
        (F.softmax(x, -1) * F.log_softmax(x, -1) * F.layer_norm(x, (8,), w, b)).sum().backward()


def _train(tracejit, opt, traced, loss_fn, *batch):
    def step(*batch):
        opt.zero_grad()
        loss = loss_fn(*batch)
        loss.backward()
        opt.step()
        return loss.detach()
    step = tracejit.trace(step) if traced else step
    for _ in range(2):
        step(*batch)


def _scalar_math(dtype):
    """The per-dtype scalar functions generated kernels call (tracejit/backends/numba_cpu/rt.py's TYPED)."""
    import inspect
    from numba import types
    from tracejit.backends.numba_cpu import rt
    t = {"_f32": types.float32, "_f64": types.float64}[dtype]
    for name, disp in rt.TYPED.items():
        if name.endswith(dtype):
            disp.compile((t,) * len(inspect.signature(disp.py_func).parameters))


def numba_threads():
    from numba import config
    return config.NUMBA_NUM_THREADS


def _rand(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# (name, task), the longest first (seconds of one core on an AMD EPYC, znver4, measured with nothing cached; the
# prange variants 7-21 s each)
TASKS = [
    ("direct convolution: weight gradient", _conv_direct_weight_grad),        # ~6 s
    ("direct convolution: forward", _conv_direct_forward),                     # ~5
    ("direct convolution: input gradient", _conv_direct_input_grad),           # ~2.5 + ~8 (stride 1)
    ("Winograd convolution", _conv_winograd),
    ("convolution by columns, float32 and float64", _conv_columns),
    ("a ResNet-style step, traced", lambda: _convnet(True)),
    ("a transformer step, traced", lambda: _transformer(True)),
    ("a ResNet-style step, eager", lambda: _convnet(False)),
    ("a transformer step, eager", lambda: _transformer(False)),
    ("softmax, log_softmax, layer norm rows", _rows),
    ("scalar math, float32", lambda: _scalar_math("_f32")),
    ("scalar math, float64", lambda: _scalar_math("_f64")),
]


if numba_threads() > 1:
    TASKS[:0] = [(name + ", prange variant", lambda task=task: _conv_prange(task)) for name, task in TASKS[:4]]
    TASKS.insert(3, ("matrix products shared among the threads", _shared_products))


def default_workers():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run(workers=None, out=sys.stdout):
    """Run every task, in `workers` forked processes (default: one per core; 1, or not on Linux: in this process).
    Returns the number of tasks that failed (each is reported; a failure leaves its kernels to compile at their
    first use)."""
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers={workers}: expected at least 1 process")
    started = time.perf_counter()
    if workers == 1 or not sys.platform.startswith("linux"):    # (fork elsewhere: see workers.max_helpers)
        results = (_one(i) for i in range(len(TASKS)))
        pool = None
    else:
        import multiprocessing
        pool = multiprocessing.get_context("fork").Pool(min(workers, len(TASKS)), maxtasksperchild=None)
        results = pool.imap_unordered(_one, range(len(TASKS)))
    failed = 0
    try:
        for i, seconds, err in results:
            failed += err is not None
            print(f"  {seconds:6.1f} s  {TASKS[i][0]}" + (f": FAILED: {err}" if err else ""), file=out, flush=True)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    procs = 1 if pool is None else min(workers, len(TASKS))
    print(f"precompiled {len(TASKS) - failed} of {len(TASKS)} tasks in {time.perf_counter() - started:.1f} s "
          f"({procs} process{'es' if procs > 1 else ''})", file=out)
    return failed


def _one(i):
    import warnings
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TASKS[i][1]()
        err = None
    except Exception as e:          # (reported: one failing task must not stop the others)
        err = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    return i, time.perf_counter() - t, err
