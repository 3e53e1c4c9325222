#!/usr/bin/env bash
# Context parallelism on the GPU machine, in one run: the context-parallel and NCCL GPU tests
# (with KVF_REQUIRE_GPU=1); the built-in model's 200 greedy tokens over 2 ranks against one
# GPU; then decode (tg128) of the TinyLlama-1.1B-shaped F16 GGUF of models_run.sh at depth 0
# and 131072 for every cp in 1, 2, 4 that the visible GPUs hold (rank r on GPU r over NCCL),
# and the decode attention's time a token, taken as the difference of the two depths' token
# times, with its speed-up over cp 1. Logs go to $OUT (default build-cuda-out/).
#   usage: bench/cuda/cp_run.sh [KVFORGE] [TEST_GPU | -]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEPTH=${KVF_CP_DEPTH:-131072}
. "$ROOT/bench/cuda/ranks_env.sh" "$@"
rank_tests '*GpuContextParallel*:NcclGroup.*' cp
rc=$?

for cp in 1 2; do
  "$KVFORGE" generate -p "And God said" -n 200 --device cuda --kv-type f16 --cp "$cp" --json > "$OUT/cp_generate_$cp.json"
done
if python3 -c "import json, sys
a, b = (json.load(open('$OUT/cp_generate_%d.json' % c))['ids'] for c in (1, 2))
sys.exit(a != b)"; then
  echo "generate --cp 2: the 200 greedy ids equal one GPU's"
else
  echo "generate --cp 2: ids differ from one GPU's"; rc=1
fi

model=$(tinyllama_f16)
: > "$OUT/cp_e2e.txt"
for cp in 1 2 4; do
  [ "$cp" -le "$gpus" ] || continue
  for depth in 0 "$DEPTH"; do
    "$KVFORGE" bench e2e -m "$model" --device cuda --repeats 3 --pp 0 --tg 128 --depth "$depth" --cp "$cp" --json |
      tee -a "$OUT/cp_e2e.txt"
  done
done
python3 - "$OUT/cp_e2e.txt" <<'PY' | tee "$OUT/cp_table.txt"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
tok = {(r.get("cp", 1), r["depth"]): 1.0 / r["tg_tok_s"] for r in runs}
deep = max(d for _, d in tok)
base = None
for cp in sorted({c for c, _ in tok}):
    if (cp, 0) not in tok or (cp, deep) not in tok: continue
    attn = tok[(cp, deep)] - tok[(cp, 0)]
    base = base or attn
    print(f"cp {cp}: tg128 {1 / tok[(cp, 0)]:.1f} t/s at depth 0, {1 / tok[(cp, deep)]:.1f} at {deep}; "
          f"decode attention {attn * 1e6:.0f} us a token, {base / attn:.2f}x cp 1")
PY
exit $rc
