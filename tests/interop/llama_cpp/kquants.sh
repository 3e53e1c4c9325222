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
. "$here/peer.sh"
[ -f "$vocab" ] || skip_or_fail "$vocab is missing"
peer_setup "$work"
file="$work/llama-125m.q4_k_m.gguf"
"$kvforge" convert -m synthetic:llama-125m --vocab "$vocab" --outtype q4_k_m -o "$file"
prompt=1,9038,2501,263,931
theirs=$(cd "$work" && node greedy.mjs "$file" 8 "$prompt" | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/')
ours=$("$kvforge" generate -m "$file" --ids "$prompt" -n 8 --temperature 0 --json | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/')
echo "llama.cpp: $theirs"
echo "kvforge:   $ours"
[ -n "$ours" ] && [ "$theirs" = "$ours" ] || { echo "FAIL: the greedy ids differ"; exit 1; }
echo "PASS"
