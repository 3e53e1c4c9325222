#!/usr/bin/env bash
# What LoRA adapters cost on the CPU, on the ~125M llama of bench/peers as F16 (written here by
# `kvforge convert` from synthetic:llama-125m): tg128 with a rank-16 adapter on all seven
# projections against tg128 without it (measured in turn by one `bench e2e --lora`), and a
# batch of 16 requests (64 prompt tokens, 64 greedy tokens each) spread over 4 rank-16
# adapters against the same batch without adapters, the steady decode rate of each, back to
# back. ROUNDS rounds.
#   bench/lora/run.sh [KVFORGE=build/src/kvforge] [THREADS=2] [ROUNDS=3]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kvforge=${1:-$root/build/src/kvforge}
threads=${2:-2}
rounds=${3:-3}
work=${KVF_BENCH_WORK:-/tmp/kvf-lora-bench}
mkdir -p "$work"
model=$work/llama-125m-f16.gguf
[ -f "$model" ] || "$kvforge" convert -m synthetic:llama-125m --outtype f16 -o "$model" 2>&1 | grep -v "has no tokenizer" || true
python3 - "$work" <<'PY'
import json, random, sys
r = random.Random(16)
for name, lora in (("plain", None), ("four", "abcd")):
    with open(f"{sys.argv[1]}/{name}.jsonl", "w") as f:
        for i in range(16):
            req = {"id": f"r{i}", "ids": [r.randrange(1, 32000) for _ in range(64)], "max_tokens": 64, "temperature": 0}
            if lora:
                req["lora"] = lora[i % 4]
            f.write(json.dumps(req) + "\n")
PY
adapters=(--lora a=synthetic:r16 --lora b=synthetic:r16 --lora c=synthetic:r16 --lora d=synthetic:r16)
decode_rate() {
  "$kvforge" batch -m "$model" --threads "$threads" --kv-type f16 --requests "$work/$1.jsonl" --max-rows 16 \
    --max-batch-tokens 1024 "${adapters[@]}" --json 2>/dev/null | tail -n 1 |
    python3 -c "import json, sys; print(json.load(sys.stdin)['decode_tokens_per_s'])"
}
for round in $(seq "$rounds"); do
  echo "round $round"
  # tg128 with the adapter and without it, in turn within one process.
  "$kvforge" bench e2e -m "$model" --threads "$threads" --pp 0 --tg 128 --repeats 7 --lora synthetic:r16
  plain=$(decode_rate plain)
  four=$(decode_rate four)
  python3 -c "print(f'batch of 16 decode: {$four:.1f} tok/s over 4 adapters, {$plain:.1f} tok/s without; with/without {$four / $plain:.2f}x')"
done
