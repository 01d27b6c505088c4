"""`tracejit bench`: runs the benchmarks in benches/ and prints one table.

Each benchmark module `benches/bench_<name>.py` exposes `run(quick=False)` and returns rows (harness
`Result`s, or dicts); every benchmark checks that its systems computed the same numbers before it times
them. The table: benchmark/workload, system, size, median, spread (half the interquartile range, in % of
the median), speedup vs the baseline system measured in the same run, and the fraction of each roof.
"""
import datetime
import importlib.util
import json
import math
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_benches():
    """The benchmarks' folder: $TRACEJIT_BENCHES, else `benches/` in the working directory, else `benches/` beside
    the package (a source checkout; an installed package has none)."""
    if os.environ.get("TRACEJIT_BENCHES"):
        return os.environ["TRACEJIT_BENCHES"]
    here = os.path.join(os.getcwd(), "benches")
    return here if os.path.isdir(here) else os.path.join(HERE, "benches")


BENCHES = find_benches()

# the order of the default suite; other bench_*.py files with a run() follow
ORDER = ("eager_overhead", "fused_chain", "small_call", "long_chains", "user_chains", "rows", "mlp_step", "cnn_step",
         "resnet_step", "gpt_step", "rnn_step",
         "compile_latency")
# benchmarks other people are writing: asking for one that is not there yet is a skip, not an error
EXPECTED = ("eager_overhead", "fused_chain", "rows", "mlp_step", "compile_latency")
REFERENCE_SYSTEMS = ("numpy", "torch", "jax")
# extra keyword arguments for a benchmark's run(), passed only when its signature takes them: one table
# (not each benchmark's own as well), and a --quick suite that stays under a minute on 2 cores
RUN_KWARGS = {"eager_overhead": {"verbose": False}}
QUICK_KWARGS = {"eager_overhead": {"sizes": (1000,)}}


def available():
    if not os.path.isdir(BENCHES):
        return []
    names = [f[6:-3] for f in os.listdir(BENCHES) if f.startswith("bench_") and f.endswith(".py")]
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def _harness():
    if BENCHES not in sys.path:
        sys.path.insert(0, BENCHES)
    import harness
    return harness


def _load(name):
    spec = importlib.util.spec_from_file_location(f"tracejit_bench_{name}", os.path.join(BENCHES, f"bench_{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod        # importable by name: torch.compile (dynamo) looks functions' modules up
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------------------------- rows

def to_results(name, rows):
    """A benchmark's return value -> harness Results (understands the harness schema and the
    eager_overhead one: dicts with `<system>_us` and `<system>_min_us`)."""
    H = _harness()
    out = []
    for r in rows or ():
        if isinstance(r, H.Result):
            out.append(r)
        elif isinstance(r, dict) and "system" in r and "median" in r:
            d = dict(r)
            d.setdefault("bench", name)
            d.setdefault("name", "-")
            d.setdefault("size", "-")
            out.append(H.result_from_dict(d))
        elif isinstance(r, dict) and any(k.endswith("_us") and not k.endswith("_min_us") for k in r):
            out.extend(_from_us_row(H, name, r))
    return out


def _from_us_row(H, bench, r):
    systems = [k[:-3] for k in r if k.endswith("_us") and not k.endswith("_min_us")]
    label = str(r.get("op", r.get("name", "-"))) + (" +grad" if r.get("requires_grad") else "")
    size = str(r.get("n", r.get("size", "-")))
    rename = {"tracejit": "tracejit eager", "torch": "torch eager"}
    res = []
    for s in systems:
        med = r[f"{s}_us"] * 1e-6
        mn = r.get(f"{s}_min_us")
        extra = {k: v for k, v in r.items() if not k.endswith("_us") and k not in ("op", "n", "requires_grad")}
        res.append(H.Result(bench, label, rename.get(s, s), size, med, min=mn * 1e-6 if mn is not None else None,
                            checked=True, extra=extra))
    base = next((x for x in res if x.system == "tracejit eager"), res[0] if res else None)
    for x in res:
        x.baseline = base.system
        x.speedup = base.median / x.median
    return res


def _spread(r):
    if r.q1 is not None and r.q3 is not None and r.median:
        return f"±{50 * (r.q3 - r.q1) / r.median:.1f}%"
    if r.min is not None and r.median:
        return f"min {_fmt_time(r.min)}"
    return "-"


def _fmt_time(s):
    return _harness().fmt_time(s)


def _roof_cell(r):
    if not r.roofs:
        return "-"
    short = {"bandwidth": "bw", "blas": "blas", "numba loop": "loop"}
    return " ".join(f"{v:.2f} {short.get(k, k)}" for k, v in r.roofs.items())


def table(results):
    """The results as a Markdown table (one line per row)."""
    head = ["benchmark", "system", "size", "median", "spread", "speedup", "of roof"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        bench = r.bench + ("/" + r.name if r.name and r.name != "-" else "")
        if r.median is None:
            lines.append(f"| {bench} | {r.system} | {r.size} | {r.note or 'not measured'} | | | |")
            continue
        sp = f"{r.speedup:.2f}x" if r.speedup is not None else "-"
        if r.baseline == r.system:
            sp = "1.00x (base)"
        lines.append(f"| {bench} | {r.system} | {r.size} | {_fmt_time(r.median)} | {_spread(r)} | {sp} | "
                     f"{_roof_cell(r)} |")
    return "\n".join(lines)


def print_table(results, file=None):
    print(table(results), file=file or sys.stdout)


# ----------------------------------------------------------------------------------------------- suite

def run_suite(names=None, quick=False, json_path=None, plot_path=None, compare=None, out=None, compare_to=None,
              cpu_time=False, threads=1):
    out = out or sys.stdout
    say = lambda *a: print(*a, file=out, flush=True)  # noqa: E731
    H = _harness()
    earlier = None
    if compare_to:
        try:
            earlier = load_run(compare_to)
        except (OSError, ValueError) as e:
            say(f"--compare-to: cannot read {compare_to}: {e}")
            return 2
    if compare:
        bad = [c for c in compare if c not in REFERENCE_SYSTEMS]
        if bad:
            say(f"--compare: unknown system(s) {', '.join(bad)}; choose from {', '.join(REFERENCE_SYSTEMS)}")
            return 2
        H.CONFIG["compare"] = set(compare)
    names = list(names or [n for n in available() if _has_run(n)])
    if not names:
        say(f"no benchmarks found in {BENCHES}: run from a source checkout, or set TRACEJIT_BENCHES to its benches/")
        return 1
    unknown = [n for n in names if n not in available() and n not in EXPECTED]
    if unknown:
        say(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}")
        return 2
    t_start = time.perf_counter()
    H.CONFIG["clock"] = "cpu" if cpu_time else "wall"
    if threads < 1:
        say(f"--threads {threads}: give 1 or more")
        return 2
    H.CONFIG["threads"] = threads
    threads = H.pin_threads()
    mach = H.machine()
    say(f"tracejit bench{' --quick' if quick else ''}: {H.machine_line(mach)}, {mach['cores']} cores, "
        f"Python {mach['python']}, numpy {mach['numpy']}, numba {mach.get('numba', '-')}")
    say("threads pinned: " + ", ".join(f"{k} {v}" for k, v in threads.items())
        + (" (one thread per system)" if H.CONFIG["threads"] == 1 else ""))
    if cpu_time:
        say("clock: the process's CPU time per call (all its threads), not the wall clock (--cpu-time)")
    rf = H.roofs()
    say(f"roofs: bandwidth {rf['bandwidth_GBps']:.1f} GB/s ({rf['bandwidth_how']}); "
        + (f"numba loop {rf['numba_triad_GBps']:.1f} GB/s (triad); " if rf.get("numba_triad_GBps") else "")
        + f"sgemm {rf['sgemm_GFLOPs']:.0f} GFLOP/s ({rf['sgemm_how']})")
    refs = H.references()
    shown = {k: v for k, v in refs.items() if k == "numpy" or H.wanted(k.split(".")[0])}
    say("reference systems: " + "; ".join(f"{k} {v}" for k, v in shown.items()))
    say("")
    results, status, failed = [], {}, False
    for name in names:
        if name not in available():
            status[name] = "skipped: benches/bench_%s.py is not there yet" % name
            say(f"== {name}: {status[name]} ==")
            continue
        try:
            mod = _load(name)
        except Exception as e:
            status[name] = f"failed to import: {type(e).__name__}: {e}"
            say(f"== {name}: {status[name]} ==")
            failed = True
            continue
        if not hasattr(mod, "run"):
            status[name] = f"skipped: no run(quick) yet (run `python benches/bench_{name}.py`)"
            say(f"== {name}: {status[name]} ==")
            continue
        say(f"== {name} ==")
        checks0 = len(H.CHECKS)
        t0 = time.perf_counter()
        try:
            rows = mod.run(quick=quick, **_kwargs(mod.run, name, quick))
        except H.Mismatch as e:
            status[name] = f"FAILED the correctness check: {e}"
            say(f"   {status[name]}")
            failed = True
            continue
        except Exception as e:
            status[name] = f"failed: {type(e).__name__}: {e}"
            say(f"   {status[name]}")
            traceback.print_exc(file=out)
            failed = True
            continue
        rs = to_results(name, rows)
        n_checks = len(H.CHECKS) - checks0
        if n_checks:
            for r in rs:
                r.checked = True
        if not rs:
            status[name] = "skipped: it measured nothing here (e.g. no GPU)"
        else:
            how = (f"{n_checks} correctness check(s) passed before timing" if n_checks else
                   "it checks its systems itself (no harness check_same call)")
            status[name] = f"ok: {len(rs)} rows in {time.perf_counter() - t0:.1f} s; {how}"
        say(f"   {status[name]}")
        results += rs
    say("")
    say(table(results))
    notes = list(dict.fromkeys(f"{r.bench}/{r.name}, {r.system}: {r.note}" for r in results
                               if r.note and r.median is not None))
    if notes:
        say("\nnotes:\n" + "\n".join("  " + n for n in notes))
    say("")
    say("speedup: the baseline system's median / this median, both measured in the same run (> 1 is faster).")
    say("spread: half the interquartile range of the samples, in % of the median. of roof: achieved fraction of "
        "the copy bandwidth (bw), of sgemm GFLOP/s (blas), or the hand-written numba loop's median / this median "
        "(loop); bw above 1 means the data fit in the caches.")
    n_checked = sum(1 for r in results if r.checked)
    say(f"correctness: {len(H.CHECKS)} check_same call(s) passed before timing; {n_checked} of {len(results)} "
        f"rows come from checked systems.")
    say(f"total {time.perf_counter() - t_start:.1f} s")
    if json_path:
        doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": mach, "threads": threads, "quick": quick, "clock": H.CONFIG["clock"], "roofs": rf,
               "references": refs,
               "benchmarks": status, "checks": [list(map(str, c)) for c in H.CHECKS],
               "results": [r.as_dict() for r in results]}
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=1, default=str)
        say(f"wrote {json_path}")
    if plot_path:
        say(plot(results, plot_path))
    if earlier is not None:
        say("")
        say(compare_runs(earlier, {"machine": mach, "clock": H.CONFIG["clock"],
                                   "results": [r.as_dict() for r in results]}, compare_to))
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------- --compare-to

SLOWER = 1.10                # a row this much slower than in the earlier run is flagged


def load_run(path):
    """An earlier `tracejit bench --json` file: {"machine", "results", ...}."""
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ValueError("not a `tracejit bench --json` file (no results list)")
    return doc


def compare_runs(before, now, label="the earlier run"):
    """A Markdown table of the rows both runs measured: the earlier and the new median and their ratio (new /
    earlier: > 1 is slower), rows SLOWER or more flagged; a note when the two runs name different CPUs."""
    H = _harness()
    key = lambda r: (r.get("bench"), r.get("name"), r.get("system"), str(r.get("size")))  # noqa: E731
    old = {key(r): r for r in before["results"] if r.get("median")}
    lines = [f"compared with {label} ({before.get('date', 'date unknown')}): time now / time then (> 1 is slower)"]
    m0, m1 = before.get("machine", {}), now.get("machine", {})
    if H.machine_line(m0) != H.machine_line(m1):
        lines.append(f"note: the earlier run was on {H.machine_line(m0)}, this one on {H.machine_line(m1)}: "
                     f"ratios across machines say little")
    if before.get("clock", "wall") != now.get("clock", "wall"):
        lines.append(f"note: the earlier run timed by the {before.get('clock', 'wall')} clock, this one by the "
                     f"{now.get('clock', 'wall')} clock")
    head = len(lines)
    lines += ["", "| benchmark | system | size | then | now | now / then |", "|---|---|---|---|---|---|"]
    ratios, slower = [], []
    for r in now["results"]:
        o = old.get(key(r))
        if o is None or not r.get("median"):
            continue
        q = r["median"] / o["median"]
        ratios.append(q)
        bench = r["bench"] + ("/" + r["name"] if r.get("name") and r["name"] != "-" else "")
        flag = " **slower**" if q >= SLOWER else ""
        if flag:
            slower.append(f"{bench} {r['system']} {r['size']}")
        lines.append(f"| {bench} | {r['system']} | {r['size']} | {_fmt_time(o['median'])} | "
                     f"{_fmt_time(r['median'])} | {q:.2f}x{flag} |")
    if not ratios:
        return "\n".join(lines[:head] + ["no rows in common with the earlier run"])
    geo = math.exp(sum(math.log(q) for q in ratios) / len(ratios))
    lines += ["", f"{len(ratios)} rows in common; geometric mean now / then {geo:.2f}x; "
                  f"{len(slower)} row(s) {SLOWER:.2f}x or more slower" + (": " + "; ".join(slower) if slower else "")]
    return "\n".join(lines)


def _kwargs(run, name, quick):
    import inspect
    want = dict(RUN_KWARGS.get(name, {}))
    if quick:
        want.update(QUICK_KWARGS.get(name, {}))
    try:
        params = inspect.signature(run).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in want.items() if k in params}


def _has_run(name):
    """Cheap look (no import) whether a bench module defines run(): the default suite runs only those."""
    try:
        with open(os.path.join(BENCHES, f"bench_{name}.py")) as f:
            return "\ndef run(" in f.read()
    except OSError:
        return False


# ----------------------------------------------------------------------------------------------- plot

def plot(results, path):
    """Speedup vs the baseline per benchmark (vs size where a workload has several sizes) as a PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"--plot: matplotlib is not installed (pip install matplotlib); {path} not written"
    groups = {}
    for r in results:
        if r.median is not None and r.speedup is not None:
            groups.setdefault((r.bench, r.name), []).append(r)
    if not groups:
        return "--plot: nothing to plot"
    # one workload at several sizes: speedup vs size (a line per system); workloads with one size each: one
    # panel of bars for the benchmark; workloads that each come at several sizes: a panel of bars per size
    panels = {}
    by_bench = {}
    for (bench, name), rs in groups.items():
        by_bench.setdefault(bench, {})[name] = rs
    for bench, work in by_bench.items():
        sizes_of = {name: list(dict.fromkeys(r.size for r in rs)) for name, rs in work.items()}
        if len(work) == 1 and len(next(iter(sizes_of.values()))) > 1:
            name, rs = next(iter(work.items()))
            panels[(bench, name, "line")] = rs
        elif all(len(v) == 1 for v in sizes_of.values()):
            panels[(bench, None, "bars")] = [r for rs in work.values() for r in rs]
        else:
            for rs in work.values():
                for r in rs:
                    panels.setdefault((bench, r.size, "bars"), []).append(r)
    n = len(panels)
    cols = min(3, n)
    rows_ = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_, cols, figsize=(6 * cols, 4 * rows_), squeeze=False)
    for ax, ((bench, key, kind), rs) in zip(axes.flat, panels.items()):
        systems = list(dict.fromkeys(r.system for r in rs))
        base = rs[0].baseline
        if kind == "line":              # one workload at several sizes
            sizes = list(dict.fromkeys(r.size for r in rs))
            for s in systems:
                pts = [(sizes.index(r.size), r.speedup) for r in rs if r.system == s]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
            ax.set_xticks(range(len(sizes)))
            ax.set_xticklabels(sizes, rotation=30, fontsize=8)
            ax.set_xlabel("size", fontsize=8)
            ax.set_title(f"{bench}/{key}", fontsize=10)
        else:                           # workloads side by side, one bar per system
            work = list(dict.fromkeys(r.name for r in rs))
            w = 0.8 / max(1, len(systems))
            for j, s in enumerate(systems):
                xs, ys = [], []
                for i, wk in enumerate(work):
                    v = next((r.speedup for r in rs if r.system == s and r.name == wk), None)
                    if v is not None:
                        xs.append(i + j * w)
                        ys.append(v)
                ax.bar(xs, ys, width=w, label=s)
            ax.set_xticks([i + w * (len(systems) - 1) / 2 for i in range(len(work))])
            ax.set_xticklabels(work, rotation=30, fontsize=8)
            sizes = list(dict.fromkeys(r.size for r in rs))
            ax.set_title(f"{bench} ({', '.join(sizes)})", fontsize=10)
        vals = [r.speedup for r in rs]
        if max(vals) / min(vals) > 4:
            ax.set_yscale("log")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_ylabel(f"speedup vs {base}", fontsize=8)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle("tracejit bench: speedup vs baseline (same run; higher is faster)")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return f"wrote {path}"

