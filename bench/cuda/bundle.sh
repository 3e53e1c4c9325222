#!/usr/bin/env bash
# What bench/cuda/side_by_side.sh and ab_tg.sh need on a GPU machine that has CUDA but none
# of our Debian -dev packages, packed here:
#   bundle.sh bins OUT.tar.xz [BUILD]   kvforge, test_gpu, test_cuda, bench_cuda_gemv,
#                                        bench_cuda_decode and bench_cuda_kv_parallel of BUILD
#                                        (default build/; the suites where it was configured
#                                        with -DKVF_GPU_TESTS=ON), stripped,
#                                        with the shared libraries kvforge takes from Debian,
#                                        in one folder named after OUT (bin.tar.xz -> bin/)
#   bundle.sh llama OUT.tar.xz           the llama.cpp source that node-llama-cpp bundles
#                                        (bench/peers/build-llama-bench.sh), without its git
#                                        history, docs and model files but the SPM vocabulary
#                                        the benchmark models carry
# Unpack with `tar -xJf OUT.tar.xz -C DIR`; side_by_side.sh takes DIR/bin and the llama tarball.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: bundle.sh bins|llama OUT.tar.xz [BUILD]}
out=$(realpath -m "${2:?usage: bundle.sh bins|llama OUT.tar.xz [BUILD]}")
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Builds of one tree share most bytes: a dictionary as large as several binaries finds them.
pack() { tar -C "$1" -cf - "$2" | xz -T2 -9e --lzma2=dict=192MiB > "$out"; ls -l "$out"; }

case "$mode" in
  bins)
    build=$(realpath "${3:-$ROOT/build}")
    name=$(basename "$out" .tar.xz)
    mkdir -p "$work/$name"
    for b in src/kvforge tests/test_gpu tests/test_cuda bench/bench_cuda_gemv bench/bench_cuda_decode bench/bench_cuda_kv_parallel; do
      [ -x "$build/$b" ] && strip -o "$work/$name/$(basename "$b")" "$build/$b"
    done
    [ -x "$work/$name/kvforge" ] || { echo "bundle: no kvforge in $build" >&2; exit 1; }
    # Every library kvforge resolves outside glibc, the compiler's runtime and CUDA's own.
    ldd "$build/src/kvforge" | awk '$3 ~ /^\// {print $3}' |
      grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt|libz|libcudart)\.so' |
      while read -r lib; do cp -L "$lib" "$work/$name/"; done
    pack "$work" "$name"
    ;;
  llama)
    src=$("$ROOT/bench/peers/build-llama-bench.sh" "$ROOT/build/peers" source | tail -n 1)
    cp -a "$src" "$work/src"
    (cd "$work/src" && rm -rf .git docs benches media tools/ui tools/server/public* &&
      find models -name '*.gguf*' ! -name ggml-vocab-llama-spm.gguf -delete)
    pack "$work/src" .
    ;;
  *) echo "usage: bundle.sh bins|llama OUT.tar.xz [BUILD]" >&2; exit 2 ;;
esac
