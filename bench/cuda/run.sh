#!/usr/bin/env bash
# One call on the H200: configure and build (Release, sm_90) the CUDA kernels, their tests
# and the decode and prefill benchmarks with bench/cuda's standalone CMake project; run the gpu tests with
# KVF_REQUIRE_GPU=1; time kvforge prefill, the copy bandwidth, kvforge decode (dense, paged)
# and torch's sdpa (flash, cuDNN) on the same shapes; print the table last. Logs go to $OUT (default
# build-cuda-out/). GoogleTest: found, else built from .deps/googletest when it is there.
#   usage: bench/cuda/run.sh [reps]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/build-cuda-out}
BUILD=${KVF_CUDA_BUILD:-/tmp/kvf-cuda-build}
REPS=${1:-30}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv
  nvcc --version | tail -2
  cmake --version | head -1
  command -v ninja && ninja --version
  g++ --version | head -1
} 2>&1 | tee "$OUT/build.log"  # the environment heads the build log (one file fewer to fetch)

GEN=(-G Ninja)
command -v ninja >/dev/null || GEN=(-G "Unix Makefiles")
GT=()
[ -d "$ROOT/.deps/googletest" ] && GT=(-DKVF_GTEST_SOURCE="$ROOT/.deps/googletest")
t0=$(date +%s)
cmake -S "$ROOT/bench/cuda" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DKVF_CUDA_PTXAS_VERBOSE=ON \
  -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" "${GT[@]}" >>"$OUT/build.log" 2>&1 \
  && cmake --build "$BUILD" -j "$(nproc)" >>"$OUT/build.log" 2>&1
build_rc=$?
echo "build rc=$build_rc in $(( $(date +%s) - t0 )) s"
grep -E "error|FAILED" "$OUT/build.log" | head -20
grep -E "spill" "$OUT/build.log" | sort | uniq -c | head -5
[ $build_rc -eq 0 ] || { tail -30 "$OUT/build.log"; exit 1; }

KVF_REQUIRE_GPU=1 "$BUILD/test_cuda" 2>&1 | tee "$OUT/test.log" | grep -E "^\[ +(OK|FAILED|PASSED|worst|SKIPPED) |Failure|error|Expected|Which is|splits" | head -90
test_rc=${PIPESTATUS[0]}
echo "test rc=$test_rc"

# KVF_SANITIZE=1: compute-sanitizer memcheck over one test of each kernel family.
if [ "${KVF_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  KVF_REQUIRE_GPU=1 compute-sanitizer --tool memcheck "$BUILD/test_cuda" \
    --gtest_filter='CudaDecode.PagedShuffledBlocks:CudaDecode.SplitCounts:CudaPrefill.EveryHeadDimVarlen:CudaPrefill.GqaGroups' \
    >"$OUT/sanitizer.log" 2>&1
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" | tail -4
fi

# The SM clock and board power while a command runs (nvidia-smi every 100 ms), as one "#"
# line: the same prefill binary has measured 626-697 TFLOP/s from call to call.
clocks() {
  local samples="$BUILD.clocks"
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 >"$samples" 2>/dev/null &
  local mon=$!
  "$@"
  kill "$mon" 2>/dev/null; wait "$mon" 2>/dev/null
  python3 - "$samples" "$*" <<'PY'
import statistics, sys
rows = []
for line in open(sys.argv[1]):
    try:
        row = [float(x) for x in line.split(",")[:3]]
    except ValueError:  # "[N/A]" or a cut line
        continue
    if len(row) == 3:
        rows.append(row)
if rows:
    c, p, t = zip(*rows)
    print(f"# clocks during {sys.argv[2]}: SM MHz min {min(c):.0f} median {statistics.median(c):.0f} max {max(c):.0f}; "
          f"power W median {statistics.median(p):.0f} max {max(p):.0f}; max {max(t):.0f} C; {len(rows)} samples")
PY
}
clocks "$BUILD/bench_cuda_prefill" "$REPS" 2>&1 | tee "$OUT/prefill.log"
clocks "$BUILD/bench_cuda_prefill" "$REPS" extra 2>&1 | tee -a "$OUT/prefill.log"  # f16, d64/d256, varlen
"$BUILD/bench_cuda_decode" "$REPS" 2>&1 | tee "$OUT/bench.log"
PYTHONUNBUFFERED=1 timeout 300 python3 "$ROOT/bench/cuda/torch_peer.py" "$REPS" 2>&1 | tee "$OUT/torch.log"

# A variant build: bench/cuda configured with KVF_CUDA_DEFINES=$2 ("A=1;B=2") into
# $BUILD-$1, building targets $3...; says why and returns 1 when the build fails.
build_variant() {
  local name=$1 defs=$2 vb="$BUILD-$1"
  shift 2
  cmake -S "$ROOT/bench/cuda" -B "$vb" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" "${GT[@]}" \
    "-DKVF_CUDA_DEFINES=$defs" >"$vb.log" 2>&1 && cmake --build "$vb" -j "$(nproc)" --target "$@" >>"$vb.log" 2>&1 \
    || { echo "variant $name: build failed"; grep -E "error|spill" "$vb.log" | head -5; return 1; }
}
# The variant's gpu tests matching filter $2, one line per test, prefixed with its name.
variant_tests() {
  KVF_REQUIRE_GPU=1 "$BUILD-$1/test_cuda" --gtest_filter="$2" 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED|worst) |Failure" | sed "s/^/$1: /"
}

# Variants of the d128 tensor-core decode kernel (KVF_BENCH_VARIANTS="W4S3E1 W4S4E0 ..."): W warps
# per block, S pipeline stages per warp, E 1/0 for q and P split into two 16-bit parts or
# rounded to one; quick shapes only, after the variant's decode tests.
for v in ${KVF_BENCH_VARIANTS:-}; do
  [[ $v =~ ^W([0-9]+)S([0-9]+)E([01])$ ]] || { echo "bad variant $v"; continue; }
  build_variant "$v" "KVF_DMMA_W=${BASH_REMATCH[1]};KVF_DMMA_S=${BASH_REMATCH[2]};KVF_DMMA_EXACT=${BASH_REMATCH[3]}" \
    bench_cuda_decode test_cuda || continue
  variant_tests "$v" 'CudaDecode.*'
  "$BUILD-$v/bench_cuda_decode" "$REPS" quick 2>&1 | sed "s/^decode impl=kvforge/decode impl=kvforge-$v/" | tee -a "$OUT/variants.log"
done

# Define variants of the decode kernels (KVF_BENCH_DEFS="name:MACRO=V,MACRO=V ..."): any of the
# KVF_* compile-time switches, e.g. "w4s3:KVF_DMMA_W=4,KVF_DMMA_S=3" or the measurement probes
# "noloop:KVF_DECODE_PROBE=2" (decode_merge.cuh); the variant's decode tests (not for probes),
# then the quick shapes, labelled kvforge-<name>.
for v in ${KVF_BENCH_DEFS:-}; do
  [[ $v =~ ^([A-Za-z0-9_]+):([A-Za-z0-9_=,]+)$ ]] || { echo "bad define variant $v"; continue; }
  name=${BASH_REMATCH[1]}
  defs=${BASH_REMATCH[2]//,/;}
  build_variant "$name" "$defs" bench_cuda_decode test_cuda || continue
  [[ $defs == *KVF_DECODE_PROBE* ]] || variant_tests "$name" 'CudaDecode.*'  # probes compute wrong results by design
  "$BUILD-$name/bench_cuda_decode" "$REPS" quick 2>&1 | sed "s/^decode impl=kvforge/decode impl=kvforge-$name/" | tee -a "$OUT/variants.log"
done

# Tile variants of the d128 mma.sync prefill kernel (KVF_PREFILL_VARIANTS="M128N32W4B2 ..."):
# M query rows per block, N keys per K/V tile, W warps (M / (16 W) m tiles per warp), B min
# blocks; q stays in registers when a warp has one m tile. Each variant's prefill tests run
# too; only its mma.sync lines are kept (the wgmma kernel does not take these tiles).
for v in ${KVF_PREFILL_VARIANTS:-}; do
  [[ $v =~ ^M([0-9]+)N([0-9]+)W([0-9]+)B([0-9]+)$ ]] || { echo "bad prefill variant $v"; continue; }
  qr=false; [ "${BASH_REMATCH[1]}" -eq $(( 16 * ${BASH_REMATCH[3]} )) ] && qr=true
  build_variant "$v" \
    "KVF_PF128_M=${BASH_REMATCH[1]};KVF_PF128_N=${BASH_REMATCH[2]};KVF_PF128_W=${BASH_REMATCH[3]};KVF_PF128_B=${BASH_REMATCH[4]};KVF_PF128_Q=$qr" \
    bench_cuda_prefill test_cuda || continue
  variant_tests "$v" 'CudaPrefill*'
  "$BUILD-$v/bench_cuda_prefill" "$REPS" 2>&1 | grep "impl=kvforge-mma.sync" \
    | sed "s/^prefill impl=kvforge-mma.sync/prefill impl=kvforge-$v/" | tee -a "$OUT/prefill_variants.log"
done

# Define variants of the wgmma prefill kernel (KVF_PREFILL_DEFS="name:MACRO=V,MACRO=V ..."), e.g.
# "c3:KVF_WG64_C=3,KVF_WG64_P=0" (prefill_attention_sm90a.cu's KVF_WG<D>_* shapes); the
# variant's prefill tests, then the extra shapes (d 64/256 ...), labelled kvforge-<name>.
for v in ${KVF_PREFILL_DEFS:-}; do
  [[ $v =~ ^([A-Za-z0-9_]+):([A-Za-z0-9_=,]+)$ ]] || { echo "bad prefill define variant $v"; continue; }
  name=${BASH_REMATCH[1]}
  build_variant "$name" "${BASH_REMATCH[2]//,/;}" bench_cuda_prefill test_cuda || continue
  variant_tests "$name" 'CudaPrefill*'
  "$BUILD-$name/bench_cuda_prefill" "$REPS" extra 2>&1 | grep "impl=kvforge-d\|impl=kvforge-f16\|impl=kvforge-varlen" \
    | sed "s/^prefill impl=kvforge-/prefill impl=kvforge-$name-/" | tee -a "$OUT/prefill_variants.log"
done

echo
echo "== decode, Hq/Hkv 32/8, D 128, bf16 K/V, one query row; TB/s of unique K/V bytes; median of $REPS =="
# Only the logs that exist.
logs=()
for f in bench variants prefill prefill_variants torch; do [ -f "$OUT/$f.log" ] && logs+=("$OUT/$f.log"); done
python3 "$ROOT/bench/cuda/table.py" "${logs[@]}" | tee "$OUT/table.txt"
echo "tests: rc=$test_rc ($(grep -c '^\[       OK' "$OUT/test.log") ok, $(grep -c '^\[  FAILED  \] [A-Za-z]' "$OUT/test.log") failed lines)"
exit $test_rc
