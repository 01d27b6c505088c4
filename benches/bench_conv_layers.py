"""The ResNet bench's 3x3 convolution layers one at a time (batch 64: 16 channels at 16x16, 32 at 8x8, 64 at 4x4,
stride 1, and the two stride-2 downsampling layers), tracejit's kernels (kernels/cpu/convtile.py: the direct tiles,
Winograd's F(2x2, 3x3) for the stride-1 layers) against torch's conv2d (NCHW and channels_last) where torch is
installed: forward, input gradient and weight gradient, one thread, medians in ms and GFLOP/s (the direct
convolution's multiply-adds: Winograd's rate counts the work it avoids), each checked against the float64 sums
first. --imagenet: ImageNet ResNet-18's stride-1 layers instead (8 images: 64 channels at 56x56, 128 at 28x28, 256
at 14x14). For comparing the tile widths per CPU: run it as it is and with TRACEJIT_CONV_LANES=8 (or 16) on the
same machine.

    python benches/bench_conv_layers.py [--repeat 21] [--imagenet]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

from tracejit.kernels.cpu import convtile  # noqa: E402

LAYERS = [(16, 16, 16, 1), (32, 32, 8, 1), (64, 64, 4, 1), (16, 32, 16, 2), (32, 64, 8, 2)]   # C, O, H, stride
IMAGENET = [(64, 64, 56, 1), (128, 128, 28, 1), (256, 256, 14, 1)]


def _torch_fns(x, w, g, stride, memory_format):
    import torch
    import torch.nn.functional as F
    xt = torch.tensor(x).contiguous(memory_format=memory_format).requires_grad_(True)
    wt = torch.tensor(w).requires_grad_(True)
    gt = torch.tensor(g).contiguous(memory_format=memory_format)

    def fwd():
        with torch.no_grad():
            return F.conv2d(xt, wt, stride=stride, padding=1)

    y = F.conv2d(xt, wt, stride=stride, padding=1)

    def grads():                # (the backward alone: the graph is kept)
        return torch.autograd.grad(y, (xt, wt), gt, retain_graph=True)
    return fwd, grads


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--imagenet", action="store_true", help="ImageNet ResNet-18's stride-1 layers, 8 images")
    a = p.parse_args()
    layers, N = (IMAGENET, 8) if a.imagenet else (LAYERS, 64)
    H.pin_threads(1)
    m = H.machine()
    print(H.machine_line(m), f"conv tile: {convtile.LANES} floats per vector, {convtile.MR} rows")
    have_torch = H._importable("torch")
    if have_torch:
        import torch
        torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"{'layer':22} {'what':6} {'tracejit ms':>11} {'GFLOP/s':>8} {'torch ms':>9} {'torch CL ms':>11}")
    for C, O, Hs, s in layers:
        x = rng.standard_normal((N, C, Hs, Hs), dtype=np.float32)
        w = rng.standard_normal((O, C, 3, 3), dtype=np.float32) * 0.1
        OH = (Hs + 2 - 3) // s + 1
        g = rng.standard_normal((N, O, OH, OH), dtype=np.float32)
        st, pd, dl = (s, s), (1, 1), (1, 1)
        xp = convtile.planes(x, st, pd)
        ours = {"fwd": lambda: convtile.forward_from_planes(xp, w, None, st, dl, (OH, OH)),
                "igrad": lambda: convtile.input_grad(g, w, x.shape, st, pd, dl),
                "wgrad": lambda: convtile.weight_grad_from_planes(xp, g, w.shape, st, dl)}
        ref = [t.numpy() for t in _torch_fns(x.astype(np.float64), w.astype(np.float64), g.astype(np.float64), s,
                                              torch.contiguous_format)[1]()] if have_torch else None
        if ref is not None:
            y64 = _torch_fns(x.astype(np.float64), w.astype(np.float64), g, s, torch.contiguous_format)[0]().numpy()
            for what, want in (("fwd", y64), ("igrad", ref[0]), ("wgrad", ref[1])):
                got = ours[what]()
                err = np.abs(got - want).max() / np.abs(want).max()
                assert err < 1e-5, (C, O, Hs, s, what, err)
        flops = 2 * N * O * OH * OH * C * 9
        theirs = {}
        if have_torch:
            for fmt_name, fmt in (("nchw", torch.contiguous_format), ("cl", torch.channels_last)):
                fwd, grads = _torch_fns(x, w, g, s, fmt)
                theirs[fmt_name] = {"fwd": fwd, "grads": grads}
        for what in ("fwd", "igrad", "wgrad", "grads"):
            if what == "grads":
                f = lambda: (ours["igrad"](), ours["wgrad"]())      # noqa: E731
                n_flops = 2 * flops
            else:
                f, n_flops = ours[what], flops
            t = _median(f, a.repeat)
            tt = [(_median(theirs[k]["fwd" if what == "fwd" else "grads"], a.repeat) if have_torch and
                   what in ("fwd", "grads") else None) for k in ("nchw", "cl")]
            col = lambda v: f"{v * 1e3:11.3f}" if v is not None else f"{'':>11}"      # noqa: E731
            print(f"{C:3d}->{O:3d} {Hs:2d}x{Hs:<2d} s{s}        {what:6} {t * 1e3:11.3f} {n_flops / t / 1e9:8.1f} "
                  f"{col(tt[0])[2:]:>9} {col(tt[1])}")


def _median(f, repeat):
    f()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


if __name__ == "__main__":
    main()
