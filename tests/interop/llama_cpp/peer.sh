# Sourced by the interop tests: skip_or_fail MESSAGE, and peer_setup WORKDIR, which checks
# for Node.js >= 20 and installs node-llama-cpp (the pinned lock file) and greedy.mjs there.
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
