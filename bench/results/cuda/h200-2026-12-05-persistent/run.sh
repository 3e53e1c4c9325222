#!/usr/bin/env bash
# One decode row of TinyLlama-1.1B's 22 layers, the step's kernels against the persistent
# forms (bench/cuda/layer_bench.cu), at 128 and 32768 cached keys; from the repository root
# on the GPU machine, after `cmake --build build --target bench_cuda_layer`:
#   bench/results/cuda/h200-2026-12-05-persistent/run.sh [BENCH_CUDA_LAYER]
exec "${1:-build/bench/bench_cuda_layer}" 128 32768
