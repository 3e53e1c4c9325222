#!/usr/bin/env bash
# The one-row decode linears (gemv_bulk_row_kernel): the layer bench's shapes for f16 and q8_0
# weights, the GPU suite, and tg128 (F16, Q8_0, F16 at depth 32768) of the binary before it
# (kvforge.old) and after, alternated, on the GPU machine from the repository root.
#   run.sh BIN_DIR   (kvforge, kvforge.old, test_gpu, bench_cuda_gemv)
set -uo pipefail
B=${1:?usage: run.sh BIN_DIR}
OUT=${OUT:-$(pwd)/build-cuda-out}
M=/tmp/kvf-tinyllama
mkdir -p "$OUT" "$M"
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for t in f16 q8_0; do "$B/kvforge" convert -m synthetic:llama-1.1b --outtype $t -o "$M/$t.gguf" > /dev/null; done
"$B/bench_cuda_gemv" 1 "C2 G8 W8 pdl|bulk pdl|bulk R8 W8|row|dispatch" > "$OUT/gemv1_f16.txt"
KVF_BENCH_DTYPE=q8_0 "$B/bench_cuda_gemv" 1 > "$OUT/gemv1_q8.txt"
KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$B/test_gpu" | grep -E "^\[ +(FAILED|PASSED) |^\[==========\]" > "$OUT/test_gpu-summary.txt"
for t in f16 q8_0; do for bin in kvforge.old kvforge kvforge.old kvforge; do
  echo "$bin $("$B/$bin" bench e2e --device cuda --repeats 3 -m "$M/$t.gguf" --pp 0 --tg 128 | tail -n 1)"; done; done > "$OUT/tg.txt"
for bin in kvforge.old kvforge; do
  "$B/$bin" bench e2e --device cuda --repeats 3 -m "$M/f16.gguf" --pp 0 --tg 128 --depth 32768 | tail -n 1 >> "$OUT/tg.txt"
done
