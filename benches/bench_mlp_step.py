"""One SGD training step of an MLP 784-512-512-10 (ReLU, cross-entropy), batch 128, float32.

Written with raw tensors and `tracejit.nn.functional` (no nn.Module), the same step in every system:
numpy (forward and backward by hand), tracejit eager, tracejit traced (the default backend, and numba
when it is not the default), torch eager, torch.compile, jax.jit (a pure step: params and batch in, loss and
new params out, through jax.value_and_grad; the params are donated, as the other systems update theirs in
place; one thread like the others). Every system starts from the same parameters; the loss and all updated
parameters of its first step are checked against numpy before timing. torch.compile runs with denormals
flushed to zero (see compiled_step: the repeated steps drive its gradients into denormals). The roof
column is the fraction of single-thread sgemm GFLOP/s (the step is ~0.5 GFLOP of matmuls).

    python benches/bench_mlp_step.py [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402
import tracejit.nn.functional as TF  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 128
LR = 0.01


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    ps = []
    for i, o in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(i)
        ps += [rng.uniform(-bound, bound, (i, o)).astype(np.float32), rng.uniform(-bound, bound, o).astype(np.float32)]
    return ps


def data(seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32), rng.integers(0, SIZES[-1], BATCH)


def flops():
    mm = sum(i * o for i, o in zip(SIZES[:-1], SIZES[1:]))
    return 2 * BATCH * (3 * mm - SIZES[0] * SIZES[1])   # fwd, grad of weights, grad of activations (not of x)


def numpy_step(ps, x, y):
    hs, h = [x], x
    n = len(ps) // 2
    for i in range(n):
        z = h @ ps[2 * i] + ps[2 * i + 1]
        h = np.maximum(z, 0) if i < n - 1 else z
        hs.append(h)
    z = hs[-1]
    zmax = z.max(1, keepdims=True)
    e = np.exp(z - zmax)
    s = e.sum(1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) + zmax[:, 0] - z[np.arange(len(y)), y]))
    dz = e / s
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    for i in reversed(range(n)):
        a = hs[i]
        gw, gb = a.T @ dz, dz.sum(0)
        if i > 0:
            dz = (dz @ ps[2 * i].T) * (a > 0)
        ps[2 * i] -= np.float32(LR) * gw
        ps[2 * i + 1] -= np.float32(LR) * gb
    return np.float32(loss)


def tracejit_step(ps, x, y):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = TF.relu(h @ ps[i] + ps[i + 1])
    loss = TF.cross_entropy(h @ ps[-2] + ps[-1], y)
    loss.backward()
    with tracejit.no_grad():
        for p in ps:
            p -= LR * p.grad
            p.grad = None
    return loss.detach()


def torch_step(torch, ps, x, y):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = torch.relu(h @ ps[i] + ps[i + 1])
    loss = torch.nn.functional.cross_entropy(h @ ps[-2] + ps[-1], y)
    loss.backward()
    with torch.no_grad():
        for p in ps:
            p -= LR * p.grad
            p.grad = None
    return loss.detach()


def jax_step(jax, ps, x, y):
    """(loss, new params) of one SGD step: the function of params and batch that jax.jit compiles."""
    jnp = jax.numpy

    def loss_of(ps):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = jax.nn.relu(h @ ps[i] + ps[i + 1])
        logp = jax.nn.log_softmax(h @ ps[-2] + ps[-1])
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))
    loss, gs = jax.value_and_grad(loss_of)(ps)
    return loss, [p - LR * g for p, g in zip(ps, gs)]


def _backends():
    """Backends for the traced rows: the default, plus numba when it works and is not the default."""
    out = [tracejit.config.default_backend]
    if "numba" not in out:
        try:
            from tracejit.backends import get_backend
            get_backend("numba")
            out.append("numba")
        except Exception:
            pass
    return out


def run(quick=False):
    H.pin_threads()
    p0 = init_params()
    xn, yn = data()
    size = f"{BATCH}x{'-'.join(map(str, SIZES))}"
    systems, firsts, notes = {}, {}, {}

    np_ps = [p.copy() for p in p0]
    firsts["numpy"] = (numpy_step(np_ps, xn, yn), *np_ps)
    systems["numpy"] = lambda: numpy_step(np_ps, xn, yn)

    tx, ty = tracejit.tensor(xn), tracejit.tensor(yn)
    e_ps = [tracejit.tensor(p.copy(), requires_grad=True) for p in p0]
    firsts["tracejit eager"] = (tracejit_step(e_ps, tx, ty), *e_ps)
    systems["tracejit eager"] = lambda: tracejit_step(e_ps, tx, ty)
    for be in _backends():
        t_ps = [tracejit.tensor(p.copy(), requires_grad=True) for p in p0]
        st = tracejit.trace(lambda x, y, t_ps=t_ps: tracejit_step(t_ps, x, y), backend=be)
        name = f"tracejit traced ({be})"
        try:
            firsts[name] = (st(tx, ty), *t_ps)
            systems[name] = lambda st=st: st(tx, ty)
        except Exception as e:
            notes[name] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"

    refs = H.references()
    if H.wanted("torch") and not refs["torch"].startswith("unavailable"):
        import torch
        H.pin_threads()
        px, py = torch.from_numpy(xn), torch.from_numpy(yn)
        q_ps = [torch.tensor(p.copy(), requires_grad=True) for p in p0]
        firsts["torch eager"] = (torch_step(torch, q_ps, px, py), *q_ps)
        systems["torch eager"] = lambda: torch_step(torch, q_ps, px, py)
        if quick:
            notes["torch.compile"] = "skipped in --quick (compiling takes 10-20 s here)"
        else:
            c_ps = [torch.tensor(p.copy(), requires_grad=True) for p in p0]
            ok, why = H.torch_compile_works()
            if ok:
                try:
                    cs = torch.compile(lambda x, y: torch_step(torch, c_ps, x, y), dynamic=False)
                    firsts["torch.compile"] = (cs(px, py), *c_ps)

                    def compiled_step():
                        # hundreds of steps on one batch bring its gradients down to denormal floats, which
                        # slow torch.compile's generated kernels ~10x here (median 10.4 ms, bimodal; alone with
                        # flush-to-zero 3.8 ms): it runs with denormals flushed, its best case (the flag is the
                        # thread's: set around its calls only, the other systems run as they are)
                        torch.set_flush_denormal(True)
                        try:
                            return cs(px, py)
                        finally:
                            torch.set_flush_denormal(False)
                    systems["torch.compile"] = compiled_step
                except Exception as e:
                    notes["torch.compile"] = f"unavailable: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            else:
                notes["torch.compile"] = why
    elif H.wanted("torch"):
        notes["torch"] = refs["torch"]

    if H.wanted("jax"):
        jax, why = H.try_jax(threads=H.CONFIG["threads"])
        if jax is None:
            notes["jax.jit"] = why
        else:
            try:
                jx, jy = jax.numpy.asarray(xn), jax.numpy.asarray(yn)
                js = jax.jit(lambda ps, x, y: jax_step(jax, ps, x, y), donate_argnums=0)
                j_ps = [[jax.numpy.asarray(p) for p in p0]]        # the live params, replaced by every step

                def jax_call():
                    loss, j_ps[0] = jax.block_until_ready(js(j_ps[0], jx, jy))
                    return np.asarray(loss)
                loss = jax_call()
                firsts["jax.jit"] = (loss, *(np.array(p) for p in j_ps[0]))   # copies: the next step donates them
                systems["jax.jit"] = jax_call
            except Exception as e:
                notes["jax.jit"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"

    H.check_same(firsts, rtol=1e-4, atol=1e-5, label="mlp_step (loss and updated parameters)")
    repeat, min_sample = (5, 0.02) if quick else (21, 0.05)
    out = H.compare(systems, "mlp_step", "sgd step", size, baseline="tracejit eager", repeat=repeat,
                    min_sample=min_sample, work={"flops": flops()})
    for k, v in notes.items():
        out.append(H.Result("mlp_step", "sgd step", k, size, None, note=v))
    return out


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
