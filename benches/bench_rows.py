"""Row-wise softmax and layer norm over a [4096, 1024] float32 matrix (forward only).

Systems: numpy, tracejit eager, tracejit traced, a hand-written numba loop (the "numba loop" roof: one
pass per row, what a code generator could emit), torch eager and torch.compile where they work. All are
checked against numpy before timing; the roof columns are the fraction of the copy bandwidth (read the
input once, write the output once) and of the numba loop.

    python benches/bench_rows.py [--quick]
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402
import tracejit.nn.functional as TF  # noqa: E402

EPS = 1e-5


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_layernorm(x, w, b):
    m = x.mean(axis=1, keepdims=True)
    v = x.var(axis=1, keepdims=True)
    return (x - m) / np.sqrt(v + np.float32(EPS)) * w + b


def _numba_kernels():
    import numba
    from tracejit.kernels.cpu import vmath      # vectorizable exp (the pip llvmlite has no SVML for math.exp)

    @numba.njit(fastmath=True, cache=False)
    def softmax_rows(x, out):
        for i in range(x.shape[0]):
            m = x[i, 0]
            for j in range(1, x.shape[1]):
                m = max(m, x[i, j])
            s = np.float32(0.0)
            for j in range(x.shape[1]):
                e = vmath.vexp(x[i, j] - m)
                out[i, j] = e
                s += e
            r = np.float32(1.0) / s
            for j in range(x.shape[1]):
                out[i, j] *= r

    @numba.njit(fastmath=True, cache=False)
    def layernorm_rows(x, w, b, out):
        n = x.shape[1]
        for i in range(x.shape[0]):
            s = 0.0
            for j in range(n):
                s += x[i, j]
            m = s / n
            v = 0.0
            for j in range(n):
                d = x[i, j] - m
                v += d * d
            r = np.float32(1.0 / math.sqrt(v / n + EPS))
            mf = np.float32(m)
            for j in range(n):
                out[i, j] = (x[i, j] - mf) * r * w[j] + b[j]
    return softmax_rows, layernorm_rows


def run(quick=False):
    H.pin_threads()
    rows, cols = (1024, 1024) if quick else (4096, 1024)
    size = f"[{rows},{cols}]"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, cols).astype(np.float32)
    tx, tw, tb = (tracejit.tensor(a) for a in (x, w, b))
    work = {"bytes": 2 * x.nbytes}
    repeat, min_sample = (5, 0.01) if quick else (15, 0.05)

    sm_traced = tracejit.trace(lambda x: TF.softmax(x, dim=1))
    ln_traced = tracejit.trace(lambda x, w, b: TF.layer_norm(x, (cols,), w, b, EPS))
    softmax = {"numpy": lambda: np_softmax(x),
               "tracejit eager": lambda: TF.softmax(tx, dim=1),
               f"tracejit traced ({tracejit.config.default_backend})": lambda: sm_traced(tx)}
    layernorm = {"numpy": lambda: np_layernorm(x, w, b),
                 "tracejit eager": lambda: TF.layer_norm(tx, (cols,), tw, tb, EPS),
                 f"tracejit traced ({tracejit.config.default_backend})": lambda: ln_traced(tx, tw, tb)}
    notes = {}
    roof = None
    try:
        k_sm, k_ln = _numba_kernels()
        o1, o2 = np.empty_like(x), np.empty_like(x)
        roof = "numba loop (hand-written)"

        def nb_sm():
            k_sm(x, o1)
            return o1

        def nb_ln():
            k_ln(x, w, b, o2)
            return o2
        softmax[roof], layernorm[roof] = nb_sm, nb_ln
    except Exception as e:
        notes["numba"] = f"hand-written loop unavailable: {e}"

    refs = H.references()
    if H.wanted("torch") and not refs["torch"].startswith("unavailable"):
        import torch
        H.pin_threads()
        px, pw, pb = (torch.from_numpy(a) for a in (x, w, b))
        softmax["torch eager"] = lambda: torch.softmax(px, dim=1)
        layernorm["torch eager"] = lambda: torch.nn.functional.layer_norm(px, (cols,), pw, pb, EPS)
        if quick:
            notes["torch.compile"] = "skipped in --quick (compiling takes 10-20 s per function here)"
        else:
            tsm, why = H.try_torch_compile(lambda x: torch.softmax(x, dim=1), px)
            tln, why2 = H.try_torch_compile(lambda x, w, b: torch.nn.functional.layer_norm(x, (cols,), w, b, EPS),
                                            px, pw, pb)
            if tsm is not None:
                softmax["torch.compile"] = lambda: tsm(px)
            if tln is not None:
                layernorm["torch.compile"] = lambda: tln(px, pw, pb)
            if tsm is None or tln is None:
                notes["torch.compile"] = why or why2
    elif H.wanted("torch"):
        notes["torch"] = refs["torch"]

    out = []
    for name, fns in (("softmax", softmax), ("layernorm", layernorm)):
        H.check_same({k: f() for k, f in fns.items()}, rtol=1e-4, atol=1e-5, label=f"rows/{name}")
        out += H.compare(fns, "rows", name, size, baseline="tracejit eager", repeat=repeat, min_sample=min_sample,
                         work=work, roof_loop=roof)
    for k, v in notes.items():
        out.append(H.Result("rows", "-", k, size, None, note=v))
    return out


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
