"""`tracejit precompile` (tracejit/backends/numba_cpu/precompile.py): after it, real training steps compile no
library kernel, traced or eager. Both run in new processes with empty numba and tracejit caches of their own."""
import json
import os
import subprocess
import sys

from tracejit.backends.numba_cpu import precompile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# programs other than precompile's own tasks: the examples' ResNet and nanoGPT models, the CNN bench's model with
# Adam, an LSTM (numba's threads: the machine's cores, so a convolution's prange variants are reached where there are
# two or more); every library dispatcher numba compiles meanwhile, or leaves to a background helper, is reported
PROGRAMS = r'''
import json, sys
sys.path[:0] = [sys.argv[1] + "/examples", sys.argv[1] + "/benches"]
from numba.core import event
compiled = []

class Listener(event.Listener):
    def on_start(self, e):
        pass

    def on_end(self, e):
        d = e.data["dispatcher"]
        if d.py_func.__module__.startswith("tracejit.") and d._cache.__class__.__name__ != "NullCache":
            compiled.append([d.py_func.__module__, d.py_func.__qualname__, str(e.data["args"])])

event.register("numba:compile", Listener())
import tracejit
from tracejit.backends.numba_cpu import workers
compile_later = workers.compile_later

def spy(jobs):       # a library kernel's prange variant left to a background helper: not precompiled either
    for d, _ in jobs:
        if d.py_func.__module__.startswith("tracejit.") and workers._needs_compiling(d):
            compiled.append([d.py_func.__module__, d.py_func.__qualname__, "left to a background helper"])
    return compile_later(jobs)

workers.compile_later = spy
from bench_cnn_step import make_model
from gpt_model import GPTConfig, define
from train_resnet import make_resnet
nn, F = tracejit.nn, tracejit.nn.functional

def train(model, opt_cls, batch, loss_fn):
    opt = opt_cls(model.parameters(), lr=1e-3)
    def step(*batch):
        opt.zero_grad()
        loss = loss_fn(model, *batch)
        loss.backward()
        opt.step()
        return loss.detach()
    for f in (step, tracejit.trace(step)):
        f(*batch); f(*batch)

ce = lambda m, x, y: F.cross_entropy(m(x), y)
train(make_resnet(nn, classes=10), tracejit.optim.SGD, (tracejit.randn(8, 3, 16, 16), tracejit.randint(0, 10, (8,))), ce)
train(make_model(tracejit), tracejit.optim.Adam, (tracejit.randn(8, 1, 16, 16), tracejit.randint(0, 10, (8,))), ce)
gpt = define(tracejit)(GPTConfig(vocab_size=65, block_size=16, n_layer=1, n_head=2, n_embd=32))
train(gpt, tracejit.optim.AdamW, (tracejit.randint(0, 65, (2, 16)), tracejit.randint(0, 65, (2, 16))),
      lambda m, x, y: m(x, y)[1])
lstm = nn.LSTM(8, 16, batch_first=True)
train(lstm, tracejit.optim.SGD, (tracejit.randn(4, 5, 8),), lambda m, x: m(x)[0].tanh().sum())
print("COMPILED", json.dumps(compiled))
'''


def test_after_precompile_training_steps_compile_no_library_kernel(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), TRACEJIT_CACHE_DIR=str(tmp_path / "tj"))
    pre = subprocess.run([sys.executable, "-m", "tracejit", "precompile", "--workers", "2"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=500)
    assert pre.returncode == 0, pre.stdout + pre.stderr
    n = len(precompile.TASKS)
    assert f"precompiled {n} of {n} tasks" in pre.stdout, pre.stdout
    run = subprocess.run([sys.executable, "-c", PROGRAMS, ROOT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=500)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    compiled = json.loads(run.stdout.split("COMPILED", 1)[1])
    assert compiled == [], "library kernels the precompile tasks missed:\n" + "\n".join(map(str, compiled))

