#!/usr/bin/env bash
# One H100, two calls on one machine. Call 1 (suites.txt, ab.txt, splits.txt): the early-keys
# build's test_cuda (CudaDecode.*) and test_gpu, then main (a255bd5) against it alternated
# twice: tg128 F16 at depth 0, 8192 and 32768, batched decode of 8 and 64 sequences, greedy
# ids compared; then the dense d64 one-row decode's split sweep (bench_cuda_decode 20
# tinyllama). Call 2 (table.txt, e2e.txt, peer.txt): bench/cuda/side_by_side.sh on the
# early-keys build beside llama.cpp's CUDA build. From the repository root, with MAIN and
# EARLY folders holding the two builds (bench/cuda/bundle.sh bins):
#   bench/results/cuda/h100-2026-12-06-early-keys/run.sh MAIN EARLY
HERE=$(cd "$(dirname "$0")" && pwd)
KVF_REQUIRE_GPU=1 "$2/test_cuda" --gtest_filter='CudaDecode.*'
KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$2/test_gpu"
KVF_AB_FILTER=- KVF_AB_TG="f16 f16@8192 f16@32768" KVF_AB_BATCH="8 64" bench/cuda/ab_tg.sh "$1" "$2" | tee "$HERE/ab.txt"
"$2/bench_cuda_decode" 20 tinyllama | tee "$HERE/splits.txt"
OUT=${OUT:-build-cuda-out} bash bench/cuda/side_by_side.sh "$2" build-gpu/carry/llama-trim.tar.xz
cp "${OUT:-build-cuda-out}"/{e2e.txt,peer.txt,table.txt} "$HERE/"
