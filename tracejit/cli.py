"""The `tracejit` command: demo (eager vs compiled side by side), bench, explain, precompile."""
import argparse
import os
import sys
import time


def _mlp_params(sizes, seed=0):
    import tracejit as torch
    torch.manual_seed(seed)
    ps = []
    for i, o in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / i ** 0.5
        ps += [torch.rand(i, o) * (2 * bound) - bound, torch.zeros(o)]
    return ps


def _make_data(n, d, classes, seed=1):
    """Built-in data: Gaussian blobs, one per class (nothing is downloaded)."""
    import numpy as np
    import tracejit as torch
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, d)) * 2.0
    y = rng.integers(0, classes, n)
    x = centers[y] + rng.standard_normal((n, d))
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


def train_step(params, x, y, lr):
    import tracejit as torch
    import tracejit.nn.functional as F
    h = x
    for i in range(0, len(params) - 2, 2):
        h = F.relu(h @ params[i] + params[i + 1])
    loss = F.cross_entropy(h @ params[-2] + params[-1], y)
    loss.backward()
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None
    return loss.detach()


def demo(args):
    import numpy as np
    import tracejit as torch
    if args.steps < 2:
        raise UsageError(f"--steps {args.steps}: give at least 2 (the first step traces and compiles)")
    if args.threads < 1:
        raise UsageError(f"--threads {args.threads}: give a positive number of threads, e.g. --threads 1")
    _backend(args.backend)
    sizes = [64, 256, 256, 10]
    x, y = _make_data(4096, sizes[0], sizes[-1])
    batch, steps = 128, args.steps
    torch.set_num_threads(args.threads)
    eager_p = [p.requires_grad_() for p in _mlp_params(sizes)]
    traced_p = [p.detach().clone().requires_grad_() for p in eager_p]
    step = torch.trace(lambda xb, yb: train_step(traced_p, xb, yb, 0.05), backend=args.backend)
    print(f"tracejit demo: MLP {'-'.join(map(str, sizes))}, batch {batch}, SGD, {steps} steps, "
          f"eager vs @trace (backend={step.backend_name or torch.config.default_backend}), "
          f"{torch.get_num_threads()} thread(s) (--threads)\n")
    print(f"{'step':>5} {'eager loss':>11} {'traced loss':>12} {'eager ms':>9} {'traced ms':>10}")
    te, tt, max_dl, compile_s = [], [], 0.0, 0.0
    for s in range(steps):
        i = (s * batch) % (len(x) - batch)
        xb, yb = x[i:i + batch], y[i:i + batch]
        t0 = time.perf_counter()
        le = train_step(eager_p, xb, yb, 0.05)
        t1 = time.perf_counter()
        lt = step(xb, yb)
        t2 = time.perf_counter()
        if s == 0:
            compile_s = t2 - t1
        else:
            te.append(t1 - t0)
            tt.append(t2 - t1)
        max_dl = max(max_dl, abs(le.item() - lt.item()))
        if s % max(1, steps // 10) == 0 or s == steps - 1:
            print(f"{s:>5} {le.item():>11.5f} {lt.item():>12.5f} {1e3 * (t1 - t0):>9.2f} {1e3 * (t2 - t1):>10.2f}")
    max_dw = max(float(np.abs(a.detach().numpy() - b.detach().numpy()).max()) for a, b in zip(eager_p, traced_p))
    me, mt = float(np.median(te)), float(np.median(tt))
    with torch.no_grad():
        h = x
        for i in range(0, len(traced_p) - 2, 2):
            h = (h @ traced_p[i] + traced_p[i + 1]).relu()
        acc = float(((h @ traced_p[-2] + traced_p[-1]).argmax(1) == y).float().mean())
    print("\n| measure | eager | compiled |")
    print("|---|---|---|")
    print(f"| time per step (median) | {1e3 * me:.2f} ms | {1e3 * mt:.2f} ms |")
    print(f"| speedup | 1.00x | {me / mt:.2f}x |")
    print(f"| first call (trace + compile) | - | {compile_s:.3f} s |")
    print(f"| max |loss difference| | {max_dl:.2e} | |")
    print(f"| max |weight difference| | {max_dw:.2e} | |")
    print(f"| traces | - | {step.cache_info()['traces']} |")
    print(f"| final train accuracy | | {acc:.3f} |")
    return 0


class UsageError(Exception):
    """A mistake on the command line: printed as one line saying what to type instead (no traceback)."""


def _load_target(target):
    """MODULE:FUNCTION -> the function, or a UsageError that says what to write."""
    import importlib
    import inspect
    mod, sep, fn = target.partition(":")
    if not sep or not fn or not mod:
        raise UsageError(f"write the target as MODULE:FUNCTION (e.g. mymod:f for f in ./mymod.py), got {target!r}")
    if mod.endswith(".py") or os.sep in mod or "/" in mod:
        path = mod if mod.endswith(".py") else mod + ".py"
        folder, base = os.path.split(path)
        hint = f"cd {folder} && " if folder else ""
        raise UsageError(f"{mod!r} is a file path: give its module name, run from its folder: "
                         f"{hint}tracejit explain {base[:-3]}:{fn} --inputs ...")
    sys.path.insert(0, os.getcwd())
    try:
        f = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name is not None and (e.name == mod or mod.startswith(e.name + ".")):
            raise UsageError(f"no module named {mod!r} in the current folder ({os.getcwd()}) or on sys.path: run "
                             f"from the folder that holds {mod.replace('.', '/')}.py") from None
        raise UsageError(f"importing {mod!r} failed: {type(e).__name__}: {e}") from e
    except Exception as e:
        raise UsageError(f"importing {mod!r} failed: {type(e).__name__}: {e}") from e
    for part in fn.split("."):
        if not hasattr(f, part):
            names = sorted(n for n, v in vars(f).items() if callable(v) and not n.startswith("_")
                           and getattr(v, "__module__", None) == getattr(f, "__name__", None))
            raise UsageError(f"{getattr(f, '__name__', mod)!r} has no {part!r}"
                             + (f"; it defines: {', '.join(names)}" if names else ""))
        f = getattr(f, part)
    if not callable(f):
        raise UsageError(f"{target} is a {type(f).__name__}, not a function")
    try:
        sig = inspect.signature(getattr(f, "forward", f))
    except (TypeError, ValueError):
        sig = None
    return f, sig


def _check_arity(target, sig, n):
    if sig is None:
        return
    ps = list(sig.parameters.values())
    pos = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    need = [p.name for p in pos if p.default is p.empty]
    if n < len(need) or (n > len(pos) and not any(p.kind is p.VAR_POSITIONAL for p in ps)):
        want = f"{len(need)}" if len(need) == len(pos) else f"{len(need)} to {len(pos)}"
        raise UsageError(f"{target} takes {want} input(s) ({', '.join(p.name for p in pos)}), --inputs gives {n}: "
                         f"give one type per input, e.g. --inputs '{' '.join(['f32[8,4]'] * max(1, len(need)))}'")


def explain_cmd(args):
    from .explain import explain, parse_inputs
    f, sig = _load_target(args.target)
    try:
        inputs = parse_inputs(args.inputs)
    except ValueError as e:
        raise UsageError(f"--inputs: {e}") from None
    _check_arity(args.target, sig, len(inputs))
    ex = explain(f, *inputs, backend=_backend(args.backend), requires_grad=not args.no_grad)
    print(ex.text())
    if args.html:
        try:
            ex.save_html(args.html)
        except OSError as e:
            raise UsageError(f"--html: cannot write {args.html!r} ({e.strerror or e}): give a writable path") from None
        print(f"\nwrote {args.html}")
    return 0


def _backend(name):
    if name is None:
        return None
    from .backends import get_backend
    try:
        get_backend(name)
    except Exception as e:      # (get_backend's message names the backends there are)
        raise UsageError(f"--backend: {e}") from None
    return name


def bench_cmd(args):
    from .bench import run_suite
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install matplotlib (or leave --plot out)") from None
    for path, flag in ((args.json, "--json"), (args.plot, "--plot")):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise UsageError(f"{flag} {path!r}: the folder {os.path.dirname(os.path.abspath(path))} does not exist")
    compare = [c.strip() for c in args.compare.split(",") if c.strip()] if args.compare else None
    return run_suite(args.names, quick=args.quick, json_path=args.json, plot_path=args.plot, compare=compare,
                     compare_to=args.compare_to, cpu_time=args.cpu_time, threads=args.threads)


def precompile_cmd(args):
    from .backends.numba_cpu import precompile
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: expected at least 1 process")
    return 1 if precompile.run(args.workers) else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="tracejit", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="train a small MLP eagerly and traced, side by side")
    d.add_argument("--steps", type=int, default=60)
    d.add_argument("--backend", default=None)
    d.add_argument("--threads", type=int, default=1,
                   help="threads for BLAS and numba in both modes (default 1: stable timings on a shared machine)")
    d.set_defaults(func=demo)
    e = sub.add_parser("explain", help="show the eager graph, the traced IR, the passes and the kernels")
    e.add_argument("target", help="MODULE:FUNCTION")
    e.add_argument("--inputs", required=True, help='input types as the IR writes them, e.g. "f32[8,4] f32[4,3]"')
    e.add_argument("--html", default=None, metavar="FILE", help="also write one self-contained HTML page")
    e.add_argument("--backend", default=None, help="numba (default) or interpreter")
    e.add_argument("--no-grad", action="store_true",
                   help="the inputs do not require grad (default: floating inputs do, so a backward is derived)")
    e.set_defaults(func=explain_cmd)
    b = sub.add_parser("bench", help="run the benchmark suite")
    b.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all in benches/)")
    b.add_argument("--quick", action="store_true", help="smaller sizes and fewer samples (< 60 s)")
    b.add_argument("--json", default=None, metavar="FILE", help="also write every row, the roofs and the machine")
    b.add_argument("--plot", default=None, metavar="FILE.png", help="speedup chart (needs matplotlib)")
    b.add_argument("--compare", default=None, metavar="SYSTEMS",
                   help="reference systems to measure besides tracejit, e.g. torch,jax,numpy (default: all "
                        "that work here; numpy always)")
    b.add_argument("--compare-to", default=None, metavar="FILE.json",
                   help="an earlier run's --json file: also print each row's time now / then (same machine)")
    b.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads for every system (OpenBLAS, torch, numba; default 1: stable timings on a shared "
                        "machine)")
    b.add_argument("--cpu-time", action="store_true",
                   help="time calls by the process's CPU time (all threads) instead of the wall clock: on a busy "
                        "shared machine the time spent waiting for a core is not counted")
    b.set_defaults(func=bench_cmd)
    c = sub.add_parser("precompile", help="compile the library's numba kernels for this machine into numba's disk "
                                          "cache (once per installation and CPU; in parallel)")
    c.add_argument("--workers", type=int, default=None, metavar="N", help="processes (default: one per core)")
    c.set_defaults(func=precompile_cmd)
    for q in (p, d, e, b, c):
        q.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the full traceback of an error")
    args = p.parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return args.func(args)
    except UsageError as err:
        if debug:
            raise
        print(f"tracejit {args.cmd}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        if debug:
            raise
        first = (str(err).strip().splitlines() or [""])[0]
        print(f"tracejit {args.cmd}: {type(err).__name__}: {first} (run again with --debug for the traceback)",
              file=sys.stderr)
        return 1
