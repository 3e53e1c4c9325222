#!/usr/bin/env bash
# Decode on the H200 after the pool writes joined the rope packs, the pack and the decode
# attention became programmatic dependents and the fused norms' 1/rms loads went wide; from
# the repository root:
#   bench/results/cuda/h200-2026-12-04-decode-pdl/run.sh KVFORGE
# e2e.txt: batched decode of 8, 32 and 64 sequences, tg128 (F16, Q8_0) and tg128 at depth
# 32768; kernels-batch64.txt: the 64-row decode step's kernel times (bench/cuda/decode_run.sh
# says what each is).
exec "$(dirname "$0")/../../../cuda/decode_run.sh" "${1:-build/src/kvforge}" "8 32 64" "64"
