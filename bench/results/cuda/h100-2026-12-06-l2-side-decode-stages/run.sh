#!/usr/bin/env bash
# One H100, one call, builds alternated twice (ab_l2.txt): main (19d718a); s8, s16, s32: the
# step forking, in front of each decode attention, a side branch of its graph (one block of
# 128 threads issuing cp.async.bulk.prefetch.L2 in 32 KB pieces) over the tail 8, 16 or 32 MB
# of the next gate/up group's weights, joined at the step's end; s16o: the same with the O
# group's weights whole first; w8s4, w8s5, w12s3: the d64 tensor-core decode at 8 warps x 4
# stages, 8 x 5 and 12 x 3 (dense and paged; main: 8 x 3); e0: q and P rounded to 16 bits in
# that decode (KVF_DMMA_EXACT=0). test_gpu_l2.txt: the GPU suite with the s16o prefetch on.
# test_cuda_8x4.txt, a later call: test_cuda of c652a13 (dense d64 at 8 x 4, paged at 8 x 3).
# s8 to s16o are one build of main plus the prefetch (not kept), each folder's kvforge a
# script that sets its size (and for s16o the O group) in the environment and runs it; the
# decode shapes are that build (the prefetch off) with KVF_DMMA64_W / KVF_DMMA64_S /
# KVF_DMMA_EXACT set. From the repository root, each argument a folder holding a kvforge:
#   bench/results/cuda/h100-2026-12-06-l2-side-decode-stages/run.sh MAIN S8 S16 S32 S16O W8S4 W8S5 W12S3 E0
HERE=$(cd "$(dirname "$0")" && pwd)
KVF_AB_FILTER=- KVF_AB_TG="f16 f16@32768" KVF_AB_BATCH="64" bench/cuda/ab_tg.sh "$@" | tee "$HERE/ab_l2.txt"
