#!/usr/bin/env bash
# Rewrites tests/fixtures/kquants/ggml_dequant.bin: random q2_k..q6_k blocks and ggml's own
# decoding of them (ggml_reference.c), compiled from the llama.cpp source that
# bench/peers/build-llama-bench.sh unpacks (run that first; its ggml-base library supplies
# the rest of ggml). ggml-quants.c is compiled here for the baseline x86-64 with
# -ffp-contract=off, so that its decoders round once per C operation.
#   tools/kquants/make_reference.sh [PEERS_DIR]   (default: build/peers)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peers=${1:-$root/build/peers}
src=$peers/llama.cpp
lib=$peers/llama.cpp-build/ggml/src/libggml-base.a
for f in "$src/ggml/src/ggml-quants.c" "$lib"; do
  [ -f "$f" ] || { echo "make_reference: $f is missing (bench/peers/build-llama-bench.sh)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-O2 -std=gnu11 -ffp-contract=off -I"$src/ggml/include" -I"$src/ggml/src")
cc "${flags[@]}" -c "$src/ggml/src/ggml-quants.c" -o "$work/ggml-quants.o"
cc "${flags[@]}" "$root/tools/kquants/ggml_reference.c" "$work/ggml-quants.o" "$lib" -lstdc++ -lm -lpthread -o "$work/ggml_reference"
mkdir -p "$root/tests/fixtures/kquants"
"$work/ggml_reference" "$root/tests/fixtures/kquants/ggml_dequant.bin"
ls -l "$root/tests/fixtures/kquants/ggml_dequant.bin"
