#!/usr/bin/env bash
# One H100. Calls 1 and 2 on one machine, the build of main d0ffaa1 in BIN (bench/cuda/bundle.sh
# bins); calls 3-5 on later machines, the softmax state as (m, l) pairs (main 8d8aa45):
# test_cuda_ml.log (CudaKvParallelDecode.* and CudaDecode.*: the merged ranks 4.24e-8 from
# the one decode), steps_diag.log (every third step of GpuContextParallel's 40, logits of the
# ranks against the whole model and both against the CPU executor, printed by a diagnostic
# build of the test), test_gpu_cp.log (GpuContextParallel.* as committed). Last call, main
# 1d73fc3: test_gpu_final.log (463 passed) and test_cuda_final.log (27 passed), the suites whole. Call 1: test_cuda whole (test_cuda.log: 27 passed, CudaKvParallelDecode.* among them)
# and test_gpu whole (460 passed; its log did not come back). Call 2 (cp1..3.json): the
# built-in model's 300 greedy tokens on the GPU whole and over 2 and 3 context-parallel ranks
# sharing the one GPU: the same ids (the first call's cp runs were refused: an f32 KV cache
# does not run on the decode kernel, so --kv-type f16). From the repository root:
#   bench/results/cuda/h100-2026-12-07-cp-ranks/run.sh BIN
HERE=$(cd "$(dirname "$0")" && pwd)
KVF_REQUIRE_GPU=1 "$1/test_cuda" > "$HERE/test_cuda.log" 2>&1
KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$1/test_gpu"
for cp in 1 2 3; do
  "$1/kvforge" generate -p "And God said" -n 300 --device cuda --kv-type f16 --cp $cp --json > "$HERE/cp$cp.json"
done
python3 -c "import json;a=[json.load(open('$HERE/cp%d.json'%c))['ids'] for c in (1,2,3)];print('cp2 equal', a[0]==a[1], 'cp3 equal', a[0]==a[2])"
KVF_REQUIRE_GPU=1 "$1/test_cuda" --gtest_filter='CudaKvParallelDecode.*:CudaDecode.*' > "$HERE/test_cuda_ml.log" 2>&1
KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$1/test_gpu" --gtest_filter='GpuContextParallel.*' > "$HERE/test_gpu_cp.log" 2>&1
