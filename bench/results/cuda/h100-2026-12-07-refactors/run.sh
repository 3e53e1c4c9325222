#!/usr/bin/env bash
# One H100, one call: main (2339a57: tile shapes as constants, grid_stride, one AttentionArgs
# and Ref for both executors, tests/cuda's upload helper) checked against the build before
# those changes (ddfef50): its whole test_cuda and test_gpu, then the two builds alternated
# twice (tg128 F16 at depth 0 and 32768, batched decode of 64 sequences, greedy ids compared).
# From the repository root, with BEFORE and AFTER folders holding the two builds
# (bench/cuda/bundle.sh bins, the shared libraries beside each):
#   bench/results/cuda/h100-2026-12-07-refactors/run.sh BEFORE AFTER
HERE=$(cd "$(dirname "$0")" && pwd)
KVF_REQUIRE_GPU=1 "$2/test_cuda" | grep -E "^\[ +(OK|FAILED|PASSED) |worst" | tee "$HERE/test_cuda.txt"
KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$2/test_gpu" | grep -E "^\[ +(FAILED|PASSED) |^\[==========\]" | tee "$HERE/test_gpu.txt"
KVF_AB_FILTER=- KVF_AB_TG="f16 f16@32768" KVF_AB_BATCH="64" bench/cuda/ab_tg.sh "$1" "$2" | tee "$HERE/ab.txt"
