"""Settings of the compiled face (module attributes; change them at run time)."""
import os

cache_size_limit = int(os.environ.get("TRACEJIT_CACHE_SIZE_LIMIT", "8"))   # compiled signatures per function
verify_ir = os.environ.get("TRACEJIT_VERIFY_IR", "0") == "1"              # run the IR verifier after each pass
default_backend = os.environ.get("TRACEJIT_BACKEND", "numba")          # "interpreter": the reference oracle
fastmath = False                                                           # opt-in for the numba backend
# intermediates whose lifetimes do not overlap share memory (passes/buffers.py); "0": one buffer each
share_buffers = os.environ.get("TRACEJIT_SHARE_BUFFERS", "1") == "1"
# a kernel numba has not compiled before runs lowered by backends/numba_cpu/direct.py until numba's is ready
direct_kernels = os.environ.get("TRACEJIT_DIRECT_KERNELS", "1") == "1"
