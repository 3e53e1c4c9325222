#!/usr/bin/env bash
# Builds one of llama.cpp's tools (CPU only, -march=native) from the source that npm
# node-llama-cpp 3.21.1 ships as llama/gitRelease.bundle, and prints the binary's path:
# llama-bench (the default), llama-server or llama-quantize (which writes the K-quant files);
# TOOL `source` builds nothing and prints the source's folder. We time llama.cpp through its
# own tools: the package's JavaScript API adds ~18 ms per token (docs/benchmarks.md, "Peers").
#   build-llama-bench.sh [OUT_DIR] [TOOL]    (default: build/peers of this repository, llama-bench)
# Idempotent: once OUT_DIR/bin/TOOL exists it only prints the path.
# Needs git, cmake, a C++17 compiler (scripts/install-deps.sh) and Node.js >= 20 with npm.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/peers}
mkdir -p "$out"
out=$(cd "$out" && pwd)
peer=${2:-llama-bench}
case "$peer" in llama-bench|llama-server|llama-quantize|source) ;; *) echo "build-llama-bench: unknown tool $peer" >&2; exit 2 ;; esac
bin="$out/bin/$peer"
# Progress goes to stderr, so that stdout is only the binary's path (callers capture it).
exec 3>&1 1>&2
jobs=${KVF_PEER_JOBS:-2}   # the shared benchmark machine has 2 cores

if [ -x "$bin" ]; then
  echo "$bin" >&3
  exit 0
fi

for tool in git cmake npm; do
  command -v "$tool" >/dev/null || { echo "build-llama-bench: '$tool' is missing" >&2; exit 1; }
done

# 1. The pinned package, from the committed lock file. --ignore-scripts: its postinstall
#    would fetch or build node bindings, and we only want the source bundle.
npm_dir="$out/npm"
bundle="$npm_dir/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [ ! -f "$bundle" ]; then
  mkdir -p "$npm_dir"
  cp "$here/package.json" "$here/package-lock.json" "$npm_dir/"
  (cd "$npm_dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
[ -f "$bundle" ] || { echo "build-llama-bench: $bundle is missing after npm ci" >&2; exit 1; }

# 2. The source at the bundle's HEAD; a clone left over from another bundle is replaced.
src="$out/llama.cpp"
want=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')
have=$(git -C "$src" rev-parse HEAD 2>/dev/null || true)
if [ -z "$want" ] || [ "$have" != "$want" ]; then
  rm -rf "$src"
  git -c advice.detachedHead=false clone --quiet "$bundle" "$src"
fi
if [ "$peer" = source ]; then
  echo "$src" >&3
  exit 0
fi

# 3. Configure once. Static libraries so that bin/TOOL stands alone; tools and the server
#    on (both live under tools/), everything else off. LLAMA_CURL is deprecated in
#    this llama.cpp (downloads go through cpp-httplib, hence LLAMA_OPENSSL=OFF) but is
#    kept off explicitly for older bundles.
#    AMX off: -march=native turns on ggml's AMX kernels wherever the CPU reports AMX, and on
#    the shared benchmark machine (a VM whose CPU reports amx_int8) their q8_0 mul_mat
#    segfaults at the first decode. KVF_PEER_AMX=1 keeps them, for a machine where they run.
build="$out/llama.cpp-build"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
no_amx=""
[ "${KVF_PEER_AMX:-0}" = 1 ] || no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
if [ ! -f "$build/CMakeCache.txt" ] || grep -q '^LLAMA_BUILD_SERVER:BOOL=OFF' "$build/CMakeCache.txt" ||
   ! grep -q "^CMAKE_CXX_FLAGS:STRING=$no_amx\$" "$build/CMakeCache.txt"; then
  cmake -S "$src" -B "$build" "${generator[@]}" -Wno-dev \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF \
    -DGGML_BACKEND_DL=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON
fi

# 4. Only the one target.
cmake --build "$build" --target "$peer" -j "$jobs"
built=$(find "$build" -type f -name "$peer" -perm -u+x | head -n 1)
[ -n "$built" ] || { echo "build-llama-bench: no $peer under $build" >&2; exit 1; }
mkdir -p "$out/bin"
cp "$built" "$bin.tmp" && mv "$bin.tmp" "$bin"
echo "$bin" >&3
