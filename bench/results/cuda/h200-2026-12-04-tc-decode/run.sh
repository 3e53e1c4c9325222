#!/usr/bin/env bash
# Decode on the H200 with greedy ids from the device, decode attention on the tensor cores,
# ropes that read heads in place and register-held RMSNorm rows; from the repository root:
#   bench/results/cuda/h200-2026-12-04-tc-decode/run.sh KVFORGE
# e2e.txt: batched decode of 4 to 64 sequences, tg128 (F16, Q8_0) and tg128 at depth 32768;
# kernels-batch8.txt / kernels-batch64.txt: the 8- and 64-row decode steps' kernel times
# (bench/cuda/decode_run.sh says what each is).
exec "$(dirname "$0")/../../../cuda/decode_run.sh" "${1:-build/src/kvforge}" "4 8 16 32 64" "8 64"
