#!/usr/bin/env bash
# The end-to-end comparison against llama.cpp in one call: `kvforge bench e2e --peer
# llama-bench` on the 125M llama in F16, Q8_0 and Q4_K_M (pp512 + tg128 at depth 0) and on F16 at
# depth 4096 and 16384 (tg64), and on the 0.5B Qwen3-MoE in Q8_0 (pp512 + tg128), both engines
# with the same file, threads and KV type, run back to back.
# Prints one kvforge line and one llama.cpp line per case (medians of REPEATS).
#   compare-e2e.sh [KVFORGE=build/src/kvforge] [THREADS=2] [REPEATS=5] [KV=f16]
# Needs build/peers/bin/llama-bench (build-llama-bench.sh) and the models (make-models.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
kvforge=${1:-$root/build/src/kvforge}
threads=${2:-2}
repeats=${3:-5}
kv=${4:-f16}
peer=$root/build/peers/bin/llama-bench
models=$root/build/peers/models
for f in "$peer" "$models/llama-125m-f16.gguf" "$models/llama-125m-q8_0.gguf" "$models/llama-125m-q4_k_m.gguf" \
         "$models/qwen3moe-0.5b-q8_0.gguf"; do
  [ -e "$f" ] || { echo "compare-e2e: $f is missing (bench/peers/build-llama-bench.sh, make-models.sh)" >&2; exit 1; }
done

run() {
  "$kvforge" bench e2e --peer "$peer" --threads "$threads" --repeats "$repeats" --kv-type "$kv" "$@"
}
echo "# $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run -m "$models/llama-125m-f16.gguf" --pp 512 --tg 128
run -m "$models/llama-125m-q8_0.gguf" --pp 512 --tg 128
run -m "$models/llama-125m-q4_k_m.gguf" --pp 512 --tg 128
for depth in 4096 16384; do
  run -m "$models/llama-125m-f16.gguf" --pp 0 --tg 64 --depth "$depth"
done
run -m "$models/qwen3moe-0.5b-q8_0.gguf" --pp 512 --tg 128
