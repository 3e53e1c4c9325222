#!/usr/bin/env bash
# One H100, one call (ab.txt): builds alternated twice, pp512 + tg128 F16 and batched decode
# of 16, 32 and 64 sequences, then each build's greedy ids against the first's. The builds:
# 6303c98 ("base"); the gate/up group's glu output handed to down rounded to 16 bits, down on
# any kernel that rounds x ("new"); the same with the streaming kernel launched without PDL
# when handed x ("nopdl"); handed only to cuBLASLt and gemm_rows ("tconly", what the step
# runs now). From the repository root, each argument a folder holding a kvforge build:
#   bench/results/cuda/h100-2026-12-06-glu-handoff/run.sh BASE NEW NOPDL TCONLY
KVF_AB_FILTER=- KVF_AB_TG=f16 KVF_AB_PP=512 KVF_AB_BATCH="16 32 64" bench/cuda/ab_tg.sh "$@" |
  tee "$(dirname "$0")/ab.txt"
