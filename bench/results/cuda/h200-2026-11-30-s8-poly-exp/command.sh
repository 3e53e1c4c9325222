export PATH=$PATH:/usr/local/cuda/bin
for v in base:KVF_WG_POLY=0 poly2:KVF_WG_POLY=2 poly4:KVF_WG_POLY=4; do
  n=${v%%:*}; d=${v#*:}; b=/tmp/kvf-$n
  cmake -S bench/cuda -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=$(command -v nvcc) -DKVF_GTEST_SOURCE=$PWD/.deps/googletest "-DKVF_CUDA_DEFINES=$d" > $b.log 2>&1 && cmake --build $b -j 16 --target bench_cuda_prefill test_cuda >> $b.log 2>&1 || { echo "$n build failed"; grep -E "error" $b.log | head; }
  KVF_REQUIRE_GPU=1 $b/test_cuda --gtest_filter='CudaPrefill*' 2>&1 | grep -E "^\[ +(FAILED|PASSED|worst) |Failure" | sed "s/^/$n: /"
done
for round in 1 2; do for n in base poly2 poly4; do
  /tmp/kvf-$n/bench_cuda_prefill 20 extra | grep -E "d64|d256|f16" | sed "s/^/$n r$round: /"
  /tmp/kvf-$n/bench_cuda_prefill 20 | grep "impl=kvforge " | grep "L=16384" | sed "s/^/$n r$round: /"
done; done
