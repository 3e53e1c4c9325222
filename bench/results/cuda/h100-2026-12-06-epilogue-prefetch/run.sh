#!/usr/bin/env bash
# One H100, one call, three measured-and-dropped changes against main (0dd4857):
#   tip: the streaming kernel's epilogue running the QKV group's rope/cache-write pack for
#        9-64 rows, and the decode attention handing its output to o rounded to 16 bits;
#   a0:  tip + the tensor-core decode's key splits filling every resident block slot + the
#        one-row linear pulling the tail of the next group's weights into L2 once its own had
#        arrived, with the pull's budget at 0 MB (KVF_L2_AHEAD_MB); a12, a24: 12 and 24 MB.
# table.txt, e2e.txt, peer.txt: bench/cuda/side_by_side.sh on a0 beside llama.cpp's CUDA
# build in the same call (test_cuda passed; test_gpu failed
# GemmStream.EpilogueRunsTheRopesAndPoolWritesAsThePackDoes). ab.txt: the builds alternated
# twice right after it. ncu_1.txt, ncu_64.txt: per-kernel time a step of main under ncu
# (kernels serialized: shares, not the step's time), one row and 64 rows. From the repository
# root, each argument a folder holding a kvforge build (the last with its GPU suites):
#   bench/results/cuda/h100-2026-12-06-epilogue-prefetch/run.sh MAIN TIP A0 A12 A24
# splits.txt, a later call on another H100: main (fb3531d) against "fix", the decode split
# rule counting the fill of the splits its 128-key chunks leave (depth 32768: 33 chunks of
# 1024 keys, 132 blocks, instead of 29 of 1152; depth 8192: 33 of 256 instead of 22 of 384),
# fix's GPU suites first:
#   KVF_AB_FILTER= KVF_AB_TG="f16@8192 f16@32768" bench/cuda/ab_tg.sh MAIN FIX
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-build-cuda-out} KVF_L2_AHEAD_MB=0 bash bench/cuda/side_by_side.sh "$3" build-gpu/carry/llama-trim.tar.xz
cp "${OUT:-build-cuda-out}"/{e2e.txt,peer.txt,table.txt} "$HERE/"
KVF_AB_FILTER=- KVF_AB_TG="f16 f16@32768" KVF_AB_PP=512 KVF_AB_BATCH="8 64" bench/cuda/ab_tg.sh "$@" | tee "$HERE/ab.txt"
