#!/usr/bin/env bash
# llama.cpp's CUDA build beside kvforge on the same GGUF files, on the GPU machine: builds
# llama-bench and llama-batched-bench (-DGGML_CUDA=ON, sm_90) from a tarball of the source
# that node-llama-cpp bundles (`bench/cuda/bundle.sh llama` packs it; bring it along), then
# runs them on the TinyLlama-shaped F16 and Q8_0 files that models_run.sh writes: pp512,
# pp4096, tg128, tg128 at depths 8192 and 32768 (llama-bench, every layer on the GPU, flash
# attention on) and batched decode of 8, 32 and 64 sequences (llama-batched-bench, 128-token
# prompts, 128 tokens each). Logs go to $OUT. The build can run while the GPU does other
# work; the benchmarks should have the GPU to themselves.
#   usage: bench/cuda/peer_run.sh build LLAMA_SRC_TARBALL | run [MODELS_DIR]
set -uo pipefail
OUT=${OUT:-$(pwd)/build-cuda-out}
WORK=${KVF_PEER_WORK:-/tmp/llama-cuda}
bin=$WORK/build/bin
mkdir -p "$OUT" "$WORK/src"
case "${1:-}" in
  build) SRC_TAR=${2:?usage: peer_run.sh build LLAMA_SRC_TARBALL} ;;
  run) MODELS=${2:-${KVF_BENCH_MODELS:-/tmp/kvf-tinyllama}} ;;
  *) echo "usage: peer_run.sh build LLAMA_SRC_TARBALL | run [MODELS_DIR]" >&2; exit 2 ;;
esac

if [ "$1" = build ]; then
[ -f "$WORK/src/CMakeLists.txt" ] || tar -xJf "$SRC_TAR" -C "$WORK/src"
start=$SECONDS
cmake -S "$WORK/src" -B "$WORK/build" -G Ninja -Wno-dev -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DGGML_BACKEND_DL=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON > "$OUT/peer_build.log" 2>&1 &&
  cmake --build "$WORK/build" --target llama-bench llama-batched-bench -j "${KVF_PEER_JOBS:-$(nproc)}" >> "$OUT/peer_build.log" 2>&1
rc=$?
echo "peer build rc=$rc in $((SECONDS - start)) s" | tee -a "$OUT/peer.txt"
[ $rc -eq 0 ] || tail -30 "$OUT/peer_build.log"
exit $rc
fi

"$bin/llama-bench" -m "$MODELS/tinyllama-f16.gguf" -ngl 99 -fa 1 -p 512,4096 -n 0 -r 3 2>&1 | tee -a "$OUT/peer.txt"
"$bin/llama-bench" -m "$MODELS/tinyllama-f16.gguf" -ngl 99 -fa 1 -p 0 -n 128 -d 0,8192,32768 -r 3 2>&1 | tee -a "$OUT/peer.txt"
"$bin/llama-bench" -m "$MODELS/tinyllama-q8_0.gguf" -ngl 99 -fa 1 -p 0 -n 128 -r 3 2>&1 | tee -a "$OUT/peer.txt"
"$bin/llama-batched-bench" -m "$MODELS/tinyllama-f16.gguf" -ngl 99 -fa on -c 33000 -b 2048 -ub 512 \
  -npp 128 -ntg 128 -npl 8,32,64 2>&1 | grep -E "^\|" | tee -a "$OUT/peer.txt"
