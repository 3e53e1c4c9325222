#!/usr/bin/env bash
# Prints llama-bench's JSON (-o json) for one GGUF file: prompt processing of 512 tokens,
# generation of 128, and generation of 64 after a context of 4096 and of 16384 tokens.
# The kvforge bench runner reads it: one JSON array of llama-bench's test records
# (n_prompt, n_gen, n_depth, avg_ts, stddev_ts, samples_ts per repetition...), in that order.
#   run-llama-bench.sh FILE THREADS [REPETITIONS]
# llama-bench is bench/peers/build-llama-bench.sh's (built on first use), or $LLAMA_BENCH.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 FILE.gguf THREADS [REPETITIONS]" >&2
  exit 2
fi
file=$1; threads=$2; reps=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$file" ] || { echo "run-llama-bench: $file is missing" >&2; exit 1; }
bench=${LLAMA_BENCH:-}
if [ -z "$bench" ]; then
  bench=$("$here/build-llama-bench.sh" | tail -n 1)
fi

# Two runs (a depth applies to every test of a run), their arrays joined into one; -p 0
# or -n 0 leaves out that half. llama-bench's progress goes to stderr.
common=(-m "$file" -t "$threads" -r "$reps" -o json)
shallow=$("$bench" "${common[@]}" -p 512 -n 128)
deep=$("$bench" "${common[@]}" -p 0 -n 64 -d 4096,16384)
node -e 'const [a, b] = process.argv.slice(1).map(JSON.parse); console.log(JSON.stringify(a.concat(b), null, 2));' \
  "$shallow" "$deep"
