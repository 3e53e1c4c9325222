#!/usr/bin/env bash
# One H100, one session. ab.txt: builds alternated twice, tg128 F16 and F16 at depth 32768
# (the depth ran once a build there) and batched decode of 8, 32 and 64 sequences, then each
# build's greedy ids against the first's, with the host time a step of the batched decode
# from dev built with run_step timed in parts. The builds: 7453620 ("main"); the step's
# validations over more than 64 elements checked in its graph instead of on the host ("dev",
# 9518788); dev with the d64 tensor-core decode at 8 warps x 3 stages ("w8s3", now the
# default); dev with at least 2 key splits for a paged tensor-core decode of 128+ keys ("sp2",
# dropped). table.txt: bench/cuda/side_by_side.sh on w8s3 (6303c98) beside llama.cpp's CUDA
# build (e2e.txt, peer.txt: its raw output; its GPU suite passed). From the repository root:
#   bench/results/cuda/h100-2026-12-06-device-checks/run.sh MAIN DEV W8S3 SP2
HERE=$(cd "$(dirname "$0")" && pwd)
KVF_AB_FILTER=- KVF_AB_TG="f16 f16@32768" KVF_AB_BATCH="8 32 64" bench/cuda/ab_tg.sh "$@" | tee "$HERE/ab.txt"
OUT=${OUT:-build-cuda-out} bash bench/cuda/side_by_side.sh "$3" build-gpu/carry/llama-trim.tar.xz
cp "${OUT:-build-cuda-out}"/{e2e.txt,peer.txt,table.txt} "$HERE/"
