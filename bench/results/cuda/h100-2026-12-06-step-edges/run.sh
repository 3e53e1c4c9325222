#!/usr/bin/env bash
# One H100, two calls on one machine. Call 1 (table.txt, e2e.txt, peer.txt):
# bench/cuda/side_by_side.sh on c5b6855 (the dense d64 decode at 8 warps x 4 stages) beside
# llama.cpp's CUDA build; its GPU suites passed (test_gpu 434, test_cuda 23). Call 2 (ab.txt):
# c5b6855 against 41d88da (a step's slots in one device block, the ids stored by their kernel
# in pinned memory, the block argmax at 16 bytes a load), 41d88da's test_gpu first, then
# alternated twice. From the repository root, with MAIN and EDGES folders holding the two
# builds (bench/cuda/bundle.sh bins; MAIN with its suites, EDGES with test_gpu):
#   bench/results/cuda/h100-2026-12-06-step-edges/run.sh MAIN EDGES
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-build-cuda-out} bash bench/cuda/side_by_side.sh "$1" build-gpu/carry/llama-trim.tar.xz
cp "${OUT:-build-cuda-out}"/{e2e.txt,peer.txt,table.txt} "$HERE/"
KVF_AB_TG="f16 q8_0" KVF_AB_BATCH="8" bench/cuda/ab_tg.sh "$1" "$2" | tee "$HERE/ab.txt"
