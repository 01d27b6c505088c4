"""Data-parallel training step on MPI: step time and scaling for 1 and 2 processes (one thread each), with the
communication shown.

    python benches/bench_ddp.py [--quick] [--batch 64] [--hidden 1024] [--bucket-cap-mb 4]

starts `mpiexec -n 1` and `mpiexec -n 2` of itself. Global batch `--batch` (each of N ranks takes batch/N), an
MLP 512-hidden-hidden-hidden-10 (ReLU, cross-entropy, SGD), float32. On each rank, interleaved round by round
(every item after a barrier, so the ranks start it together; medians over the rounds):

  compute        the traced DDP step on a process group of this rank alone (`new_group([rank])`): the same
                 program, its all-reduces a local copy (no other rank to wait for or to exchange with)
  no DDP         the traced step of the model without DDP (its weight updates fuse with the gradient products,
                 which DDP's must materialize to send them)
  all-reduce     the DDP buckets' all-reduces alone (the same sizes, started nonblocking, then waited)
  DDP traced     the traced DDP step: the bucket all-reduces start during backward, waited after it
  DDP eager      the same step eagerly

Overlap is real when `DDP traced` < `compute` + `all-reduce`. Scaling efficiency = T(1 process, batch B) /
(2 * T(2 processes, batch B/2 each)) for the traced DDP step. Before timing, the ranks check that their
parameters are equal after a traced and an eager DDP step and equal those of one eager step without DDP.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.path.insert(0, ROOT)
    import numpy as np
    import tracejit as torch
    import tracejit.distributed as dist
    import tracejit.nn as nn
    import tracejit.nn.functional as F
    from tracejit.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    b = args.batch // n
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.standard_normal((args.batch, 512)).astype(np.float32))
    Y = torch.tensor(rng.integers(0, 10, args.batch))
    x, y = X[r * b:(r + 1) * b].contiguous(), Y[r * b:(r + 1) * b].contiguous()

    def mlp():
        torch.manual_seed(0)
        h = args.hidden
        return nn.Sequential(nn.Linear(512, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                             nn.Linear(h, 10))

    def stepper(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()
        return step

    plain, m_tr, m_eg, m_loc = mlp(), mlp(), mlp(), mlp()
    ddp_tr = DDP(m_tr, bucket_cap_mb=args.bucket_cap_mb)
    ddp_eg = DDP(m_eg, bucket_cap_mb=args.bucket_cap_mb)
    alone = [dist.new_group([q]) for q in range(n)][r]        # (every rank takes part in creating every group)
    ddp_loc = DDP(m_loc, bucket_cap_mb=args.bucket_cap_mb, process_group=alone)
    compute = torch.trace(stepper(ddp_loc))
    no_ddp = torch.trace(stepper(plain))
    traced = torch.trace(stepper(ddp_tr))
    eager = stepper(ddp_eg)
    # the check: one step each from the same weights; DDP's average over ranks of batch-b gradients equals the
    # batch-B gradient of one process
    ref = mlp()
    stepper(ref)(X, Y)
    traced(x, y)
    eager(x, y)
    for a, c, q in zip(m_tr.parameters(), m_eg.parameters(), ref.parameters()):
        a, c, q = a.detach().numpy(), c.detach().numpy(), q.detach().numpy()
        assert np.allclose(a, q, rtol=1e-4, atol=1e-6), "traced DDP differs from 1 process"
        assert np.allclose(c, q, rtol=1e-4, atol=1e-6), "eager DDP differs from 1 process"
    flats = [torch.zeros(sum(ddp_tr._params[i].numel() for i in idx)) for idx in ddp_tr._buckets]

    def allreduce_alone():
        works = [dist.all_reduce(f, dist.ReduceOp.AVG, async_op=True) for f in flats]
        for w in works:
            w.wait()

    items = {"compute": lambda: compute(x, y), "no DDP": lambda: no_ddp(x, y), "all-reduce": allreduce_alone,
             "DDP traced": lambda: traced(x, y), "DDP eager": lambda: eager(x, y)}
    for f in items.values():       # warm up (compiles, first-step state)
        for _ in range(2):
            f()
    times = {k: [] for k in items}
    for _ in range(args.rounds):
        for k, f in items.items():
            dist.barrier()
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    # a rank's time is the step's time when it is the slower one: take the max over ranks per round
    mine = torch.tensor(np.array([times[k] for k in items], np.float64))
    every = [torch.zeros_like(mine) for _ in range(n)]
    dist.all_gather(every, mine)
    worst = np.max([e.numpy() for e in every], 0)
    if r == 0:
        print("RESULT " + json.dumps({"n": n, "batch": args.batch, "buckets": [len(i) for i in ddp_tr._buckets],
                                      "bucket_mb": [round(f.numel() * 4 / 2**20, 2) for f in flats],
                                      "median_ms": {k: 1e3 * statistics.median(worst[j]) for j, k in enumerate(items)},
                                      "q1_ms": {k: 1e3 * float(np.percentile(worst[j], 25)) for j, k in enumerate(items)},
                                      "q3_ms": {k: 1e3 * float(np.percentile(worst[j], 75)) for j, k in enumerate(items)}}),
              flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--bucket-cap-mb", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--procs", default="1,2")
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 10 if args.quick else 40
    if args.worker:
        return worker(args)
    sys.path.insert(0, os.path.join(ROOT, "tests", "distributed"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import harness as H
    from mpi_launch import _flags, mpiexec
    exe = mpiexec()
    if exe is None:
        print("MPI is not installed: pip install 'tracejit[mpi]' (mpi4py and mpich)")
        return 1
    res = {}
    for n in map(int, args.procs.split(",")):
        cmd = [exe] + _flags(exe) + ["-n", str(n), sys.executable, os.path.abspath(__file__), "--worker",
                                     "--batch", str(args.batch), "--hidden", str(args.hidden),
                                     "--bucket-cap-mb", str(args.bucket_cap_mb), "--rounds", str(args.rounds)]
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        if p.returncode or line is None:
            print(p.stdout[-3000:], p.stderr[-3000:])
            return 1
        res[n] = json.loads(line[7:])
    print(f"CPU: {H.machine_line(H.machine())}")
    print(f"MLP 512-{args.hidden}-{args.hidden}-{args.hidden}-10, global batch {args.batch}, SGD, float32, one thread "
          f"per process; {args.rounds} rounds, medians (max over ranks per round), IQR in brackets")
    for n, d in res.items():
        print(f"\n{n} process{'es' if n > 1 else ''} (batch {args.batch // n} each), buckets of "
              f"{d['bucket_mb']} MiB:")
        for k, v in d["median_ms"].items():
            print(f"  {k:12s} {v:8.2f} ms   [{d['q1_ms'][k]:.2f} - {d['q3_ms'][k]:.2f}]")
        m = d["median_ms"]
        if n > 1:
            s = m["compute"] + m["all-reduce"]
            print(f"  compute + all-reduce = {s:.2f} ms; DDP traced = {m['DDP traced']:.2f} ms "
                  f"({'overlapped: ' + format(s - m['DDP traced'], '.2f') + ' ms hidden' if m['DDP traced'] < s else 'no overlap'})")
    if 1 in res and 2 in res:
        for k in ("DDP traced", "DDP eager"):
            t1, t2 = res[1]["median_ms"][k], res[2]["median_ms"][k]
            print(f"\n{k}: speedup {t1 / t2:.2f}x on 2 processes, scaling efficiency {t1 / (2 * t2):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
