# kvforge: every target installs what it needs (scripts/install-deps.sh is idempotent),
# configures once and builds incrementally with Ninja.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
MODELS_DIR ?= ../shared/models
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: deps build run test test-gpu test-asan fuzz bench clean

deps:
	@./scripts/install-deps.sh

# RelWithDebInfo with line tables only (-g1: what a backtrace or a profiler prints): full
# debug info costs a quarter more compile time on this 2-core machine.
$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the built-in model (models/kjv-7m.gguf, a 7M-parameter llama trained on the
# King James Bible; models/README.md) continues a prompt, compiled for this CPU; prints the
# text, timings and the KV bill.
run: build
	./$(BUILD)/src/kvforge generate -p "And it came to pass" -n 96 --temperature 0.7 --seed 3

# The GPU suite (ctest label gpu) needs an sm_90 GPU: `make test-gpu` builds and runs it there.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE gpu

test-gpu: deps $(BUILD)/build.ninja
	cmake -S . -B $(BUILD) -DKVF_GPU_TESTS=ON
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && KVF_REQUIRE_GPU=1 ctest --output-on-failure -L gpu

# The sanitizer build leaves CUDA out: its kernels run only on a GPU, where the GPU suite
# tests them, and nvcc would add minutes to every clean build here. Debug keeps the asserts
# and the unchecked-error aborts; -g1 (line tables: what a sanitizer's stack trace prints)
# instead of full debug info, and -O0: on this 2-core machine -O1 everywhere costs more build
# time than it saves in tests (a clean build of 23 minutes against 12). The kernel libraries
# the suite spends its time in are built at -O1 (src/CMakeLists.txt).
$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1" \
	  -DKVF_SANITIZE=ON -DKVF_BUILD_BENCH=OFF -DKVF_CUDA=OFF

test-asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -LE gpu

# libFuzzer + ASan + UBSan on the readers (fuzz/, docs/reliability.md); clang, its own build.
$(FUZZ_BUILD)/build.ninja:
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DKVF_FUZZ=ON -DKVF_BUILD_TESTS=OFF -DKVF_BUILD_BENCH=OFF -DKVF_CUDA=OFF

fuzz: deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	./scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(MODELS_DIR)

bench: build
	./$(BUILD)/bench/bench_oracle --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
