# Sourced by tp_run.sh and cp_run.sh (ROOT set), with their arguments [KVFORGE] [TEST_GPU | -]:
# the binaries, $OUT (default build-cuda-out/) and $MODELS (KVF_BENCH_MODELS, default
# /tmp/kvf-tinyllama), the CUDA libraries on the path, NVLink multicast off, the GPUs listed
# into $OUT/env.txt and counted into `gpus`.
# rank_tests FILTER NAME runs TEST_GPU's tests FILTER (unless TEST_GPU is -) into
# $OUT/test_gpu_NAME.log, prints their results and returns their exit status.
# tinyllama_f16 prints the TinyLlama-1.1B-shaped F16 GGUF's path, written once into $MODELS.
KVFORGE=${1:-$ROOT/build/src/kvforge}
TEST_GPU=${2:-$ROOT/build/tests/test_gpu}
OUT=${OUT:-$ROOT/build-cuda-out}
MODELS=${KVF_BENCH_MODELS:-/tmp/kvf-tinyllama}
mkdir -p "$OUT" "$MODELS"
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
gpus=$(nvidia-smi --list-gpus | wc -l)

rank_tests() {
  [ "$TEST_GPU" != - ] || return 0
  KVF_SOURCE_DIR=$ROOT KVF_REQUIRE_GPU=1 "$TEST_GPU" --gtest_filter="$1" > "$OUT/test_gpu_$2.log" 2>&1
  local rc=$?
  grep -E "^\[ +(FAILED|PASSED|OK) |Failure|NCCL|^(tp|cp) [0-9]" "$OUT/test_gpu_$2.log" | head -40
  echo "test_gpu ($2) rc=$rc"
  return $rc
}

tinyllama_f16() {
  local model=$MODELS/tinyllama-f16.gguf
  [ -f "$model" ] || "$KVFORGE" convert -m synthetic:llama-1.1b --outtype f16 -o "$model" 2>&1 | grep -v "has no tokenizer" >&2
  echo "$model"
}
