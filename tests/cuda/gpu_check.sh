#!/bin/bash
# The CUDA checks on a machine with an NVIDIA GPU and numba-cuda installed, from the repository root:
#   bash tests/cuda/gpu_check.sh [OUTDIR]
# 1. the machine (GPU, CPU model and vector ISA, LLVM host CPU, package versions);
# 2. tests/cuda_sim on the real GPU (TRACEJIT_TEST_GPU=1; the same tests the simulator runs, at the same sizes);
# 3. benches/bench_gpu.py (fused chain vs the copy roof, MLP step eager vs traced on the GPU);
# 4. on a CPU with AVX-512 (issues 17 and 18): benches/bench_interleave.py with the AVX-512 kernels, the conv layers
#    and the ResNet step with 16- and 8-float convolution tiles (before the GPU tests, whose compiles would disturb
#    them); after those, the loop knobs forced to AVX2 (TRACEJIT_VECTOR_BITS=256), the long chains and the fused
#    chain against numpy, torch.compile and jax.jit on the CPU.
# Nothing is installed: the checkout is put on PYTHONPATH. Logs go to OUTDIR (default ./gpu_check_out).
OUT=${1:-gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TRACEJIT_CACHE_DIR=${TRACEJIT_CACHE_DIR:-/tmp/tj_cache}
PY=${PY:-python3}
{
  nvidia-smi -L
  lscpu | grep -E "^Model name|^CPU\(s\)"
  grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  $PY - <<'PYEOF'
import numpy, numba, llvmlite, llvmlite.binding as ll
try:
    import numba_cuda; nc = numba_cuda.__version__
except Exception as e:
    nc = f"none ({e})"
print("numpy", numpy.__version__, "numba", numba.__version__, "llvmlite", llvmlite.__version__, "numba-cuda", nc)
print("LLVM host CPU", ll.get_host_cpu_name())
import tracejit
print("cuda available", tracejit.cuda.is_available(), "simulator", tracejit.cuda.simulator())
PYEOF
} 2>&1 | tee "$OUT/machine.txt"
AVX512=$(grep -q -w avx512f /proc/cpuinfo && [ -z "$NO_CPU" ] && echo 1)
ic_ab() {   # bits configs
  echo "== CPU loop knobs, TRACEJIT_VECTOR_BITS=$1"
  TRACEJIT_VECTOR_BITS=$1 timeout ${IC_TIMEOUT:-110} $PY benches/bench_interleave.py --configs "$2" 2>&1 \
    | tee "$OUT/interleave_$1.log" | tail -24
}
[ -n "$AVX512" ] && ic_ab 512 '[{}, {"INTERLEAVE": 8}, {"INTERLEAVE": 2}, {"STAGE_HEAVY": 2}, {}]'
if [ -n "$AVX512" ]; then   # tanh and sigmoid without a division (issue 18's two misses at 512 bits)
  echo "== tanh and sigmoid: division or Newton steps"
  timeout ${IC_TIMEOUT:-100} $PY benches/bench_vmath_recip.py 2>&1 | tee "$OUT/vmath_recip.log" | tail -9
fi
if [ -n "$AVX512" ]; then   # the conv tiles of 16 floats against those of 8, per layer and in the step
  for lanes in 16 8; do
    echo "== conv layers and the ResNet step, TRACEJIT_CONV_LANES=$lanes"
    TRACEJIT_CONV_LANES=$lanes timeout ${CONV_TIMEOUT:-90} $PY benches/bench_conv_layers.py 2>&1 \
      | tee "$OUT/conv_layers_$lanes.log" | tail -22
    TRACEJIT_CONV_LANES=$lanes timeout ${CONV_TIMEOUT:-90} $PY -m tracejit bench resnet_step --threads 1 \
      $([ $lanes = 8 ] && echo "--compare numpy") 2>&1 | tee "$OUT/resnet_$lanes.log" | grep "sgd step"
  done
fi
echo "== tests/cuda_sim on the GPU"
TRACEJIT_TEST_GPU=1 timeout ${TEST_TIMEOUT:-300} $PY -m pytest -q -o addopts= -p no:cacheprovider -n ${WORKERS:-8} \
  -W ignore::RuntimeWarning tests/cuda_sim 2>&1 | tee "$OUT/cuda_tests.log" | tail -40
echo "== benches/bench_gpu.py"
timeout ${BENCH_TIMEOUT:-150} $PY benches/bench_gpu.py 2>&1 | tee "$OUT/bench_gpu.log" | tail -40
if [ -n "$AVX512" ]; then
  ic_ab 256 '[{}, {"INTERLEAVE": 4}, {}]'
  echo "== CPU long chains and fused chain (default: AVX-512 kernels)"
  timeout ${CPU_TIMEOUT:-110} $PY -m tracejit bench long_chains --quick --json "$OUT/long_chains.json" 2>&1 \
    | tee "$OUT/long_chains.log" | tail -24
  timeout ${CPU_TIMEOUT:-110} $PY benches/bench_fused_chain.py --sizes 4M,16M 2>&1 | tee "$OUT/fused_chain.log" | tail -20
fi
