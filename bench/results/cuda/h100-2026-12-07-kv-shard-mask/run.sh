#!/usr/bin/env bash
# The pool form of kv_shard_map with each mask row's loads issued before its stores
# (bench_cuda_kv_parallel: kvp.txt), the context-parallel GPU tests with the paged driver's
# f16 and f32 caches (tests.txt), and `kvforge batch --device cuda` over the built-in model
# with cp 1 and 2, f32 and f16 caches (batch_cp*.jsonl: the same ids for cp 1 and 2).
#   usage (repository root, on the GPU machine): run.sh BIN_DIR   (bench/cuda/bundle.sh bins)
set -u
OUT=${OUT:-build-cuda-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$1:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/tests.txt"
"$1/bench_cuda_kv_parallel" 50 > "$OUT/kvp.txt"
KVF_SOURCE_DIR=$PWD KVF_REQUIRE_GPU=1 "$1/test_gpu" --gtest_filter='*GpuContextParallel*:GpuPoolShare.*' |
  grep -E '^\[ +(FAILED|PASSED|OK) ' >> "$OUT/tests.txt"
for cp in 1 2; do
  for kv in f32 f16; do
    "$1/kvforge" batch --requests tests/cli/batch_requests.jsonl --device cuda --kv-type $kv --cp $cp --json \
      > "$OUT/batch_cp${cp}_$kv.jsonl"
    echo "batch cp $cp $kv rc=$?" >> "$OUT/tests.txt"
  done
done
for kv in f32 f16; do
  python3 - "$OUT/batch_cp1_$kv.jsonl" "$OUT/batch_cp2_$kv.jsonl" "$kv" >> "$OUT/tests.txt" <<'PY'
import json, sys
ids = lambda f: {d["id"]: d["ids"] for d in map(json.loads, open(f)) if "ids" in d}
a, b = ids(sys.argv[1]), ids(sys.argv[2])
print(f"{sys.argv[3]}: cp 2 ids == cp 1 ids" if a == b and a else f"{sys.argv[3]}: DIFFER", len(a), "requests")
PY
done
