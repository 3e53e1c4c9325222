#!/usr/bin/env bash
# Stream kernel: cluster split-k + epilogue adds first; variant b2 = two k boxes a stage.
source build-gpu/carry/setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
KVF_REQUIRE_GPU=1 timeout 100 $B/test_gpu --gtest_filter='GemmStream*' > $OUT/test_stream.log 2>&1; echo "test_gpu stream rc=$?"
grep -E "^\[ +(FAILED|PASSED) |Failure|rel|Expected|Which" $OUT/test_stream.log | head -12
KVF_REQUIRE_GPU=1 timeout 100 $B/test_gpu.b2 --gtest_filter='GemmStream*' > $OUT/test_stream_b2.log 2>&1; echo "test_gpu.b2 stream rc=$?"
grep -E "^\[ +(FAILED|PASSED) |Failure|rel|Expected|Which" $OUT/test_stream_b2.log | head -12
for r in 64 32 16; do timeout 60 $B/bench_cuda_gemv $r "dispatch|stream" 2>&1 | tee $OUT/gemv$r.txt | tail -n +2; timeout 60 $B/bench_cuda_gemv.b2 $r "stream" 2>&1 | tail -n +3 | sed 's/^stream /b2     /'; done
timeout 60 $B/bench_cuda_gemv 1 "C2 G8 W8 pdl|stream" 2>&1 | tail -n +2; timeout 60 $B/bench_cuda_gemv.b2 1 "stream" 2>&1 | tail -n +3 | sed 's/^stream /b2     /'
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M="gpu__time_duration.sum,dram__bytes_read.sum.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__sectors_read.sum,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_sleeping_per_warp_active.pct,smsp__warp_issue_stalled_misc_per_warp_active.pct"
for v in bench_cuda_gemv bench_cuda_gemv.b2; do
  echo "== ncu $v"
  [ -n "$NCU" ] && timeout 100 $NCU --metrics $M -k regex:gemm_stream --launch-skip 8 --launch-count 4 $B/$v 64 "stream" 2>&1 | grep -vE "^==PROF==|^\s*$" | tail -80 > $OUT/ncu64_$v.txt
  grep -vE "^shape|^stream|^Tiny" $OUT/ncu64_$v.txt | sed 's/  */ /g' | head -70
done
M=/tmp/kvf-tinyllama; mkdir -p $M
$B/kvforge convert -m synthetic:llama-1.1b --outtype f16 -o $M/f16.gguf > /dev/null 2>&1 || echo convert failed
for n in 64 32 16; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" > $M/b$n.jsonl
  for bin in kvforge kvforge.st kvforge.st2 kvforge; do
    timeout 60 $B/$bin batch -m $M/f16.gguf --device cuda --kv-type f16 --requests $M/b$n.jsonl --max-rows $n --max-batch-tokens 8192 --json > $OUT/batch_${bin}_$n.jsonl 2>$OUT/batch_${bin}_$n.err
    echo "$bin rows $n: $(tail -n 1 $OUT/batch_${bin}_$n.jsonl | python3 -c "import json, sys; j = json.load(sys.stdin); print({k: j[k] for k in ('decode_tokens_per_s', 'decode_s')})" 2>&1)"
  done
  python3 - $OUT/batch_kvforge_$n.jsonl $OUT/batch_kvforge.st_$n.jsonl <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p) if '"id"' in l] for p in sys.argv[1:3])
same = sum(x.get('ids') == y.get('ids') or x.get('tokens') == y.get('tokens') for x, y in zip(sorted(a, key=lambda r: r['id']), sorted(b, key=lambda r: r['id'])))
print(f"  same outputs: {same} of {len(a)}")
PY
done
bash build-gpu/carry/ncu_gemv.sh 2>&1 | grep -E "gemv|duration|dram__|grid|block_size|registers|warps_active|occupancy|stalled|hit_rate|inst_executed" | head -60
