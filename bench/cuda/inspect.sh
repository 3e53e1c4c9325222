#!/usr/bin/env bash
# What the SASS and ncu say about the attention kernels, on the GPU machine: instruction-class
# counts of the wgmma prefill and tensor-core decode kernels (cuobjdump), and ncu's speed of
# light, pipe use and warp stall reasons for one launch of each. Builds bench/cuda like run.sh.
#   usage: bench/cuda/inspect.sh     (logs to $OUT, default build-cuda-out/)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/build-cuda-out}
B=${KVF_CUDA_BUILD:-/tmp/kvf-cuda-build}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
GT=()
[ -d "$ROOT/.deps/googletest" ] && GT=(-DKVF_GTEST_SOURCE="$ROOT/.deps/googletest")
cmake -S "$ROOT/bench/cuda" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release "${GT[@]}" >"$OUT/inspect-build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" >>"$OUT/inspect-build.log" 2>&1 || { tail -20 "$OUT/inspect-build.log"; exit 1; }

ops='HGMMA\.[A-Z0-9x.]*|HMMA\.[A-Z0-9x.]*|LDSM\.[A-Z0-9x.]*|LDGSTS\.[A-Z0-9.]*|UTMALDG\.[A-Z0-9.]*|SYNCS\.[A-Z.0-9]*|WARPGROUP\.[A-Z]*|MUFU\.EX2|SHFL\.BFLY|BAR\.[A-Z]*|F2FP\.[A-Z0-9.]*|FMUL|FFMA|FMNMX|FADD'
cuobjdump -sass "$B/libkvf_cuda.a" >"$OUT/sass.txt" 2>&1
# bf16 causal wgmma prefill per head dim, then the d128 tensor-core decode, dense and paged.
# The highest register a kernel's SASS names and its USETMAXREG count tell whether ptxas gave
# the consumer path more than the launch bound's registers after setmaxnreg (docs/cuda.md).
for k in 'prefill_wgmma_kernelILi64ELb0ELb1E' 'prefill_wgmma_kernelILi128ELb0ELb1E' 'prefill_wgmma_kernelILi256ELb0ELb1E' \
         'decode_mma_kernelI13__nv_bfloat16Li128ELb0E' 'decode_mma_kernelI13__nv_bfloat16Li128ELb1E'; do
  echo "== SASS op counts: $k"
  awk -v k="$k" '/Function : /{f = index($0, k) > 0; next} f' "$OUT/sass.txt" >"$OUT/sass_one.txt"
  grep -oE "$ops" "$OUT/sass_one.txt" | sort | uniq -c | sort -rn
  echo "highest register: R$(grep -oE '\bR[0-9]+' "$OUT/sass_one.txt" | tr -d R | sort -n | tail -1);" \
    "USETMAXREG: $(grep -c USETMAXREG "$OUT/sass_one.txt")"
done | tee "$OUT/sass_counts.txt"
rm -f "$OUT/sass_one.txt"
rm -f "$OUT/sass.txt"  # ~50 MB: too large to bring back
[ "${KVF_INSPECT_NCU:-1}" = 1 ] || exit 0

stalls=smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active,smsp__average_warps_issue_stalled_wait_per_issue_active,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active,smsp__average_warps_issue_stalled_barrier_per_issue_active,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active,smsp__average_warps_issue_stalled_selected_per_issue_active
echo "== ncu: wgmma prefill, causal 16k (one launch)"
ncu -k regex:prefill_wgmma -c 1 --launch-skip 4 --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section WarpStateStats --metrics "$stalls" "$B/bench_cuda_prefill" 1 >"$OUT/ncu_prefill.txt" 2>&1
grep -E "Duration|Throughput|Issue Slots|Warp Cycles Per Issued|stalled|highest-utilized" "$OUT/ncu_prefill.txt"
echo "== ncu: tensor-core decode, B=8 ctx=131072 dense (one launch)"
ncu -k regex:decode_mma -c 1 --launch-skip 3 --section SpeedOfLight --section WarpStateStats --metrics "$stalls" \
  "$B/bench_cuda_decode" 1 shape 8 131072 0 >"$OUT/ncu_decode.txt" 2>&1
grep -E "Duration|Throughput|Warp Cycles Per Issued|stalled" "$OUT/ncu_decode.txt"
