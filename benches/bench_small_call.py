"""Per-call overhead on small tensors: a chain of 30 elementwise ops on 1024 float32 elements.

The chain is 10 rounds of `x = u(x * 0.75 + 0.125)`, u cycling through tanh, relu, abs, neg, square: 30 ops,
two of them transcendental. At 1024 elements the arithmetic is a few microseconds, so what is measured is
mostly what a call costs besides it: signature and guard checks, dispatch, output wrapping, autograd.

Workloads (each a separate row group):
- forward: `chain(x)`, x without grad.
- grad inside: a function returning `autograd.grad(chain(x).sum(), x)`. Traced, the forward and the
  derived backward are one program (one compiled call). torch.compile: `torch.func.grad` compiled.
- y.sum().backward(): `y = f(x); y.sum().backward()` with f traced (tracejit: a forward program, then the
  eager engine runs sum's backward and CompiledFunctionBackward, the compiled backward program;
  torch.compile: the AOT-autograd backward).

Systems: numpy (forward only), tracejit eager, tracejit traced (numba), torch eager, torch.compile, and jax.jit
where they work: `jax.jit(f)` forward and `jax.jit(jax.grad(lambda x: f(x).sum()))` as a grad inside (jax has no
y.sum().backward()); its CPU client is pinned to one thread like OpenBLAS, numba and torch. Every system's result
(the output, or the gradient) is checked against the same reference before anything is timed; rounds are
interleaved; medians. Targets (issue 4): traced under 10 us forward and under
20 us with backward.

    python benches/bench_small_call.py [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402

N = 1024
ROUNDS = 10
SCALE, SHIFT = 0.75, 0.125


def _unary(lib):
    return [lib.tanh, lib.relu, lib.abs, lib.neg, lambda v: v * v]


def make_chain(lib):
    """The 30-op chain written with `lib` (tracejit or torch)."""
    us = _unary(lib)

    def chain(x):
        for i in range(ROUNDS):
            x = us[i % 5](x * SCALE + SHIFT)
        return x
    return chain


def np_chain(x):
    us = [np.tanh, lambda v: np.maximum(v, np.float32(0)), np.abs, np.negative, lambda v: v * v]
    s, b = np.float32(SCALE), np.float32(SHIFT)
    for i in range(ROUNDS):
        x = us[i % 5](x * s + b)
    return x


def _inputs():
    return np.random.default_rng(0).standard_normal(N, dtype=np.float32)


def _workloads(lib, xg):
    """The chain, its gradient inside one function, and `f(xg).sum().backward()` for a given f, in `lib`."""
    chain = make_chain(lib)

    def grad_of_sum(x):
        (g,) = lib.autograd.grad(chain(x).sum(), x)
        return g

    def backward_outer(f):
        def call():
            xg.grad = None
            f(xg).sum().backward()
            return xg.grad
        return call
    return chain, grad_of_sum, backward_outer


def tracejit_systems(a):
    """{workload: {system: callable}} for tracejit eager and traced."""
    x = tracejit.tensor(a)
    xg = tracejit.tensor(a, requires_grad=True)
    chain, grad_of_sum, backward_outer = _workloads(tracejit, xg)

    fwd = tracejit.trace(chain, backend="numba")
    inner = tracejit.trace(grad_of_sum, backend="numba")
    outer = tracejit.trace(chain, backend="numba")
    return {
        "forward": {"tracejit eager": lambda: chain(x), "tracejit traced": lambda: fwd(x)},
        "grad inside": {"tracejit eager": lambda: grad_of_sum(xg), "tracejit traced": lambda: inner(xg)},
        "y.sum().backward()": {"tracejit eager": backward_outer(chain), "tracejit traced": backward_outer(outer)},
    }


def torch_systems(a, quick, notes):
    refs = H.references()
    if not H.wanted("torch"):
        return {}
    if refs["torch"].startswith("unavailable"):
        notes["torch"] = refs["torch"]
        return {}
    import torch
    H.pin_threads()
    x = torch.from_numpy(a.copy())
    xg = torch.from_numpy(a.copy()).requires_grad_()
    chain, grad_of_sum, backward_outer = _workloads(torch, xg)

    out = {"forward": {"torch eager": lambda: chain(x)},
           "grad inside": {"torch eager": lambda: grad_of_sum(xg)},
           "y.sum().backward()": {"torch eager": backward_outer(chain)}}
    if quick:
        notes["torch.compile"] = "skipped in --quick (compiling takes 10-20 s per function here)"
        return out
    cf, why = H.try_torch_compile(chain, x)
    if cf is None:
        notes["torch.compile"] = why
        return out
    out["forward"]["torch.compile"] = lambda: cf(x)
    cg, why = H.try_torch_compile(torch.func.grad(lambda v: chain(v).sum()), x)
    if cg is not None:
        out["grad inside"]["torch.compile"] = lambda: cg(x)
    else:
        notes["torch.compile (grad inside)"] = why
    cb, why = H.try_torch_compile(chain, xg)
    if cb is not None:
        out["y.sum().backward()"]["torch.compile"] = backward_outer(cb)
    else:
        notes["torch.compile (backward)"] = why
    return out


def jax_systems(a, notes):
    """{workload: {system: callable}} for jax.jit (forward and grad inside), one thread like the others."""
    if not H.wanted("jax"):
        return {}
    jax, why = H.try_jax(threads=H.CONFIG["threads"])
    if jax is None:
        notes["jax"] = why
        return {}
    import types
    jnp = jax.numpy
    chain = make_chain(types.SimpleNamespace(tanh=jnp.tanh, relu=jax.nn.relu, abs=jnp.abs, neg=jnp.negative))
    x = jnp.asarray(a)
    fwd = jax.jit(chain)
    grad = jax.jit(jax.grad(lambda v: chain(v).sum()))
    return {"forward": {"jax.jit": lambda: np.asarray(fwd(x).block_until_ready())},
            "grad inside": {"jax.jit": lambda: np.asarray(grad(x).block_until_ready())}}


def run(quick=False):
    """For `tracejit bench`: the three workloads, each checked then timed (interleaved rounds, medians)."""
    H.pin_threads()
    a = _inputs()
    notes = {}
    work = tracejit_systems(a)
    work["forward"] = {"numpy": lambda: np_chain(a), **work["forward"]}
    for name, fns in [*torch_systems(a, quick, notes).items(), *jax_systems(a, notes).items()]:
        work[name].update(fns)
    out = []
    repeat, min_sample = (5, 0.01) if quick else (21, 0.05)
    for name, fns in work.items():
        # reference: torch eager where present (it is PyTorch's semantics tracejit follows), else tracejit eager
        ref = "torch eager" if "torch eager" in fns else "tracejit eager"
        H.check_same({k: f() for k, f in fns.items()}, rtol=1e-4, atol=1e-5, reference=ref,
                     label=f"small_call {name}")
        out += H.compare(fns, "small_call", name, f"{N}", baseline="tracejit eager", repeat=repeat,
                         min_sample=min_sample)
    for k, v in notes.items():
        out.append(H.Result("small_call", "-", k, f"{N}", None, note=v))
    return out


def main():
    from tracejit.bench import print_table
    rows = run(quick="--quick" in sys.argv)
    print_table(rows)
    print()
    by = {}
    for r in rows:
        if r.median is not None:
            by.setdefault(r.name, {})[r.system] = r.median
    for name, meds in by.items():
        t = meds.get("tracejit traced")
        if t:
            print(f"{name}: tracejit traced {t * 1e6:.1f} us; " + ", ".join(
                f"{k} {v / t:.2f}x" for k, v in meds.items() if k != "tracejit traced") + " (time / traced time)")


if __name__ == "__main__":
    main()
