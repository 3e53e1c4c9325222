#!/usr/bin/env bash
# The TinyLlama-shaped table of docs/benchmarks.md in one call on the GPU machine: llama.cpp's
# CUDA build compiles (peer_run.sh build, at nice 19) while the GPU suites run (test_gpu and,
# where BIN_DIR has it, test_cuda: the attention kernels against f64 references); then, with the
# GPU quiet, kvforge's benchmarks (models_run.sh, on files that carry llama.cpp's SPM
# vocabulary so that both engines load them) and llama.cpp's on the same files
# (peer_run.sh run); last, side_by_side.py prints the table with each ratio and target.
# Logs go to $OUT (default build-cuda-out/). Run from the repository root.
#   usage: bench/cuda/side_by_side.sh BIN_DIR LLAMA_SRC_TARBALL
#   BIN_DIR holds kvforge, test_gpu and test_cuda; the tarball is the source node-llama-cpp bundles.
#   bench/cuda/bundle.sh packs both where they are built (bins, llama).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=${1:?usage: side_by_side.sh BIN_DIR LLAMA_SRC_TARBALL}
TAR=${2:?usage: side_by_side.sh BIN_DIR LLAMA_SRC_TARBALL}
export OUT=${OUT:-$ROOT/build-cuda-out}
export KVF_PEER_WORK=${KVF_PEER_WORK:-/tmp/llama-cuda}
export LD_LIBRARY_PATH=$B:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT"

nice -n 19 "$HERE/peer_run.sh" build "$TAR" > "$OUT/peer_build.txt" 2>&1 &
build=$!
for suite in test_gpu test_cuda; do
  [ -x "$B/$suite" ] || { echo "$suite: not in $B"; continue; }
  KVF_SOURCE_DIR=$ROOT KVF_REQUIRE_GPU=1 "$B/$suite" > "$OUT/$suite.log" 2>&1
  echo "$suite rc=$?: $(grep -E '^\[ +(PASSED|FAILED) ' "$OUT/$suite.log" | tr '\n' ' ')"
  echo "  at ${SECONDS} s"
done
if ! wait $build; then
  tail -n 30 "$OUT/peer_build.txt"
  exit 1
fi
echo "peer built at ${SECONDS} s"
KVF_BENCH_VOCAB=$KVF_PEER_WORK/src/models/ggml-vocab-llama-spm.gguf "$HERE/models_run.sh" "$B/kvforge" - > "$OUT/kvforge.txt" 2>&1
echo "kvforge's benchmarks done at ${SECONDS} s"
"$HERE/peer_run.sh" run > /dev/null 2>&1
echo "the peer's done at ${SECONDS} s"
python3 "$HERE/side_by_side.py" "$OUT/e2e.txt" "$OUT/peer.txt" | tee "$OUT/table.txt"
