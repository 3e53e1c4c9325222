#!/usr/bin/env bash
# Writes the benchmark models into build/peers/models/:
#   llama-125m-f16.gguf, llama-125m-q8_0.gguf, llama-125m-q4_k_m.gguf
#                                               synthetic:llama-125m (seeded N(0, 0.02)
#       weights) converted by `kvforge convert`, with llama.cpp's 32000-token SentencePiece
#       vocabulary (ggml-vocab-llama-spm.gguf) as its tokenizer
#   qwen3moe-0.5b-q8_0.gguf                     synthetic:qwen3moe-0.5b the same way (GGUF
#       architecture qwen3moe: 8 experts a layer, 2 a token)
#   stories260K.gguf                            a link to ../shared/models/stories260K/
#   make-models.sh [KVFORGE] [OUT_DIR]   (defaults: build/src/kvforge, build/peers/models)
# Idempotent: existing files are kept (KVF_REMAKE=1 rewrites them).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kvforge=${1:-$root/build/src/kvforge}
out=${2:-$root/build/peers/models}
models=${KVF_MODELS_DIR:-$root/../shared/models}
vocab="$models/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"
stories="$models/stories260K/stories260K.gguf"

[ -x "$kvforge" ] || { echo "make-models: $kvforge is not built (cmake --build build --target kvforge)" >&2; exit 1; }
for f in "$vocab" "$stories"; do
  [ -f "$f" ] || { echo "make-models: $f is missing" >&2; exit 1; }
done
mkdir -p "$out"

for type in f16 q8_0 q4_k_m; do
  dst="$out/llama-125m-$type.gguf"
  if [ -f "$dst" ] && [ "${KVF_REMAKE:-0}" != 1 ]; then continue; fi
  # Written under a temporary name so that an interrupted run leaves no half file behind.
  "$kvforge" convert -m synthetic:llama-125m --vocab "$vocab" --outtype "$type" -o "$dst.tmp.gguf"
  mv "$dst.tmp.gguf" "$dst"
done
dst="$out/qwen3moe-0.5b-q8_0.gguf"
if [ ! -f "$dst" ] || [ "${KVF_REMAKE:-0}" = 1 ]; then
  "$kvforge" convert -m synthetic:qwen3moe-0.5b --vocab "$vocab" --outtype q8_0 -o "$dst.tmp.gguf"
  mv "$dst.tmp.gguf" "$dst"
fi
ln -sfn "$(cd "$(dirname "$stories")" && pwd)/stories260K.gguf" "$out/stories260K.gguf"
ls -l "$out"
