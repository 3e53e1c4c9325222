# Sourced by the interop tests: skip_or_fail MESSAGE; peer_setup WORKDIR, which checks for
# Node.js >= 20 and installs node-llama-cpp (the pinned lock file) and greedy.mjs there; and
# same_greedy_ids LABEL KVFORGE WORKDIR FILE PROMPT, which greedy-decodes 8 tokens of FILE
# from the PROMPT ids in both engines and returns 1 (saying so) when they differ.
skip_or_fail() {
  if [ "${KVF_REQUIRE_MODELS:-0}" = 1 ]; then echo "FAIL: $1"; exit 1; fi
  echo "SKIP: $1"; exit 77
}

peer_setup() {
  node_major=$(node --version 2>/dev/null | sed 's/^v\([0-9]*\).*/\1/')
  if [ -z "$node_major" ] || [ "$node_major" -lt 20 ]; then skip_or_fail "node >= 20 is needed for node-llama-cpp"; fi
  mkdir -p "$1"
  cp "$here/package.json" "$here/package-lock.json" "$here/greedy.mjs" "$1/"
  if [ ! -d "$1/node_modules/node-llama-cpp" ]; then
    (cd "$1" && npm ci --omit=optional --no-audit --no-fund --loglevel=error)
  fi
}

same_greedy_ids() {
  theirs=$(cd "$3" && node greedy.mjs "$4" 8 "$5" | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/')
  ours=$("$2" generate -m "$4" --ids "$5" -n 8 --temperature 0 --json | sed 's/.*"ids":\(\[[^]]*\]\).*/\1/')
  echo "$1 llama.cpp: $theirs"
  echo "$1 kvforge:   $ours"
  if [ -z "$ours" ] || [ "$theirs" != "$ours" ]; then echo "FAIL: $1: the greedy ids differ"; return 1; fi
}
