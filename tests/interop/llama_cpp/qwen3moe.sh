#!/bin/sh
# Interop with llama.cpp on mixture of experts: kvforge writes its 2-layer synthetic Qwen3-MoE
# (4 experts, 2 a token; q/k norms, rotate-half rope) as GGUF architecture qwen3moe with each
# layer's experts stacked (ffn_{gate,up,down}_exps), in f32 and in q8_0; llama.cpp (npm
# node-llama-cpp, as run.sh) loads each file, and both engines greedy-decode the same 8 tokens
# from the same prompt ids. A key, a stacking order or a routing rule read differently
# changes the first tokens already.
#   qwen3moe.sh KVFORGE WORKDIR MODELS_DIR
set -eu
kvforge=$1; work=$2; models=$3
here=$(cd "$(dirname "$0")" && pwd)
vocab="$models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"
. "$here/peer.sh"
[ -f "$vocab" ] || skip_or_fail "$vocab is missing"
peer_setup "$work"
prompt=1,9038,2501,263,931
status=0
for type in f32 q8_0; do
  file="$work/qwen3moe-tiny.$type.gguf"
  "$kvforge" convert -m synthetic:qwen3moe-tiny --vocab "$vocab" --outtype "$type" -o "$file"
  same_greedy_ids "$type" "$kvforge" "$work" "$file" "$prompt" || status=1
done
[ $status = 0 ] && echo "PASS"
exit $status
