# Sourced by tp_run.sh and cp_run.sh (ROOT, OUT and TEST_GPU set): the CUDA libraries on the
# path, NVLink multicast off, the GPUs listed into $OUT/env.txt and counted into `gpus`.
# rank_tests FILTER NAME runs TEST_GPU's tests FILTER (unless TEST_GPU is -) into
# $OUT/test_gpu_NAME.log, prints their results and returns their exit status.
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
