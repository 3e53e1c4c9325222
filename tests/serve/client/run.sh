#!/bin/sh
# `kvforge serve` with real clients: the npm `openai` package (pinned here), Prometheus'
# own parser on /metrics, a bounded wrk load run on loopback (0 non-2xx), and SIGTERM
# finishing a stream in flight before the server exits 0.
#   run.sh KVFORGE WORKDIR MODELS_DIR
set -eu
# Debian's python3 (python3-prometheus-client), not whatever python3 comes first on PATH.
py=/usr/bin/python3
kvforge=$1; work=$2; models=$3
here=$(cd "$(dirname "$0")" && pwd)
gguf="$models/stories260K/stories260K.gguf"
load_seconds=${KVF_LOAD_SECONDS:-20}
if [ ! -f "$gguf" ]; then
  if [ "${KVF_REQUIRE_MODELS:-0}" = 1 ]; then echo "FAIL: $gguf is missing"; exit 1; fi
  echo "SKIP: $gguf is missing"; exit 77
fi
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/openai_client.mjs" "$work/"
if [ ! -d "$work/node_modules/openai" ]; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
fi

"$kvforge" serve -m "$gguf" --port 0 --ctx 512 --max-rows 16 2> "$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
base=""
for _ in $(seq 100); do
  base=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/serve.log")
  [ -n "$base" ] && "$py" -c "import urllib.request as u; u.urlopen('$base/health')" 2>/dev/null && break
  sleep 0.1
done
[ -n "$base" ] || { echo "FAIL: the server did not start"; cat "$work/serve.log"; exit 1; }
echo "server at $base"

expected=$("$kvforge" generate -m "$gguf" -p "Once upon a time" -n 24 --json |
  "$py" -c 'import json,sys; print(json.load(sys.stdin)["text"], end="")')
(cd "$work" && node openai_client.mjs "$base" "$expected" chat)

echo "wrk: ${load_seconds}s on loopback"
wrk -t 2 -c 16 -d "${load_seconds}s" --latency -s "$here/post.lua" "$base/v1/completions" > "$work/wrk.txt"
cat "$work/wrk.txt"
if grep -q "Non-2xx or 3xx responses" "$work/wrk.txt"; then echo "FAIL: wrk saw error responses"; exit 1; fi
grep -q "requests in" "$work/wrk.txt" || { echo "FAIL: wrk ran no requests"; exit 1; }

"$py" "$here/metrics_check.py" "$base" 10

# SIGTERM while a stream runs: the stream still ends with [DONE], the server exits 0. The
# signal goes once the first chunk has arrived (a fixed delay races the client's start).
rm -f "$work/started"  # the work directory outlives a run
"$py" - "$base" "$work/started" > "$work/stream.txt" <<'PY' &
import json, pathlib, sys, urllib.request
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "stream": True}).encode()
req = urllib.request.Request(sys.argv[1] + "/v1/completions", body, {"Content-Type": "application/json"})
resp = urllib.request.urlopen(req)
first = resp.readline()
pathlib.Path(sys.argv[2]).touch()
print((first + resp.read()).decode().strip().splitlines()[-1])
PY
client=$!
for _ in $(seq 100); do [ -e "$work/started" ] && break; sleep 0.1; done
kill -TERM $server
wait $client
rc=0; wait $server || rc=$?
trap - EXIT
[ "$rc" = 0 ] || { echo "FAIL: the server exited $rc after SIGTERM"; cat "$work/serve.log"; exit 1; }
[ "$(cat "$work/stream.txt")" = "data: [DONE]" ] || { echo "FAIL: the stream in flight did not finish: $(cat "$work/stream.txt")"; exit 1; }
grep -q "finishing the requests in flight" "$work/serve.log"
echo "PASS"
