"""`tracejit bench`: runs the benchmark scripts in benches/ (each checks its systems agree before timing)."""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHES = os.path.join(HERE, "benches")


def available():
    if not os.path.isdir(BENCHES):
        return []
    return sorted(f[6:-3] for f in os.listdir(BENCHES) if f.startswith("bench_") and f.endswith(".py"))


def _load(name):
    spec = importlib.util.spec_from_file_location(f"tracejit_bench_{name}", os.path.join(BENCHES, f"bench_{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_suite(names=None, quick=False, json_path=None):
    names = list(names or available())
    if not names:
        print("no benchmarks found (benches/ is not next to the package: run from a source checkout)")
        return 1
    results = {}
    for name in names:
        if name not in available():
            print(f"unknown benchmark {name!r}; available: {', '.join(available())}")
            return 2
        mod = _load(name)
        if not hasattr(mod, "run"):
            print(f"== {name}: no run() function; run `python benches/bench_{name}.py` ==")
            continue
        print(f"== {name} ==")
        sys.stdout.flush()
        results[name] = mod.run(quick=quick)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0
