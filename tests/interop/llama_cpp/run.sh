#!/bin/sh
# Interop with llama.cpp: kvforge converts stories260K.bin to GGUF, llama.cpp (npm
# node-llama-cpp 3.21.1, installed here from the pinned lock file) loads it and must give
# REFERENCE.md's greedy ids and tokenize the prompt like kvforge does.
#   run.sh KVFORGE WORKDIR MODELS_DIR
set -eu
kvforge=$1; work=$2; models=$3
here=$(cd "$(dirname "$0")" && pwd)
bin="$models/stories260K/stories260K.bin"
. "$here/peer.sh"
[ -f "$bin" ] || skip_or_fail "$bin is missing"
peer_setup "$work"
"$kvforge" convert -m "$bin" -o "$work/stories260K.converted.gguf"
got=$(cd "$work" && node greedy.mjs stories260K.converted.gguf 64 1,403,407,261,378 "Once upon a time")
want_ids='[432,383,286,261,376,298,315,421,395,317,426,338,401,396,267,337,410,408,419,292,411,322,265,282,295,433,426,385,328,432,358,394,261,370,432,352,266,268,388,426,338,391,266,267,337,335,312,432,398,312,286,267,414,270,333,415,426,13,438,310,439,419,357,336]'
ours=$("$kvforge" tokenize -m "$work/stories260K.converted.gguf" -t "Once upon a time" --no-bos)
echo "llama.cpp: $got"
echo "kvforge tokenize: $ours"
case "$got" in
  *"\"ids\":$want_ids"*) ;;
  *) echo "FAIL: llama.cpp's greedy ids on the converted GGUF differ from REFERENCE.md"; exit 1 ;;
esac
theirs_tokens=$(printf '%s' "$got" | sed 's/.*"tokens":\(\[[^]]*\]\).*/\1/')
ours_tokens=$(printf '%s' "$ours" | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/')
[ "$theirs_tokens" = "$ours_tokens" ] || { echo "FAIL: tokenization differs: llama.cpp $theirs_tokens, kvforge $ours_tokens"; exit 1; }
echo "PASS"
