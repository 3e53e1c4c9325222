#!/usr/bin/env bash
# One H100, one call: main (ea5bfa1's product code) against the same tree with the tensor-core
# decode's S = Q Kᵀ summing q's low 16-bit part in accumulators of its own (four MMA chains a
# tile instead of two). First the context-parallel and pool-share tests on main (cp.log),
# then the decode alone over TinyLlama's heads at 32,768 keys for each build
# (decode_alone.txt), then the second build's decode and context-parallel tests and tg128
# (F16, Q8_0, F16 at depth 32768), the builds alternated twice (ab.txt); last, main's one-row
# linears on a TinyLlama layer (gemv1.txt) and cuBLAS's f16 GEMV on the same shapes (gemv_peer.txt).
# From the repository root, MAIN and SPLIT folders holding the two builds (bench/cuda/bundle.sh bins):
#   bench/results/cuda/h100-2026-12-07-qk-split/run.sh MAIN SPLIT
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$1:/usr/local/cuda/lib64
KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$1/test_gpu" --gtest_filter='*GpuContextParallel*:GpuPoolShare.*:GpuTensorParallel.*' > "$HERE/cp.log" 2>&1
for b in "$1" "$2"; do echo "== decode alone $b"; "$b/bench_cuda_decode" 20 tinyllama | tail -12; done > "$HERE/decode_alone.txt"
KVF_AB_FILTER='*Decode*:*ContextParallel*' bench/cuda/ab_tg.sh "$1" "$2" > "$HERE/ab.txt" 2>&1
"$1/bench_cuda_gemv" 1 | tail -25 > "$HERE/gemv1.txt"
python3 bench/cuda/gemv_peer.py > "$HERE/gemv_peer.txt" 2>&1
