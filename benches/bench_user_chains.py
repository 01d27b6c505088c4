"""Elementwise programs as users write them, not as a benchmark does: seeded random chains of 10-40 ops that mix
transcendental ops (tanh, sigmoid, exp, log1p) with cheap ones (add, sub, mul, scale, abs, relu, neg, maximum),
reading two full inputs x, y of shape (R, C), a row vector b (C,) and a column vector c (R, 1) (broadcasting),
at a small size (8 x 128 = 1024 floats: per-call cost) and a large one (512 x 2048 = 1M floats: the loop).

Systems: numpy, tracejit traced (numba), torch.compile and jax.jit where they work, each on one thread (like the
rest of `tracejit bench`). Each program's outputs are first checked to agree across systems, then the systems are
timed in interleaved rounds (medians); the speedup column is against numpy. `ns/el/op` in each row's note: the
median divided by elements and ops.

    python benches/bench_user_chains.py [--quick] [--programs N]
"""
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402

SIZES = [(8, 128), (512, 2048)]
PROGRAMS = 4
# (template, ops in it); {a}, {b}: operands, {k}, {k2}: constants
HEAVY = [("L.tanh({a})", 1), ("L.sigmoid({a})", 1), ("L.exp(-L.abs({a}))", 3), ("L.log1p(L.abs({a}))", 2),
         ("L.exp({a} * 0.25)", 2)]
CHEAP = [("L.abs({a})", 1), ("L.relu({a})", 1), ("-{a}", 1), ("{a} * {k}", 1), ("{a} * {k} + {k2}", 2)]
BINARY = [("{a} + {b}", 1), ("{a} * {b}", 1), ("{a} - {b}", 1), ("L.maximum({a}, {b})", 1), ("{a} * {k} + {b}", 2)]


def program(seed):
    """(source of `prog(L, x, y, b, c)`, ops, transcendental ops): a random program of 10-40 ops in which every
    value is used (what is left over is summed into the result, as a user's program would use it), so no system
    gains from dropping dead code."""
    rng = np.random.default_rng(seed)
    target = int(rng.integers(10, 37))
    shape = {"x": (1, 1), "y": (1, 1), "b": (0, 1), "c": (1, 0)}      # (varies along rows, along columns)
    unused, lines, ops, heavy = [], [], 0, 0

    def pick(fresh):
        if unused and rng.random() < fresh:
            return unused.pop(-1 if rng.random() < 0.7 else int(rng.integers(len(unused))))
        pool = list(shape)
        return pool[int(rng.integers(len(pool)))]

    while ops < target:
        u = rng.random()
        table = HEAVY if u < 0.3 else CHEAP if u < 0.6 else BINARY
        t, n = table[int(rng.integers(len(table)))]
        a = pick(0.9)
        b = pick(0.5) if "{b}" in t else None
        k, k2 = round(float(rng.uniform(0.3, 1.2)), 3), round(float(rng.uniform(-0.5, 0.5)), 3)
        name = f"v{len(lines)}"
        lines.append(f"    {name} = " + t.format(a=a, b=b, k=k, k2=k2))
        shape[name] = tuple(p | q for p, q in zip(shape[a], shape[b] if b else (0, 0)))
        unused.append(name)
        ops += n
        heavy += table is HEAVY
    out = " + ".join(unused)
    ops += len(unused) - 1
    if tuple(max(v) for v in zip(*(shape[v] for v in unused))) != (1, 1):
        out += " + x"
        ops += 1
    lines.append(f"    return {out}")
    return "def prog(L, x, y, b, c):\n" + "\n".join(lines) + "\n", ops, heavy


def _compile(src):
    ns = {}
    exec(compile(src, "<user chain>", "exec"), ns)
    return ns["prog"]


def _program(src):
    """The program as `systems` takes it: L (an ops namespace) -> its function of x, y, b, c."""
    prog = _compile(src)
    return lambda L: lambda x, y, b, c: prog(L, x, y, b, c)


NUMPY = types.SimpleNamespace(tanh=np.tanh, sigmoid=lambda v: 1 / (1 + np.exp(-v)), exp=np.exp, log1p=np.log1p,
                              abs=np.abs, relu=lambda v: np.maximum(v, np.float32(0)), maximum=np.maximum)
TRACEJIT = types.SimpleNamespace(tanh=tracejit.tanh, sigmoid=tracejit.sigmoid, exp=tracejit.exp,
                                 log1p=tracejit.log1p, abs=tracejit.abs, relu=tracejit.relu,
                                 maximum=tracejit.maximum)


def inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    r, c = shape
    return [rng.standard_normal(s, dtype=np.float32) for s in ((r, c), (r, c), (c,), (r, 1))]


def find_programs(n):
    """n programs whose outputs stay finite on the inputs (a seed whose chain overflows is skipped)."""
    out, seed = [], 0
    while len(out) < n:
        src, ops, heavy = program(seed)
        with np.errstate(all="ignore"):
            y = _compile(src)(NUMPY, *inputs((8, 128)))
        if np.isfinite(y).all() and np.abs(y).max() < 1e6:
            out.append((seed, src, ops, heavy))
        seed += 1
    return out


def systems(make, arrays, quick, notes):
    """{system: call} of the program `make(L)` (a function of the arrays; L: the ops' namespace, NUMPY, TRACEJIT,
    torch's or jax's) on `arrays`: numpy, tracejit traced, torch.compile and jax.jit where they work (why not:
    in `notes`). Shared with bench_long_chains."""
    out = {"numpy": (lambda f: lambda: f(*arrays))(make(NUMPY))}
    ts = [tracejit.tensor(a) for a in arrays]
    traced = tracejit.trace(make(TRACEJIT), backend="numba")
    out["tracejit traced"] = lambda: traced(*ts)
    if H.wanted("torch") and not H.references()["torch"].startswith("unavailable"):
        if quick:
            notes["torch.compile"] = "skipped in --quick (compiling takes 10-20 s per program here)"
        else:
            import torch
            H.pin_threads()
            Lt = types.SimpleNamespace(tanh=torch.tanh, sigmoid=torch.sigmoid, exp=torch.exp, log1p=torch.log1p,
                                       abs=torch.abs, relu=torch.relu, maximum=torch.maximum)
            tx = [torch.from_numpy(a.copy()) for a in arrays]
            cf, why = H.try_torch_compile(make(Lt), *tx)
            if cf is None:
                notes["torch.compile"] = why
            else:
                out["torch.compile"] = lambda: cf(*tx)
    if H.wanted("jax"):
        jax, why = H.try_jax(threads=H.CONFIG["threads"])
        if jax is None:
            notes["jax.jit"] = why
        else:
            jnp = jax.numpy
            Lj = types.SimpleNamespace(tanh=jnp.tanh, sigmoid=jax.nn.sigmoid, exp=jnp.exp, log1p=jnp.log1p,
                                       abs=jnp.abs, relu=jax.nn.relu, maximum=jnp.maximum)
            jx = [jnp.asarray(a) for a in arrays]
            jf = jax.jit(make(Lj))
            out["jax.jit"] = lambda: jf(*jx).block_until_ready()
    return out


def run(quick=False, programs=None):
    """For `tracejit bench`: every program at every size, checked then timed (interleaved rounds, medians)."""
    H.pin_threads()
    progs = find_programs(programs or (2 if quick else PROGRAMS))
    sizes = SIZES[:1] if quick else SIZES
    repeat, min_sample = (5, 0.01) if quick else (15, 0.05)
    rows = []
    for seed, src, ops, heavy in progs:
        label = f"p{seed}: {ops} ops, {heavy} transcendental"
        for shape in sizes:
            arrays = inputs(shape)
            notes = {}
            fns = systems(_program(src), arrays, quick, notes)
            size = f"{shape[0]}x{shape[1]}"
            H.check_same({k: f() for k, f in fns.items()}, rtol=2e-4, atol=2e-5, label=f"user_chains {label} {size}")
            rs = H.compare(fns, "user_chains", label, size, baseline="numpy", repeat=repeat, min_sample=min_sample,
                           max_time=None if not quick else 5)
            n = shape[0] * shape[1]
            for r in rs:
                r.note = f"{r.median / n / ops * 1e9:.2f} ns/el/op"
            rows += rs
            rows += [H.Result("user_chains", label, k, size, None, note=v) for k, v in notes.items()]
    return rows


def main():
    from tracejit.bench import print_table
    quick = "--quick" in sys.argv
    n = int(sys.argv[sys.argv.index("--programs") + 1]) if "--programs" in sys.argv else None
    rows = run(quick=quick, programs=n)
    print_table(rows)
    print()
    by = {}
    for r in rows:
        if r.median is not None:
            by.setdefault(r.size, {}).setdefault(r.system, []).append(
                r.median / next(x.median for x in rows if x.name == r.name and x.size == r.size
                                and x.system == "tracejit traced"))
    for size, per in by.items():
        print(f"{size}: time / tracejit traced time, geometric mean over programs: " + ", ".join(
            f"{s} {float(np.exp(np.mean(np.log(v)))):.2f}x" for s, v in per.items() if s != "tracejit traced"))
    for seed, src, ops, heavy in find_programs(n or (2 if quick else PROGRAMS)):
        print(f"\n# p{seed}: {ops} ops, {heavy} transcendental\n{src}")


if __name__ == "__main__":
    main()
