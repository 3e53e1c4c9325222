#!/usr/bin/env bash
# Whole models on the GPU, in one run on the GPU machine: the gpu test suite (test_gpu, with
# KVF_REQUIRE_GPU=1 so that a missing GPU fails it), then `kvforge bench e2e --device cuda`
# on TinyLlama-1.1B-shaped GGUFs with seeded random weights (F16 and Q8_0, written here by
# `kvforge convert`): pp512, pp4096, tg128, Q8_0 tg128, tg128 at depths 8192 and 32768;
# then, when given, bench_cuda_gemv (the decode linears' kernel shapes on a TinyLlama layer,
# 1 and 8 rows), and batched decode: 8, 32 and 64 requests of 128 prompt tokens and 128
# generated ones each through `kvforge batch --device cuda` (the paged driver). With
# KVF_BENCH_VOCAB (llama.cpp's ggml-vocab-llama-spm.gguf) the files carry a vocabulary, so
# that llama.cpp loads the same files (peer_run.sh). Logs go to $OUT (default build-cuda-out/).
#   usage: bench/cuda/models_run.sh [KVFORGE] [TEST_GPU | -] [BENCH_CUDA_GEMV]
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
test_rc=0
if [ "$TEST_GPU" != - ]; then  # "-": the benchmarks only
  KVF_SOURCE_DIR=$ROOT KVF_REQUIRE_GPU=1 "$TEST_GPU" > "$OUT/test_gpu.log" 2>&1
  test_rc=$?
  grep -E "^\[ +(FAILED|PASSED) |Failure" "$OUT/test_gpu.log" | head -40
  echo "test_gpu rc=$test_rc"
fi

vocab=()
[ -n "${KVF_BENCH_VOCAB:-}" ] && vocab=(--vocab "$KVF_BENCH_VOCAB")
for t in f16 q8_0; do
  [ -f "$MODELS/tinyllama-$t.gguf" ] || "$KVFORGE" convert -m synthetic:llama-1.1b "${vocab[@]}" --outtype "$t" \
    -o "$MODELS/tinyllama-$t.gguf" 2>&1 | grep -v "has no tokenizer"
done
bench() { "$KVFORGE" bench e2e --device cuda --repeats 3 "$@" | tee -a "$OUT/e2e.txt"; }
: > "$OUT/e2e.txt"
bench -m "$MODELS/tinyllama-f16.gguf" --pp 512 --tg 128
bench -m "$MODELS/tinyllama-f16.gguf" --pp 4096 --tg 0
bench -m "$MODELS/tinyllama-q8_0.gguf" --pp 0 --tg 128
bench -m "$MODELS/tinyllama-f16.gguf" --pp 0 --tg 128 --depth 8192
bench -m "$MODELS/tinyllama-f16.gguf" --pp 0 --tg 128 --depth 32768
for n in 8 32 64; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" \
    > "$MODELS/batch$n.jsonl"
  echo "batched decode, $n requests x (128 + 128):" | tee -a "$OUT/e2e.txt"
  "$KVFORGE" batch -m "$MODELS/tinyllama-f16.gguf" --device cuda --kv-type f16 --requests "$MODELS/batch$n.jsonl" \
    --max-rows "$n" --max-batch-tokens 8192 --json | tail -n 1 | tee -a "$OUT/e2e.txt"
done
if [ -x "$GEMV" ]; then
  "$GEMV" 1 | tee "$OUT/gemv1.txt"
  "$GEMV" 8 | tee "$OUT/gemv8.txt"
fi
exit $test_rc
