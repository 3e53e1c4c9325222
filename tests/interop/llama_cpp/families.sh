#!/bin/sh
# Interop with llama.cpp across families: kvforge writes each transformers fixture (tiny
# random-init checkpoints, tests/fixtures) as GGUF of that family's llama.cpp architecture,
# in f32 (and q8_0), with a byte-level vocab of the fixture's size (byte_vocab.py); llama.cpp
# (npm node-llama-cpp, as run.sh) loads each file and both engines greedy-decode the same 8
# tokens from the same prompt ids. A key, a tensor layout or a rule the two read differently
# (llama's rope pairs, phi3's fused gate/up, bloom's ALiBi, gpt2's position table) changes
# the first tokens already.
#   families.sh KVFORGE WORKDIR FIXTURES_DIR TYPES FAMILY...   (TYPES: "f32", "q8_0" or both)
set -eu
kvforge=$1; work=$2; fixtures=$3; types=$4; shift 4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/peer.sh"
peer_setup "$work"
prompt=1,5,9,20,33
status=0
for family in "$@"; do
  vocab_size=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$fixtures/$family/config.json")
  vocab="$work/byte-vocab-$vocab_size.gguf"
  python3 "$here/byte_vocab.py" "$vocab_size" "$vocab"
  # Opened through a neutral name: llama.cpp gives a model whose general.name says phi3
  # Phi-3's special tokens, which a byte vocab lacks.
  ln -sfn "$fixtures/$family" "$work/checkpoint"
  for type in $types; do
    file="$work/$family.$type.gguf"
    "$kvforge" convert -m "$work/checkpoint" --vocab "$vocab" --outtype "$type" -o "$file" >/dev/null
    same_greedy_ids "$family $type" "$kvforge" "$work" "$file" "$prompt" || status=1
  done
done
[ $status = 0 ] && echo "PASS"
exit $status
