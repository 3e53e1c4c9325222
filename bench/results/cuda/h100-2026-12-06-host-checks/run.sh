#!/usr/bin/env bash
# One H100, one session, four builds: 4c33763 (main), the one-row kernel letting the next
# kernel launch before its own wait ("trigger"), the step's validations checked on the host
# with the slot copies and their eqns inside the step's graph ("checks"), and both with the
# small elementwise ops chained ("both"). From the repository root, each argument a folder
# holding a kvforge build (and, for the layer bench, bench_cuda_layer), the first one's
# libraries on LD_LIBRARY_PATH:
#   tg.txt     tg128 of each build alternated twice (F16, Q8_0, F16 at depth 32768)
#   layer.txt  bench_cuda_layer's step kernels in parts, main then trigger, twice
#   table.txt  bench/cuda/side_by_side.sh's table for "both" beside llama.cpp's CUDA build
#              (e2e.txt, peer.txt: its raw output), same machine, same session
#   bench/results/cuda/h100-2026-12-06-host-checks/run.sh MAIN TRIGGER CHECKS BOTH
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$1:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in "$1" "$2" "$1" "$2"; do
  echo "== $b"
  KVF_BENCH_STEP_ONLY=1 "$b/bench_cuda_layer" 128 32768
done > "$HERE/layer.txt" 2>&1
bench/results/cuda/h100-2026-12-06-qkv-epilogue/run.sh "$@" | tee "$HERE/tg.txt"
