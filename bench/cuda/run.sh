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

# Variants (KVF_BENCH_PATCHES="name:file.patch[:decode|prefill|extra] ..."): each a copy of the
# sources with one patch applied (a tile shape, a stage count, a probe that switches part of
# a kernel off), built in its own directory. Its tests of the kernel family run first
# (printed, prefixed with its name; a probe's fail by design), then its timings: decode
# (default) the quick decode shapes, labelled kvforge-<name>; prefill the d128 shapes of the
# mma.sync kernel, labelled kvforge-mma.sync-<name>; extra the extra prefill shapes,
# labelled kvforge-<name>-<shape>.
build_variant() {  # name, patch: the patched tree in $BUILD-$1-src, its build in $BUILD-$1
  local name=$1 patch=$2 tree="$BUILD-$1-src" vb="$BUILD-$1"
  rm -rf "$tree" && mkdir -p "$tree/tests" && cp -r "$ROOT/src" "$ROOT/cmake" "$ROOT/bench" "$tree/" \
    && cp -r "$ROOT/tests/cuda" "$ROOT/tests/test_seed.h" "$tree/tests/" \
    && (cd "$tree" && git apply "$patch") >"$vb.log" 2>&1 \
    && cmake -S "$tree/bench/cuda" -B "$vb" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
      "${GT[@]}" >>"$vb.log" 2>&1 \
    && cmake --build "$vb" -j "$(nproc)" --target bench_cuda_decode bench_cuda_prefill test_cuda >>"$vb.log" 2>&1 \
    || { echo "variant $name: build failed"; grep -E "error|spill|patch" "$vb.log" | head -5; return 1; }
}
for v in ${KVF_BENCH_PATCHES:-}; do
  IFS=: read -r name patch what <<<"$v"
  what=${what:-decode}
  [[ $name =~ ^[A-Za-z0-9_.]+$ && -f $patch ]] || { echo "bad variant $v (name:file.patch[:decode|prefill|extra])"; continue; }
  build_variant "$name" "$(realpath "$patch")" || continue
  family='CudaDecode.*'
  [ "$what" = decode ] || family='CudaPrefill*'
  KVF_REQUIRE_GPU=1 "$BUILD-$name/test_cuda" --gtest_filter="$family" 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED|worst) |Failure" | sed "s/^/$name: /"
  case $what in
    decode) "$BUILD-$name/bench_cuda_decode" "$REPS" quick 2>&1 | sed "s/^decode impl=kvforge/decode impl=kvforge-$name/" | tee -a "$OUT/variants.log" ;;
    prefill) "$BUILD-$name/bench_cuda_prefill" "$REPS" 2>&1 | grep "impl=kvforge-mma.sync" \
      | sed "s/^prefill impl=kvforge-mma.sync/prefill impl=kvforge-mma.sync-$name/" | tee -a "$OUT/prefill_variants.log" ;;
    extra) "$BUILD-$name/bench_cuda_prefill" "$REPS" extra 2>&1 | grep "impl=kvforge-d\|impl=kvforge-f16\|impl=kvforge-varlen" \
      | sed "s/^prefill impl=kvforge-/prefill impl=kvforge-$name-/" | tee -a "$OUT/prefill_variants.log" ;;
    *) echo "variant $name: what is one of decode, prefill, extra" ;;
  esac
done

echo
echo "== decode, Hq/Hkv 32/8, D 128, bf16 K/V, one query row; TB/s of unique K/V bytes; median of $REPS =="
# Only the logs that exist.
logs=()
for f in bench variants prefill prefill_variants torch; do [ -f "$OUT/$f.log" ] && logs+=("$OUT/$f.log"); done
python3 "$ROOT/bench/cuda/table.py" "${logs[@]}" | tee "$OUT/table.txt"
echo "tests: rc=$test_rc ($(grep -c '^\[       OK' "$OUT/test.log") ok, $(grep -c '^\[  FAILED  \] [A-Za-z]' "$OUT/test.log") failed lines)"
exit $test_rc
