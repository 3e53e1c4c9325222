#!/usr/bin/env bash
set -uo pipefail
tar -xJf .gpu/bin.tar.xz -C .gpu   # stripped kvforge + libpcre2 built on the CPU machine
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.gpu/bin
M=/tmp/m; mkdir -p $M
$B/kvforge convert -m synthetic:llama-1.1b --vocab .gpu/ggml-vocab-llama-spm.gguf --outtype f16 -o $M/f16.gguf 2>&1 | tail -1
for n in 8 16 32 64; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" > $M/b$n.jsonl
  echo "batch $n"; $B/kvforge batch -m $M/f16.gguf --device cuda --kv-type f16 --requests $M/b$n.jsonl --max-rows $n --max-batch-tokens 8192 --json 2>/dev/null | grep -E '"summary"|decode_tokens_per_s' | tail -1 | head -c 700; echo
done
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
