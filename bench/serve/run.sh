#!/usr/bin/env bash
# kvforge serve against llama-server, one after the other in one run, on the same GGUF (the
# ~125M llama of bench/peers, Q8_0) with 2 threads: TTFT p50/p99, inter-token latency and
# total output tokens/s at concurrency 1, 4, 16 and 64, each server with as many parallel
# slots as the concurrency; then TTFT with 90% shared prompt prefixes, kvforge's prefix
# cache on and off. Writes results.jsonl, table.md and serve.png to OUT_DIR.
#   run.sh [OUT_DIR]      (default: build/bench-serve)
# llama-server is built by bench/peers/build-llama-bench.sh on first use (or $LLAMA_SERVER).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/bench-serve}
mkdir -p "$out"
kvforge=${KVFORGE:-$root/build/src/kvforge}
server=${LLAMA_SERVER:-$("$root/bench/peers/build-llama-bench.sh" "$root/build/peers" llama-server | tail -n 1)}
"$root/bench/peers/make-models.sh" "$kvforge" "$root/build/peers/models" >/dev/null
model="$root/build/peers/models/llama-125m-q8_0.gguf"
prompt_words=${KVF_PROMPT_WORDS:-128}; max_tokens=${KVF_MAX_TOKENS:-64}; ctx=512
results="$out/results.jsonl"
: > "$results"

wait_health() {  # URL
  for _ in $(seq 600); do
    python3 -c "import urllib.request as u; u.urlopen('$1/health')" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "run.sh: $1 never became healthy" >&2; return 1
}

# run_one NAME CONCURRENCY SHARED -- server command...
run_one() {
  local name=$1 conc=$2 shared=$3; shift 4
  local port=$((18000 + RANDOM % 1000))
  "$@" --port "$port" > "$out/$name-$conc.log" 2>&1 &
  local pid=$!
  wait_health "http://127.0.0.1:$port"
  local per_client=$(( conc >= 16 ? 2 : 16 / conc ))
  python3 "$here/load.py" "http://127.0.0.1:$port" "$conc" 1 "$prompt_words" 4 "$shared" > /dev/null  # warm-up
  python3 "$here/load.py" "http://127.0.0.1:$port" "$conc" "$per_client" "$prompt_words" "$max_tokens" "$shared" |
    python3 -c "import json,sys; r=json.load(sys.stdin); r['server']='$name'; r['shared']=$shared; print(json.dumps(r))" |
    tee -a "$results"
  kill -INT "$pid"; wait "$pid" || true
}

for conc in 1 4 16 64; do
  run_one kvforge "$conc" 0 -- "$kvforge" serve -m "$model" --threads 2 --max-rows "$conc" --ctx "$ctx"
  run_one llama-server "$conc" 0 -- "$server" -m "$model" -t 2 -np "$conc" -c $((conc * ctx)) --host 127.0.0.1
done
prefix_words=$((ctx * 3 / 4))
KVF_PROMPT_WORDS=$prefix_words
prompt_words=$prefix_words
run_one kvforge-prefix-cache 1 0.9 -- "$kvforge" serve -m "$model" --threads 2 --max-rows 1 --ctx "$ctx"
run_one kvforge-no-prefix-cache 1 0.9 -- "$kvforge" serve -m "$model" --threads 2 --max-rows 1 --ctx "$ctx" --no-prefix-cache

python3 "$here/table.py" "$results" "$out"
