#!/usr/bin/env bash
# The GPU suites on new64 (a bundle of main 1c61be2: bench/cuda/bundle.sh bins): on an H200 the
# side-by-side table (bench/cuda/side_by_side.sh, suites included); otherwise the context-parallel
# and pool-share tests, then test_gpu and test_cuda whole.
set -u
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1)
echo "$name" | tee "$OUT/gpu.txt"
if [[ $name == *H200* ]]; then
  mkdir -p g && tar -xJf build-gpu/carry/new64.tar.xz -C g
  export LD_LIBRARY_PATH=$PWD/g/new64:/usr/local/cuda/lib64
  OUT2=$OUT
  OUT=$OUT2/sbs timeout 560 bash bench/cuda/side_by_side.sh "$PWD/g/new64" build-gpu/carry/llama-trim.tar.xz > "$OUT2/sbs.log" 2>&1
  cat "$OUT2/sbs/table.txt"; grep -E "rc=|PASSED|FAILED" "$OUT2/sbs.log" | head
  exit 0
fi
mkdir -p g && tar -xJf build-gpu/carry/new64.tar.xz -C g
export LD_LIBRARY_PATH=$PWD/g/new64:/usr/local/cuda/lib64
export KVF_SOURCE_DIR=$PWD KVF_REQUIRE_GPU=1
timeout 200 g/new64/test_gpu --gtest_filter='GpuPoolShare.*:GpuContextParallel.*:GpuTensorParallel.*' > "$OUT/cp.log" 2>&1; echo "cp rc=$?"
grep -E "^\[ +(FAILED|PASSED|OK) |Failure|rror|cp [0-9]" "$OUT/cp.log" | head -40
timeout 250 g/new64/test_gpu > "$OUT/test_gpu.log" 2>&1; echo "test_gpu rc=$?"
grep -E "^\[ +(FAILED|PASSED) |Failure" "$OUT/test_gpu.log" | head
timeout 100 g/new64/test_cuda > "$OUT/test_cuda.log" 2>&1; echo "test_cuda rc=$?"
grep -E "^\[ +(FAILED|PASSED) |Failure" "$OUT/test_cuda.log" | head
