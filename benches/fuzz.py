"""Differential fuzzer: random programs run eagerly and traced (compiled), values and gradients compared; a failing
program is shrunk to a minimal reproducer printed as Python.

Programs mix: pointwise ops with broadcasting, integer ops (floor division, remainder, bitwise, comparisons,
casts), reductions over every dim (one, several, all; keepdim; argmax), views (transpose, permute, slices with
steps, select, narrow, unsqueeze, expand, t), in-place ops on views (of detached copies only: views of values that
require grad are not updated in place here), contiguous/view/reshape after layout changes, indexing (index
tensors, index_select, gather, where) and matmul (batched, transposed).

    python benches/fuzz.py --n 5000                 # long run (README); --seed S to start elsewhere
    python benches/fuzz.py --n 200 --backend numba  # what CI runs a slice of (tests/tracing/test_fuzz.py)
"""
import argparse
import re
import sys
import time
import traceback

import numpy as np

HEADER = "import numpy as np\nimport tracejit as torch\nimport tracejit.nn.functional as F\n"

UNARY = ["torch.tanh({0})", "torch.sigmoid({0})", "torch.relu({0})", "torch.exp(-({0}).abs())", "({0}).sin()",
         "F.gelu({0})", "({0}) * ({0})", "torch.log1p(({0}).abs())", "({0}).clamp(-0.5, 0.5)", "F.softplus({0})",
         "torch.where(({0}) > 0, {0}, 0.1 * ({0}))", "({0}).abs().sqrt()", "-({0})", "({0}).floor()"]
BINARY = ["{0} + {1}", "{0} * {1}", "{0} - {1}", "torch.maximum({0}, {1})", "{0} / (1.5 + ({1}).abs())",
          "torch.where({0} > {1}, {0}, {1})"]
INT_BINARY = ["{0} + {1}", "{0} * {1}", "{0} - {1}", "torch.div({0}, ({1}).abs() + 1, rounding_mode='floor')",
              "torch.remainder({0}, ({1}).abs() + 1)", "{0} & {1}", "{0} | {1}", "torch.maximum({0}, {1})",
              "torch.where({0} > {1}, {0}, {1})"]
REDUCE = ["sum", "mean", "amax", "amin", "logsumexp", "var", "std", "prod"]


class Stmt:
    __slots__ = ("name", "expr", "shape", "dtype", "pre")

    def __init__(self, name, expr, shape, dtype, pre=()):
        self.name, self.expr, self.shape, self.dtype, self.pre = name, expr, tuple(shape), dtype, tuple(pre)

    def lines(self):
        return list(self.pre) + [f"{self.name} = {self.expr}"]


class Program:
    """A straight-line program over named values; `float` values are float64 (the oracle compares closely)."""

    def __init__(self, seed, n_ops=10):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.inputs = []        # (name, shape, dtype)
        self.stmts = []
        self.types = {}         # name -> (shape, dtype)
        self.out = None
        self._build(n_ops)

    # ------------------------------------------------------------------ building
    def _new(self, shape, dtype):
        name = f"v{len(self.types)}"
        self.types[name] = (tuple(int(s) for s in shape), dtype)
        return name

    def _emit(self, expr, shape, dtype, pre=()):
        name = self._new(shape, dtype)
        self.stmts.append(Stmt(name, expr.replace("@@", name), shape, dtype, [p.replace("@@", name) for p in pre]))
        return name

    def _pick(self, dtype=None, min_ndim=0):
        names = [n for n, (s, d) in self.types.items() if (dtype is None or d == dtype) and len(s) >= min_ndim]
        return str(self.rng.choice(names)) if names else None

    def _build(self, n_ops):
        r = self.rng
        base = tuple(int(s) for s in r.integers(2, 5, size=int(r.integers(1, 4))))
        for i in range(3):
            shape = tuple(s if r.random() < 0.7 else 1 for s in base)[int(r.integers(0, len(base))):]
            self.inputs.append((self._new(shape, "float"), shape, "float"))
        if r.random() < 0.5:
            shape = base[int(r.integers(0, len(base))):]
            self.inputs.append((self._new(shape, "int"), shape, "int"))
        kinds = ["unary", "binary", "int", "reduce", "view", "inplace_view", "layout", "index", "matmul"]
        p = np.array([0.14, 0.14, 0.1, 0.14, 0.12, 0.08, 0.1, 0.09, 0.09])
        for _ in range(n_ops):
            getattr(self, "_" + str(r.choice(kinds, p=p / p.sum())))()
        floats = [n for n, (s, d) in self.types.items() if d == "float"]
        ints = [n for n, (s, d) in self.types.items() if d == "int"]
        outs = floats[-2:]
        ret = " + ".join(f"({o}).sum()" for o in outs)
        if ints and r.random() < 0.5:
            ret += f" + ({ints[-1]}).sum().double() * 0.01"
        self.out = ret

    def _unary(self):
        a = self._pick("float")
        self._emit(str(self.rng.choice(UNARY)).format(a), self.types[a][0], "float")

    def _binary(self):
        a, b = self._pick("float"), self._pick("float")
        try:
            shape = np.broadcast_shapes(self.types[a][0], self.types[b][0])
        except ValueError:
            return
        self._emit(str(self.rng.choice(BINARY)).format(a, b), shape, "float")

    def _int(self):
        r = self.rng
        a = self._pick("int")
        if a is None or r.random() < 0.3:          # make one from a float: a cast of a scaled value
            f = self._pick("float")
            self._emit(f"(({f}) * 3).floor().long()", self.types[f][0], "int")
            return
        b = self._pick("int")
        if r.random() < 0.25:
            self._emit(f"({a}).double() * 0.5", self.types[a][0], "float")
            return
        try:
            shape = np.broadcast_shapes(self.types[a][0], self.types[b][0])
        except ValueError:
            return
        self._emit(str(r.choice(INT_BINARY)).format(a, b), shape, "int")

    def _reduce(self):
        r = self.rng
        a = self._pick("float", 1)
        if a is None:
            return
        sa = self.types[a][0]
        nd = len(sa)
        how = r.random()
        fn = str(r.choice(REDUCE))
        if how < 0.15:                                  # everything
            self._emit(f"({a}).{fn}()" if fn not in ("var", "std") else f"({a}).{fn}(unbiased=False)", (), "float")
            return
        if how < 0.3 and nd >= 2 and fn in ("sum", "mean", "amax", "amin", "logsumexp", "var", "std"):
            dims = tuple(sorted(int(d) for d in r.choice(nd, size=2, replace=False)))
            keep = bool(r.random() < 0.5)
            shape = tuple(1 if i in dims else s for i, s in enumerate(sa)) if keep else \
                tuple(s for i, s in enumerate(sa) if i not in dims)
            dims_src = tuple(d - nd if r.random() < 0.5 else d for d in dims)
            extra = ", unbiased=False" if fn in ("var", "std") else ""
            self._emit(f"({a}).{fn}({dims_src}, keepdim={keep}{extra})", shape, "float")
            return
        d = int(r.integers(0, nd))
        ds = d - nd if r.random() < 0.3 else d
        keep = bool(r.random() < 0.5)
        shape = tuple(1 if i == d else s for i, s in enumerate(sa)) if keep else sa[:d] + sa[d + 1:]
        if how < 0.4:
            self._emit(f"torch.softmax({a}, {ds})" if r.random() < 0.5 else f"torch.log_softmax({a}, {ds})", sa,
                       "float")
        elif how < 0.5:
            self._emit(f"({a}).argmax({ds}, keepdim={keep})", shape, "int")
        elif how < 0.55:
            self._emit(f"({a}).cumsum({ds})", sa, "float")
        else:
            extra = ", unbiased=False" if fn in ("var", "std") else ""
            self._emit(f"torch.{fn}({a}, {ds}, keepdim={keep}{extra})", shape, "float")

    def _view_expr(self, a):
        """A view of `a` and its shape (None when none applies)."""
        r = self.rng
        sa = self.types[a][0]
        nd = len(sa)
        opts = []
        if nd >= 2:
            i, j = sorted(int(x) for x in r.choice(nd, size=2, replace=False))
            s = list(sa)
            s[i], s[j] = s[j], s[i]
            opts.append((f"({a}).transpose({i}, {j})", tuple(s)))
            perm = [int(x) for x in r.permutation(nd)]
            opts.append((f"({a}).permute({', '.join(map(str, perm))})", tuple(sa[p] for p in perm)))
            d = int(r.integers(0, nd))
            opts.append((f"({a}).select({d}, {int(r.integers(0, sa[d]))})", sa[:d] + sa[d + 1:]))
        if nd == 2:
            opts.append((f"({a}).t()", (sa[1], sa[0])))
        if nd >= 1:
            d = int(r.integers(0, nd))
            if sa[d] >= 2:
                start = int(r.integers(0, sa[d] - 1))
                idx = ", ".join([":"] * d + [f"{start}::2"])
                opts.append((f"({a})[{idx}]", sa[:d] + (len(range(start, sa[d], 2)),) + sa[d + 1:]))
                n = int(r.integers(1, sa[d]))
                opts.append((f"({a}).narrow({d}, 1, {n})", sa[:d] + (n,) + sa[d + 1:]))
            d = int(r.integers(0, nd + 1))
            opts.append((f"({a}).unsqueeze({d})", sa[:d] + (1,) + sa[d:]))
            if 1 in sa:
                d = sa.index(1)
                new = list(sa)
                new[d] = 3
                opts.append((f"({a}).expand({', '.join(map(str, new))})", tuple(new)))
        if not opts:
            return None, None
        return opts[int(r.integers(0, len(opts)))]

    def _view(self):
        a = self._pick("float")
        expr, shape = self._view_expr(a)
        if expr:
            self._emit(expr, shape, "float")

    def _inplace_view(self):
        """y = a.detach().clone(); a view of y updated in place; y read afterwards."""
        r = self.rng
        a = self._pick("float", 1)
        if a is None:
            return
        expr, shape = self._view_expr(a)
        if expr is None or "expand" in expr:
            return
        b = self._pick("float")
        try:
            if np.broadcast_shapes(shape, self.types[b][0]) != tuple(shape):
                b = None
        except ValueError:
            b = None
        op = str(r.choice(["mul_(2.5)", "add_(1.0)", "clamp_(-0.3, 0.3)", "zero_()"] + ([f"add_({b})",
                                                                                       f"copy_({b})"] if b else [])))
        view = expr.replace(f"({a})", "@@")
        self._emit(f"@@", self.types[a][0], "float",
                   pre=[f"@@ = ({a}).detach().clone()", f"{view}.{op}"])

    def _layout(self):
        """contiguous / view / reshape of a value whose layout a view changed."""
        r = self.rng
        a = self._pick("float", 2)
        if a is None:
            return
        sa = self.types[a][0]
        expr, shape = self._view_expr(a)
        if expr is None or "expand" in expr or "unsqueeze" in expr:
            return
        n = int(np.prod(shape))
        how = r.random()
        if how < 0.4:
            self._emit(f"({expr}).contiguous().view(-1)", (n,), "float")
        elif how < 0.7:
            self._emit(f"({expr}).reshape(-1)", (n,), "float")
        elif len(shape) >= 2:
            self._emit(f"({expr}).reshape({shape[0]}, -1)", (shape[0], n // max(shape[0], 1)), "float")
        else:
            self._emit(f"({expr}).contiguous()", shape, "float")

    def _index(self):
        r = self.rng
        a = self._pick("float", 1)
        if a is None:
            return
        sa = self.types[a][0]
        d = int(r.integers(0, len(sa)))
        k = int(r.integers(1, 5))
        idx = [int(x) for x in r.integers(-sa[d] if r.random() < 0.3 else 0, sa[d], size=k)]
        how = r.random()
        if how < 0.35:
            sub = ", ".join([":"] * d + [f"torch.tensor({idx})"])
            self._emit(f"({a})[{sub}]", sa[:d] + (k,) + sa[d + 1:], "float")
        elif how < 0.65:
            idx = [i % sa[d] for i in idx]
            self._emit(f"({a}).index_select({d}, torch.tensor({idx}))", sa[:d] + (k,) + sa[d + 1:], "float")
        else:
            ishape = list(sa)
            ishape[d] = k
            vals = r.integers(0, sa[d], size=ishape).tolist()
            self._emit(f"({a}).gather({d}, torch.tensor({vals}))", tuple(ishape), "float")

    def _matmul(self):
        r = self.rng
        a = self._pick("float", 1)
        if a is None:
            return
        sa = self.types[a][0]
        k, m = sa[-1], int(r.integers(2, 4))
        if r.random() < 0.5:
            w = self._emit(f"torch.arange({k * m}, dtype=torch.float64).reshape({m}, {k}).t() * 0.1 - 0.2", (k, m),
                           "float")
        else:
            b = self._pick("float", 2)
            if b is None or self.types[b][0][-1] != k or len(self.types[b][0]) != 2:
                w = self._emit(f"torch.linspace(-1, 1, {k * m}, dtype=torch.float64).reshape({k}, {m})", (k, m),
                               "float")
            else:
                w = self._emit(f"({b}).t()", (k, self.types[b][0][0]), "float")
                m = self.types[b][0][0]
        self._emit(f"{a} @ {w}", sa[:-1] + (m,), "float")

    # ------------------------------------------------------------------ source
    def source(self, stmts=None, out=None):
        stmts = self.stmts if stmts is None else stmts
        body = [ln for s in stmts for ln in s.lines()] + [f"return {self.out if out is None else out}"]
        return f"def program({', '.join(n for n, _, _ in self.inputs)}):\n" + "\n".join("    " + b for b in body)

    def arrays(self):
        rng = np.random.default_rng(self.seed + 10_000)
        out = []
        for _, shape, dt in self.inputs:
            out.append(rng.standard_normal(shape) if dt == "float" else rng.integers(-5, 6, size=shape))
        return out


# ---------------------------------------------------------------------------- running and comparing
def _compile_src(src):
    import tracejit
    import tracejit.nn.functional as F
    ns = {"torch": tracejit, "F": F, "np": np}
    exec(src, ns)
    return ns["program"]


def run_one(src, inputs, arrays, backend=None):
    """None when eager and traced agree (or eager itself refuses the program), else a description."""
    import tracejit
    fn = _compile_src(src)

    def make():
        return [tracejit.tensor(a, requires_grad=(dt == "float")) for a, (_, _, dt) in zip(arrays, inputs)]
    xe = make()
    try:
        le = fn(*xe)
    except Exception:
        return None                      # an invalid program (eager refuses it): nothing to compare
    xt = make()
    try:
        lt = tracejit.trace(fn, backend=backend)(*xt)
    except Exception as e:
        return f"traced raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if lt.dtype != le.dtype or lt.requires_grad != le.requires_grad:
        return f"result {lt.dtype}/{lt.requires_grad} instead of {le.dtype}/{le.requires_grad}"
    a, b = float(lt.detach()), float(le.detach())
    if not np.isclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True):
        return f"value {a!r} instead of {b!r}"
    if not le.requires_grad:
        return None
    diff = [x for x in xe if x.requires_grad]
    dift = [x for x in xt if x.requires_grad]
    try:
        ge = tracejit.autograd.grad(le, diff, allow_unused=True)
    except Exception:
        return None                      # eager cannot differentiate it: nothing to compare
    try:
        gt = tracejit.autograd.grad(lt, dift, allow_unused=True)
    except Exception as e:
        return f"traced backward raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    for k, (p, q) in enumerate(zip(ge, gt)):
        if p is None:
            if q is not None and not np.allclose(q.numpy(), 0):
                return f"gradient {k} nonzero where eager has none"
            continue
        if q is None:
            return f"gradient {k} missing"
        if not np.allclose(q.numpy(), p.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True):
            return f"gradient {k} differs (max {float(np.nanmax(np.abs(q.numpy() - p.numpy()))):.3g})"
    return None


def _deps(stmts, name):
    need, keep = {name}, []
    for s in reversed(stmts):
        if s.name in need:
            keep.append(s)
            for ln in s.lines():
                need.update(re.findall(r"\bv\d+\b", ln))
    return keep[::-1]


def shrink(prog, backend=None, budget=200):
    """A smallest failing program found by: returning each value alone (the earliest that fails, with only what it
    needs), then dropping statements one at a time while it still fails the same way."""
    arrays = prog.arrays()
    full_why = run_one(prog.source(), prog.inputs, arrays, backend)
    kind = full_why.split(" ")[0] if full_why else None
    tries = [0]

    def fails(stmts, out):
        if tries[0] >= budget:
            return None
        tries[0] += 1
        why = run_one(prog.source(stmts, out), prog.inputs, arrays, backend)
        return why if why and why.split(" ")[0] == kind else None

    stmts, out, why = prog.stmts, prog.out, full_why
    for s in prog.stmts:                       # the earliest value that fails alone
        ret = f"({s.name}).sum()" if s.dtype == "float" else f"({s.name}).sum().double()"
        sub = _deps(prog.stmts, s.name)
        w = fails(sub, ret)
        if w:
            stmts, out, why = sub, ret, w
            break
    i = 0
    while i < len(stmts):                      # then drop what is not needed to fail
        cand = stmts[:i] + stmts[i + 1:]
        w = fails(cand, out)
        if w:
            stmts, why = cand, w
        else:
            i += 1
    return stmts, out, why


def reproducer(prog, stmts, out, why):
    arrays = prog.arrays()
    lines = [HEADER, prog.source(stmts, out), "",
             f"# fuzz seed {prog.seed}: {why}"]
    for (n, shape, dt), a in zip(prog.inputs, arrays):
        lines.append(f"{n} = np.array({np.asarray(a).tolist()!r}{', dtype=np.int64' if dt == 'int' else ''})")
    names = ", ".join(n for n, _, _ in prog.inputs)
    lines += ["args = lambda: [torch.tensor(a, requires_grad=a.dtype == np.float64) for a in (" + names + ",)]",
              "eager = program(*args())",
              "traced = torch.trace(program)(*args())",
              "print('eager', eager, 'traced', traced)"]
    return "\n".join(lines)


def fuzz(n, seed=0, backend=None, out=sys.stdout, shrink_budget=200):
    """Run n programs from seed; returns the list of (seed, reproducer) of the failures."""
    failures = []
    t0 = time.perf_counter()
    for s in range(seed, seed + n):
        prog = Program(s)
        try:
            why = run_one(prog.source(), prog.inputs, prog.arrays(), backend)
        except Exception:
            why = "the fuzzer crashed: " + traceback.format_exc().splitlines()[-1]
        if why:
            stmts, ret, w = shrink(prog, backend, shrink_budget)
            rep = reproducer(prog, stmts, ret, w or why)
            failures.append((s, rep))
            print(f"# FAIL seed {s}: {why}\n{rep}\n", file=out, flush=True)
        if (s - seed + 1) % 100 == 0:
            print(f"# {s - seed + 1} programs, {len(failures)} failing, {time.perf_counter() - t0:.0f} s", file=out,
                  flush=True)
    return failures


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default=None, help="numba (default) or interpreter")
    p.add_argument("--shrink-budget", type=int, default=200, help="runs spent shrinking each failing program")
    a = p.parse_args(argv)
    fails = fuzz(a.n, a.seed, a.backend, shrink_budget=a.shrink_budget)
    print(f"# done: {a.n} programs from seed {a.seed}, {len(fails)} failing"
          + (f" (seeds {', '.join(str(s) for s, _ in fails)})" if fails else ""))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
