"""torch.backends' switches (`torch.backends.cudnn.benchmark = True`, `torch.backends.mps.is_available()`, ...),
for PyTorch programs run with `import tracejit as torch`. tracejit has neither cuDNN, oneDNN nor MPS and
computes float32 matmuls in float32 (no TF32): the switches are kept and read back, and change nothing."""
import contextlib
import types


def _namespace(name, doc, **attrs):
    ns = types.ModuleType("tracejit.backends." + name, doc)
    vars(ns).update(attrs)
    return ns


@contextlib.contextmanager
def _flags(ns, **values):
    """Set ns's flags for the block, back as they were after it (torch.backends.cudnn.flags)."""
    old = {k: getattr(ns, k) for k in values}
    vars(ns).update(values)
    try:
        yield
    finally:
        vars(ns).update(old)


def _cpu_capability():
    from tracejit.kernels.cpu import vector_info
    return {"AVX-512": "AVX512", "AVX2": "AVX2"}.get(vector_info()["isa"], "DEFAULT")


cudnn = _namespace("cudnn", "torch.backends.cudnn: no cuDNN here.", enabled=True, benchmark=False,
                   deterministic=False, allow_tf32=True, is_available=lambda: False, version=lambda: None)
cudnn.flags = lambda **values: _flags(cudnn, **values)
mkldnn = _namespace("mkldnn", "torch.backends.mkldnn: no oneDNN here.", enabled=True, is_available=lambda: False)
mps = _namespace("mps", "torch.backends.mps: no Metal here.", is_available=lambda: False, is_built=lambda: False)
openmp = _namespace("openmp", "torch.backends.openmp.", is_available=lambda: True)
cpu = _namespace("cpu", "torch.backends.cpu: the vector instruction set the kernels are compiled for.",
                 get_cpu_capability=_cpu_capability)
_sdp = {"flash": False, "mem_efficient": False, "math": True, "cudnn": False}
cuda = _namespace(
    "cuda", "torch.backends.cuda: matmul precision switches and the attention backends' switches.",
    matmul=_namespace("cuda.matmul", "", allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                      allow_bf16_reduced_precision_reduction=True),
    is_built=lambda: True,
    **{f"enable_{k}_sdp": (lambda on, k=k: _sdp.__setitem__(k, bool(on))) for k in _sdp},
    **{f"{k}_sdp_enabled": (lambda k=k: _sdp[k]) for k in _sdp})
