// The scenarios behind `kvforge bench` (DESIGN.md §8): each measures medians over repeats,
// side by side in one run, and returns a table the CLI prints (text, CSV, gnuplot PNG).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace kvf::bench {

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;

  std::string text() const;  // aligned columns
  std::string csv() const;
};

// Median wall time in seconds of `repeats` calls of fn (after one untimed warm-up when
// warmup is set). fn returning an error stops the measurement.
Result<double> median_seconds(int repeats, const std::function<Status()>& fn, bool warmup = true);
// Two measurements side by side: a then b, each once untimed, then `repeats` times in turn,
// so drift of a shared machine reaches both alike. Their median wall times in seconds.
Result<std::pair<double, double>> paired_median_seconds(int repeats, const std::function<Status()>& a,
                                                        const std::function<Status()>& b);

// Read bandwidth of this machine in GB/s (1e9 bytes/s): the median of summing a buffer
// much larger than the caches with every thread of the pool.
double memory_read_gbps(ThreadPool& pool, int64_t bytes = int64_t{512} << 20, int repeats = 5);

std::string fixed(double x, int digits);  // "12.35"

// Uniform values in [-1, 1) from `seed`, stored as f32 or f16 (the benches' weights and caches).
Result<HostTensor> random_tensor(Shape shape, DType dtype, uint64_t seed);

// Hears a scenario's work done and in all, in the unit the scenario counts (a terminal's
// progress line); unset, nothing is reported.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

struct AttentionBenchOptions {
  int threads = 2;
  int repeats = 5;
  std::vector<int64_t> contexts{512, 1024, 2048, 4096, 8192, 16384, 32768};
  int64_t q_heads = 32, kv_heads = 8, head_dim = 128;
  int64_t max_prefill = 2048;      // prefill rows Lq = Lk up to this context
  int64_t max_decomposed_bytes = int64_t{1} << 30;  // skip a decomposition whose scores exceed this
  ProgressFn progress = {};  // contexts measured
};
Result<Table> attention_scenario(const AttentionBenchOptions& o);

// One decode step's attention of a DeepSeek-V3.2-shaped layer (MLA over the latent cache:
// 128 heads, kv_lora_rank 512, rope 64) at each context, densely and through the sparse-
// attention indexer (64 heads of 128, top-k 2048 keys): indexer scores, block top-k and
// selected attention, compiled and run on the CPU executor side by side; with the bytes each
// reads (latent rows, indexer keys).
struct SelectedBenchOptions {
  int threads = 2;
  int repeats = 3;
  std::vector<int64_t> contexts{8192, 16384, 32768, 65536, 131072};
  int64_t heads = 128, kv_lora_rank = 512, rope_dim = 64;
  int64_t index_heads = 64, index_dim = 128, topk = 2048;
  DType kv_dtype = DType::kF16;  // the latent cache and the indexer's keys
  ProgressFn progress = {};      // contexts measured
};
Result<Table> selected_attention_scenario(const SelectedBenchOptions& o);

struct DecodeCurveOptions {
  std::string model = "synthetic:gpt2-124m";
  int threads = 2;
  int repeats = 3;
  DType kv_dtype = DType::kF32;
  std::vector<int64_t> contexts{512, 1024, 2048, 4096};
  ProgressFn progress = {};  // contexts measured
};
Result<Table> decode_curve_scenario(const DecodeCurveOptions& o);

struct E2eOptions {
  std::string model;
  int threads = 2;
  int64_t pp = 512, tg = 128, depth = 0;
  int repeats = 3;
  DType kv_dtype = DType::kF16;  // llama-bench's default cache type
  bool cuda = false;             // the compiled step on the GPU (llm::ExecutorKind::kCuda)
  bool f32_compute = false;      // --dtype f32: every product from f32 inputs (llm::Compute::kF32)
  int tp = 1;                    // tensor-parallel ranks (llm::Generator::open)
  int cp = 1;                    // context-parallel GPU ranks (llm::Generator::open; cuda only)
  std::vector<std::string> skip_passes;  // compiler passes left out: the unfused form, for comparison
  std::string lora;  // a LoRA adapter (any --lora PATH form) every token runs with, measured side by
                     // side with the model without it; "": none
  ProgressFn progress = {};      // tokens computed, warm-up runs included
};
struct E2eResult {
  double pp_tok_s = 0, tg_tok_s = 0;
  double base_pp_tok_s = 0, base_tg_tok_s = 0;  // with `lora`: the same steps without the adapter
};
Result<E2eResult> e2e_scenario(const E2eOptions& o);

// `kvforge bench memory`: requests of random lengths through the paged scheduler; at sample
// steps, the live tokens, the seed's bill for them, the bytes of the blocks in use, the
// bytes the pools hold, and what contiguous caches of the longest length would hold.
struct MemoryBenchOptions {
  std::string model = "synthetic:llama-15m";
  int threads = 2;
  int requests = 16;
  int64_t max_prompt = 96, max_tokens = 64;
  int max_rows = 8;
  DType kv_dtype = DType::kF32;
  uint64_t seed = 1;
  int64_t window = 0, sinks = 0;  // the StreamingLLM policy (blocks behind it go back)
  ProgressFn progress = {};        // requests finished
};
Result<Table> memory_scenario(const MemoryBenchOptions& o);

// `kvforge ahbm sweep`: the ADR-001 tuning items (§9) and claims on the AHBM simulator
// (src/exec/ahbm/, docs/ahbm.md). Simulated cycles are deterministic: one run per point.
struct AhbmSweepOptions {
  std::string config;              // a config file; empty: the built-in defaults
  int64_t context = 32768;         // the decode-sp context of the tuning tables
  int n_pe = 8;                    // PEs per reduction group for decode-sp
  int64_t max_context = 131072;    // the reduction table's longest context
  int64_t prefill_context = 2048;  // prompt tokens of the prefill and ring rows
  std::vector<std::string> only{};  // table names to run; empty: all
  uint64_t seed = 1;
};
struct AhbmSweepTable {
  std::string name{};  // file stem: ahbm_<name>.csv / .png
  Table table{};
  // The plot: y columns against column x; categorical x draws boxes.
  size_t x = 0;
  std::vector<size_t> ys{};
  bool log_x = false, log_y = false, boxes = false;
  std::string ylabel{};
};
Result<std::vector<AhbmSweepTable>> ahbm_sweep_scenario(const AhbmSweepOptions& o);

}  // namespace kvf::bench
