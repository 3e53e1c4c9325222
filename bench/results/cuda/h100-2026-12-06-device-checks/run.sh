#!/usr/bin/env bash
# One H100, one session. ab.txt: builds alternated twice (tg128 F16; batched decode of 8, 32
# and 64 sequences of 128 random prompt ids and 128 greedy tokens, paged f16 KV), F16 tg128 at
# depth 32768 once each, and each build's greedy ids against the first's. The builds:
# 7453620 ("main"), the step's validations over more than 64 elements checked in its graph
# instead of on the host ("dev", 9518788), dev with the d64 tensor-core decode at 8 warps x 3
# stages ("w8s3", now the default), dev with at least 2 key splits for a paged
# tensor-core decode of 128+ keys ("sp2", dropped). table.txt: bench/cuda/side_by_side.sh on
# w8s3 beside llama.cpp's CUDA build (e2e.txt, peer.txt: its raw output; its GPU suite passed).
#   bench/results/cuda/h100-2026-12-06-device-checks/run.sh BUILD...   (folders holding kvforge)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$1:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=${OUT:-/tmp}/ab && M=/tmp/kvf-tinyllama && mkdir -p $W $M
"$1/kvforge" convert -m synthetic:llama-1.1b --outtype f16 -o $M/f16.gguf > /dev/null 2>&1
for n in 8 32 64; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" > $M/batch$n.jsonl
done
batch() {  # build index, rows
  "${!1}/kvforge" batch -m $M/f16.gguf --device cuda --kv-type f16 --requests $M/batch$2.jsonl \
    --max-rows $2 --max-batch-tokens 8192 --json 2> /dev/null > $W/batch_$1_$2.txt
  echo "${!1} batch $2 $(tail -n 1 $W/batch_$1_$2.txt | python3 -c 'import json, sys; print(round(json.load(sys.stdin)["decode_tokens_per_s"]))')"
}
{
for round in 1 2; do for i in $(seq 1 $#); do
  echo "${!i} $("${!i}/kvforge" bench e2e --device cuda --repeats 3 -m $M/f16.gguf --pp 0 --tg 128 | tail -n 1 | sed 's/.*tg128/tg128/')"
  for n in 8 32 64; do batch $i $n; done
done; done
for i in $(seq 1 $#); do
  echo "${!i} depth 32768 $("${!i}/kvforge" bench e2e --device cuda --repeats 1 -m $M/f16.gguf --pp 0 --tg 128 --depth 32768 | tail -n 1 | sed 's/.*tg128/tg128/')"
done
for i in $(seq 2 $#); do for n in 8 32 64; do
  echo "greedy ids ${!i} vs $1, $n rows: $(python3 -c "import json, sys
ids = lambda f: [json.loads(l)['ids'] for l in open(f).read().splitlines()[:-1]]
a, b = ids(sys.argv[1]), ids(sys.argv[2]); print(sum(x == y for x, y in zip(a, b)), 'of', len(a))" $W/batch_${i}_$n.txt $W/batch_1_$n.txt)"
done; done
} | tee "$HERE/ab.txt"
bash bench/cuda/side_by_side.sh "$3" build-gpu/carry/llama-trim.tar.xz
cp "${OUT:-build-cuda-out}"/{e2e.txt,peer.txt,table.txt} "$HERE/"
