#!/usr/bin/env bash
# The context-parallel map kernels, before and after their tiled forms: bench_cuda_kv_parallel
# (kv_shard_map by position and over a pool shared out by blocks, masked, 4k to 128k keys a
# row; merge_attention_partials) from a bundle of each build (bench/cuda/bundle.sh bins), then
# the GPU suites of the second. kvp.txt: one block a row (main f7e164c's kernels); kvp-tiled.txt:
# a grid of (tiles, rows), the pool form in two passes.
#   usage (repository root, on the GPU machine): run.sh BIN_DIR_BEFORE BIN_DIR_AFTER
set -u
OUT=${OUT:-build-cuda-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$1:$2:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
"$1/bench_cuda_kv_parallel" 50 > "$OUT/kvp.txt"
"$2/bench_cuda_kv_parallel" 50 > "$OUT/kvp-tiled.txt"
export KVF_SOURCE_DIR=$PWD KVF_REQUIRE_GPU=1
"$2/test_gpu" > "$OUT/test_gpu.log" 2>&1; echo "test_gpu rc=$?"
"$2/test_cuda" > "$OUT/test_cuda.log" 2>&1; echo "test_cuda rc=$?"
