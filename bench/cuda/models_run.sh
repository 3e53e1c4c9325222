#!/usr/bin/env bash
# Whole models on the GPU, in one run on the GPU machine: the gpu test suite (test_gpu, with
# KVF_REQUIRE_GPU=1 so that a missing GPU fails it), then `kvforge bench e2e --device cuda`
# on TinyLlama-1.1B-shaped GGUFs with seeded random weights (F16 and Q8_0, written here by
# `kvforge convert`): pp512, pp4096, tg128, Q8_0 tg128, tg128 at depths 8192 and 32768;
# then, when given, bench_cuda_gemv (the decode linears' kernel shapes on a TinyLlama layer,
# 1 and 8 rows). Logs go to $OUT (default build-cuda-out/).
#   usage: bench/cuda/models_run.sh [KVFORGE] [TEST_GPU] [BENCH_CUDA_GEMV]
# The binaries are built on a machine with the Debian packages (they need none of the -dev
# ones here); run from the repository root so that the tests find tests/fixtures.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KVFORGE=${1:-$ROOT/build/src/kvforge}
TEST_GPU=${2:-$ROOT/build/tests/test_gpu}
GEMV=${3:-$ROOT/build/bench/bench_cuda_gemv}
OUT=${OUT:-$ROOT/build-cuda-out}
MODELS=${KVF_BENCH_MODELS:-/tmp/kvf-tinyllama}
mkdir -p "$OUT" "$MODELS"
# The binaries link cuBLASLt, which the CUDA toolkit's lib64 holds.
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee "$OUT/env.txt"
KVF_SOURCE_DIR=$ROOT KVF_REQUIRE_GPU=1 "$TEST_GPU" > "$OUT/test_gpu.log" 2>&1
test_rc=$?
grep -E "^\[ +(FAILED|PASSED) |Failure" "$OUT/test_gpu.log" | head -40
echo "test_gpu rc=$test_rc"

for t in f16 q8_0; do
  [ -f "$MODELS/tinyllama-$t.gguf" ] || "$KVFORGE" convert -m synthetic:llama-1.1b --outtype "$t" \
    -o "$MODELS/tinyllama-$t.gguf" 2>&1 | grep -v "has no tokenizer"
done
bench() { "$KVFORGE" bench e2e --device cuda --repeats 3 "$@" | tee -a "$OUT/e2e.txt"; }
: > "$OUT/e2e.txt"
bench -m "$MODELS/tinyllama-f16.gguf" --pp 512 --tg 128
bench -m "$MODELS/tinyllama-f16.gguf" --pp 4096 --tg 0
bench -m "$MODELS/tinyllama-q8_0.gguf" --pp 0 --tg 128
bench -m "$MODELS/tinyllama-f16.gguf" --pp 0 --tg 128 --depth 8192
bench -m "$MODELS/tinyllama-f16.gguf" --pp 0 --tg 128 --depth 32768
if [ -x "$GEMV" ]; then
  "$GEMV" 1 | tee "$OUT/gemv1.txt"
  "$GEMV" 8 | tee "$OUT/gemv8.txt"
fi
exit $test_rc
