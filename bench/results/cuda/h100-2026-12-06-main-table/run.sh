#!/usr/bin/env bash
# One H100, one call: table.txt, e2e.txt, peer.txt: bench/cuda/side_by_side.sh on main
# (19d718a) beside llama.cpp's CUDA build (its GPU suites passed: test_gpu 434, test_cuda 23);
# gemv1_row.txt: the one-row kernel's shapes on a TinyLlama layer, including the mixes by
# group (every shape at 8 groups of 16 bytes a thread, not the step's per-k choice);
# ab_mix.txt: main against "mix", the step's one-row kernel at 8 weight rows a block for the
# groups without a gated unit (QKV, O, down; gate/up stays at 4), alternated twice. From the
# repository root, with MAIN and MIX folders holding a kvforge build (MAIN its GPU suites and
# bench_cuda_gemv too):
#   bench/results/cuda/h100-2026-12-06-main-table/run.sh MAIN MIX
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-build-cuda-out} bash bench/cuda/side_by_side.sh "$1" build-gpu/carry/llama-trim.tar.xz
cp "${OUT:-build-cuda-out}"/{e2e.txt,peer.txt,table.txt} "$HERE/"
"$1/bench_cuda_gemv" 1 row > "$HERE/gemv1_row.txt"
KVF_AB_FILTER=- KVF_AB_TG="f16 q8_0 f16@8192" bench/cuda/ab_tg.sh "$1" "$2" | tee "$HERE/ab_mix.txt"
