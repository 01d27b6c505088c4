"""tracejit.amp (autocast, GradScaler), torch.cuda.amp, torch.backends' switches and the float32 matmul
precision / determinism switches: PyTorch's behaviour where tracejit has a counterpart (GradScaler's scale, skipped
steps and errors, against PyTorch's own GradScaler on "cpu"), accepted and read back where it has none."""
import warnings

import numpy as np
import pytest

import tracejit as tj


def _train(lib, scaler, grads_by_step):
    """SGD steps of a 3-parameter model whose gradients are set by hand (an inf at some steps), through `scaler`:
    the scale after each update and the final parameters."""
    w = lib.nn.Parameter(lib.tensor([1.0, 2.0, 3.0]))
    opt = lib.optim.SGD([w], lr=0.5, momentum=0.9)
    scales = []
    for g in grads_by_step:
        opt.zero_grad()
        loss = scaler.scale((w * lib.tensor(np.float32(1.0))).sum())
        loss.backward()
        with lib.no_grad():
            w.grad.copy_(lib.tensor(np.asarray(g, np.float32)) * scaler.get_scale())
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, w.detach().numpy()


def test_grad_scaler_matches_pytorch_skipping_overflowing_steps():
    torch = pytest.importorskip("torch")
    grads = [[1, 2, 3], [0.5, np.inf, 0], [1, 1, 1], [np.nan, 0, 0], [2, 2, 2], [1, 0, 1], [3, 2, 1]]
    kw = dict(init_scale=1024.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=2)
    ts, tw = _train(torch, torch.amp.GradScaler("cpu", **kw), grads)
    js, jw = _train(tj, tj.amp.GradScaler("cpu", **kw), grads)
    assert js == ts                                        # cut after each overflow, grown after 2 clean steps
    np.testing.assert_allclose(jw, tw, rtol=1e-6)         # the overflowing steps skipped, the others unscaled


def test_grad_scaler_errors_state_and_unscale():
    s = tj.amp.GradScaler("cpu", init_scale=8.0, growth_interval=3)
    w = tj.nn.Parameter(tj.ones(2))
    opt = tj.optim.SGD([w], lr=1.0)
    s.scale([w.sum(), (w * 2).sum()])[1].backward()
    s.unscale_(opt)
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])   # 8 * 2 unscaled
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        s.unscale_(opt)
    s.update()
    assert s.state_dict() == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                              "_growth_tracker": 1}
    s2 = tj.amp.GradScaler("cpu")
    s2.load_state_dict(s.state_dict())
    assert s2.get_scale() == 8.0 and s2.state_dict() == s.state_dict()
    with pytest.raises(ValueError, match="Tensor or an iterable"):
        s.scale(3.0)
    with pytest.raises(ValueError, match="growth factor"):
        tj.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(RuntimeError, match="device type"):
        tj.amp.GradScaler("gpu")


def test_cuda_grad_scaler_without_a_gpu_disables_itself_and_passes_through():
    if tj.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        s = tj.amp.GradScaler()
    with pytest.warns(FutureWarning), pytest.warns(UserWarning):
        s2 = tj.cuda.amp.GradScaler(enabled=True)
    w = tj.nn.Parameter(tj.ones(2))
    opt = tj.optim.SGD([w], lr=0.5)
    for sc in (s, s2):
        opt.zero_grad()
        loss = sc.scale(w.sum())
        assert not sc.is_enabled() and sc.get_scale() == 1.0 and sc.state_dict() == {}
        loss.backward()
        sc.step(opt)
        sc.update()
    np.testing.assert_array_equal(w.detach().numpy(), [0.0, 0.0])     # two plain steps of lr 0.5


def test_autocast_runs_in_full_precision():
    x = tj.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tj.autocast("cpu", dtype=tj.float16, enabled=False):     # how scripts switch it off: silent
            y = x @ x.T
        with tj.cuda.amp.autocast(enabled=False):
            pass
    assert y.dtype == tj.float32 and not tj.is_autocast_enabled()
    tj.amp._WARNED.clear()
    with pytest.warns(UserWarning, match="no autocast"):
        ctx = tj.autocast("cuda")

    @ctx
    def f(a):
        return a @ a.T
    assert f(x).dtype == tj.float32
    with pytest.raises(RuntimeError, match="device type"):
        tj.autocast("tpu")


def test_backends_switches_are_kept():
    from tracejit.kernels.cpu import vector_info
    cudnn = tj.backends.cudnn
    cudnn.benchmark = True
    with cudnn.flags(enabled=False, deterministic=True):
        assert not cudnn.enabled and cudnn.deterministic
    assert cudnn.enabled and not cudnn.deterministic and cudnn.benchmark
    cudnn.benchmark = False
    tj.backends.cuda.matmul.allow_tf32 = True
    tj.backends.cuda.matmul.allow_tf32 = False
    tj.backends.cuda.enable_flash_sdp(False)
    assert not tj.backends.cuda.flash_sdp_enabled() and tj.backends.cuda.math_sdp_enabled()
    assert not tj.backends.mps.is_available() and not cudnn.is_available()
    isa = vector_info()["isa"]
    assert tj.backends.cpu.get_cpu_capability() == {"AVX-512": "AVX512", "AVX2": "AVX2"}.get(isa, "DEFAULT")
    assert tj.get_float32_matmul_precision() == "highest"
    tj.set_float32_matmul_precision("high")
    assert tj.get_float32_matmul_precision() == "high"
    with pytest.warns(UserWarning, match="not one of"):
        tj.set_float32_matmul_precision("fast")
    tj.set_float32_matmul_precision("highest")
    tj.use_deterministic_algorithms(True, warn_only=True)
    assert tj.are_deterministic_algorithms_enabled() and tj.is_deterministic_algorithms_warn_only_enabled()
    tj.use_deterministic_algorithms(False)
    assert not tj.are_deterministic_algorithms_enabled()
