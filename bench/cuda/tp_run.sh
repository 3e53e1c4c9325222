#!/usr/bin/env bash
# Tensor parallelism on the GPU machine, in one run: the tensor-parallel and NCCL GPU tests
# (with KVF_REQUIRE_GPU=1), then `kvforge bench e2e --device cuda --tp N` decode (tg128) on
# the TinyLlama-1.1B-shaped F16 GGUF of models_run.sh for every N in 1, 2, 4 that the
# visible GPUs hold (its 4 KV heads do not split 8 ways; rank r on GPU r over NCCL; on one
# GPU, tp 1 and the host-summed tp 2 check), and `kvforge batch --tp 2` greedy ids against
# tp 1 on 8 requests; with two GPUs or more, tg128 of the Llama-3-8B shape at tp 1, 2, 4.
# Logs go to $OUT (default build-cuda-out/).
#   usage: bench/cuda/tp_run.sh [KVFORGE] [TEST_GPU | -]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/cuda/ranks_env.sh" "$@"
rank_tests 'GpuTensorParallel.*:NcclGroup.*' tp
test_rc=$?

model=$(tinyllama_f16)
: > "$OUT/tp_e2e.txt"
for tp in 1 2 4; do
  [ "$tp" -le "$gpus" ] || [ "$tp" -eq 2 ] || continue
  "$KVFORGE" bench e2e -m "$model" --device cuda --repeats 3 --pp 0 --tg 128 --tp "$tp" --json | tee -a "$OUT/tp_e2e.txt"
done
python3 -c "import json, random
r = random.Random(8)
for i in range(8): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(64)], 'max_tokens': 32, 'temperature': 0}))" \
  > "$MODELS/tp_batch8.jsonl"
for tp in 1 2; do
  "$KVFORGE" batch -m "$model" --device cuda --dtype f32 --requests "$MODELS/tp_batch8.jsonl" --tp "$tp" --json \
    > "$OUT/tp_batch_$tp.jsonl"
done
if cmp -s <(grep -v summary "$OUT/tp_batch_1.jsonl" | python3 -c "import json,sys; [print(json.loads(l)['ids']) for l in sys.stdin]") \
          <(grep -v summary "$OUT/tp_batch_2.jsonl" | python3 -c "import json,sys; [print(json.loads(l)['ids']) for l in sys.stdin]"); then
  echo "batch --tp 2: every request's greedy ids equal tp 1's"
else
  echo "batch --tp 2: ids differ from tp 1's"; test_rc=1
fi
# The 8B shape (Llama-3-8B: hidden 4096, 32 layers, 32/8 heads, ffn 14336, vocab 128256) where
# two GPUs or more are visible: 16 GB of F16 written once, then tg128 at tp 1, 2 and 4.
if [ "$gpus" -ge 2 ]; then
  big=$MODELS/llama-8b-f16.gguf
  [ -f "$big" ] || "$KVFORGE" convert -m synthetic:llama-8b --outtype f16 -o "$big" 2>&1 | grep -v "has no tokenizer"
  for tp in 1 2 4; do
    [ "$tp" -le "$gpus" ] || continue
    "$KVFORGE" bench e2e -m "$big" --device cuda --repeats 3 --pp 0 --tg 128 --tp "$tp" --json | tee -a "$OUT/tp_e2e_8b.txt"
  done
fi
exit $test_rc
