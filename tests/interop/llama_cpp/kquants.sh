#!/bin/sh
# Interop with llama.cpp on k-quants: kvforge writes the 125M synthetic llama as Q4_K_M
# (q4_k with q6_k tensors), llama.cpp (npm node-llama-cpp, as run.sh) loads the file, and
# both engines greedy-decode the same 8 tokens from the same prompt ids. A tensor written
# or read in the wrong layout changes the first token already; 8 leaves room for the two
# engines' different activation quantization only where a random model's top two logits
# would nearly tie.
#   kquants.sh KVFORGE WORKDIR MODELS_DIR
set -eu
kvforge=$1; work=$2; models=$3
here=$(cd "$(dirname "$0")" && pwd)
vocab="$models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"
if [ ! -f "$vocab" ]; then
  if [ "${KVF_REQUIRE_MODELS:-0}" = 1 ]; then echo "FAIL: $vocab is missing"; exit 1; fi
  echo "SKIP: $vocab is missing"; exit 77
fi
node_major=$(node --version 2>/dev/null | sed 's/^v\([0-9]*\).*/\1/')
if [ -z "$node_major" ] || [ "$node_major" -lt 20 ]; then
  if [ "${KVF_REQUIRE_MODELS:-0}" = 1 ]; then echo "FAIL: node >= 20 is needed for node-llama-cpp"; exit 1; fi
  echo "SKIP: node >= 20 is needed for node-llama-cpp"; exit 77
fi
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/greedy.mjs" "$work/"
if [ ! -d "$work/node_modules/node-llama-cpp" ]; then
  (cd "$work" && npm ci --omit=optional --no-audit --no-fund --loglevel=error)
fi
file="$work/llama-125m.q4_k_m.gguf"
"$kvforge" convert -m synthetic:llama-125m --vocab "$vocab" --outtype q4_k_m -o "$file"
prompt=1,9038,2501,263,931
theirs=$(cd "$work" && node greedy.mjs "$file" 8 "$prompt" | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/')
ours=$("$kvforge" generate -m "$file" --ids "$prompt" -n 8 --temperature 0 --json | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/')
echo "llama.cpp: $theirs"
echo "kvforge:   $ours"
[ -n "$ours" ] && [ "$theirs" = "$ours" ] || { echo "FAIL: the greedy ids differ"; exit 1; }
echo "PASS"
