// Micro-benchmarks of the fused CPU attention kernel (exec/cpu/attention.h): decode steps
// (one query row per head, hq 32, hkv 8, d 128) as GB/s of K and V read, side by side with
// this machine's read bandwidth measured in the same run, the same decode from paged pools
// through a read map (BM_DecodePaged), and a 512-token prefill in GFLOP/s.
// Run with --benchmark_repetitions=5 --benchmark_report_aggregates_only=true for medians.
#include <benchmark/benchmark.h>
#include <emmintrin.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "exec/cpu/attention.h"
#include "plan/attention_schedule.h"

namespace kvf {
namespace {

using exec::AttentionArgs;
using exec::cpu::AttentionSchedule;
using exec::cpu::AttentionScheduleKind;

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128;
// The decode shapes: 0 is GQA 32/8, d 128 (the CUDA benchmarks' shape); 1 is GPT-2 small's
// 12/12, d 64 (MHA: one query row per kv head, the least arithmetic per byte read).
struct HeadShape {
  int64_t hq, hkv, d;
};
constexpr HeadShape kShapes[] = {{kHeads, kKvHeads, kHeadDim}, {12, 12, 64}};

ThreadPool& pool_of(int64_t threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

// Extra statistics for --benchmark_repetitions: the best run next to the median.
double smallest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double largest(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// Seconds of the process's CPU time per pool thread. On this shared machine other jobs take
// the cores away for stretches; CPU time does not count those, so rates over it (the _cpu
// counters) say what an undisturbed run would reach, and they move much less between runs.
double cpu_seconds_per_thread(int64_t threads) {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9) / double(threads);
}

// ---- the machine's read bandwidth

constexpr size_t kReadBytes = size_t(512) << 20;  // far past any cache

const uint8_t* read_buffer() {
  static const std::vector<uint64_t> buf = [] {
    std::vector<uint64_t> b(kReadBytes / 8);
    for (size_t i = 0; i < b.size(); ++i) b[i] = i * 0x9E3779B97F4A7C15ull;
    return b;
  }();
  return reinterpret_cast<const uint8_t*>(buf.data());
}

// Sums [begin, end) of the buffer as 64-bit lanes, 8 independent streams of loads.
uint64_t read_range(const uint8_t* p, size_t begin, size_t end) {
  __m128i acc[8];
  for (__m128i& a : acc) a = _mm_setzero_si128();
  for (size_t i = begin; i < end; i += 128)
    for (int j = 0; j < 8; ++j)
      acc[j] = _mm_add_epi64(acc[j], _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16 * j)));
  for (int j = 1; j < 8; ++j) acc[0] = _mm_add_epi64(acc[0], acc[j]);
  uint64_t out[2];
  std::memcpy(out, &acc[0], sizeof out);
  return out[0] + out[1];
}

// Reads the whole buffer once, in 1 MiB pieces spread over the pool.
uint64_t read_all(ThreadPool& pool) {
  const uint8_t* p = read_buffer();
  constexpr size_t kPiece = size_t(1) << 20;
  std::vector<uint64_t> sums(kReadBytes / kPiece);
  pool.parallel_for(int64_t(sums.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sums[size_t(i)] = read_range(p, size_t(i) * kPiece, size_t(i + 1) * kPiece);
  });
  uint64_t s = 0;
  for (uint64_t x : sums) s += x;
  return s;
}

void BM_MemoryRead(benchmark::State& state) {
  const int64_t threads = state.range(0);
  ThreadPool& pool = pool_of(threads);
  read_all(pool);
  const double cpu0 = cpu_seconds_per_thread(threads);
  for (auto _ : state) benchmark::DoNotOptimize(read_all(pool));
  const double gb = double(kReadBytes) * double(state.iterations()) / 1e9;
  state.counters["GB/s"] = benchmark::Counter(gb, benchmark::Counter::kIsRate);
  state.counters["GB/s_cpu"] = gb / (cpu_seconds_per_thread(threads) - cpu0);
}
BENCHMARK(BM_MemoryRead)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->ComputeStatistics("min", smallest)
    ->ComputeStatistics("max", largest);

// Read bandwidth over wall and over CPU time: the medians of three full reads, taken just
// before a decode benchmark so that its fraction of the bandwidth compares two measurements
// of the same moment on this shared machine.
struct Bandwidth {
  double wall = 0, cpu = 0;  // GB/s
};

Bandwidth memory_bandwidth(int64_t threads) {
  ThreadPool& pool = pool_of(threads);
  double wall[3], cpu[3];
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = cpu_seconds_per_thread(threads);
    benchmark::DoNotOptimize(read_all(pool));
    cpu[i] = double(kReadBytes) / (cpu_seconds_per_thread(threads) - cpu0) / 1e9;
    wall[i] = double(kReadBytes) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
  }
  std::sort(wall, wall + 3);
  std::sort(cpu, cpu + 3);
  return {wall[1], cpu[1]};
}

// ---- attention inputs

// A 64-byte aligned array, as the engine's caches are (exec/state.cpp): std::vector's 16-byte
// alignment would split every other vector load of a K/V row across two cache lines.
template <class T>
class Aligned {
 public:
  Aligned() = default;
  explicit Aligned(size_t n) : n_(n), p_(static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64))) {}
  T* data() { return p_.get(); }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  size_t n_ = 0;
  std::unique_ptr<T, Free> p_;
};

// Cheap deterministic values in [-1, 1): filling hundreds of MiB with <random> takes seconds.
void fill(Aligned<float>& x, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < x.size(); ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x[i] = float(int64_t(s >> 40) - (int64_t(1) << 23)) / float(int64_t(1) << 23);
  }
}

Aligned<uint16_t> to_f16(Aligned<float>& x) {
  Aligned<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_f16_bits(x[i]);
  return h;
}

// One decode or prefill problem; the last one built is kept so that the runs of a shape
// share its buffers (a 32k f32 cache is 256 MiB).
// Random q, k, v (and the output buffer) of a problem; f16 keys and values replace the f32 ones.
template <class P>
void fill_inputs(P& p, size_t q_elems, size_t kv_elems, bool f16) {
  p.q = Aligned<float>(q_elems);
  p.out = Aligned<float>(q_elems);
  p.k = Aligned<float>(kv_elems);
  p.v = Aligned<float>(kv_elems);
  fill(p.q, 1);
  fill(p.k, 2);
  fill(p.v, 3);
  if (f16) {
    p.k16 = to_f16(p.k);
    p.v16 = to_f16(p.v);
    p.k = {};
    p.v = {};
  }
}

struct Problem {
  HeadShape shape{};
  int64_t lq = 0, lk = 0;
  bool f16 = false, causal = false;
  Aligned<float> q, k, v, out, mask;
  Aligned<uint16_t> k16, v16;
  std::vector<float> scratch;

  AttentionArgs args() {
    AttentionArgs a;
    a.hq = shape.hq;
    a.hkv = shape.hkv;
    a.lq = lq;
    a.lk = lk;
    a.dk = a.dv = shape.d;
    a.q = q.data();
    a.kv_dtype = f16 ? DType::kF16 : DType::kF32;
    a.k = f16 ? static_cast<const void*>(k16.data()) : k.data();
    a.v = f16 ? static_cast<const void*>(v16.data()) : v.data();
    a.mask = causal ? mask.data() : nullptr;
    a.scale = 1.0f / std::sqrt(float(shape.d));
    a.out = out.data();
    return a;
  }
};

Problem& problem(int64_t lq, int64_t lk, bool f16, bool causal, int shape = 0) {
  static Problem p;
  const HeadShape hs = kShapes[shape];
  if (p.lq == lq && p.lk == lk && p.f16 == f16 && p.causal == causal && p.shape.hq == hs.hq && p.shape.hkv == hs.hkv &&
      p.shape.d == hs.d) {
    return p;
  }
  p = Problem{};
  p.shape = hs;
  p.lq = lq;
  p.lk = lk;
  p.f16 = f16;
  p.causal = causal;
  fill_inputs(p, size_t(hs.hq * lq * hs.d), size_t(hs.hkv * lk * hs.d), f16);
  if (causal) {
    p.mask = Aligned<float>(size_t(lq * lk));
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t t = 0; t < lk; ++t) p.mask[size_t(i * lk + t)] = t > lk - lq + i ? -INFINITY : 0.0f;
  }
  return p;
}

// One task per key piece, the only split the kernel runs (attention.h).
AttentionSchedule split_schedule(int64_t lk) {
  AttentionSchedule s;
  s.kind = AttentionScheduleKind::kSplitKV;
  s.splits = static_cast<int>(plan::cpu_attention_pieces(lk));
  s.chunk = exec::cpu::kAttentionPiece;
  return s;
}

// ---- decode: K/V read bandwidth

// The kernel's read rate over the machine's, measured in interleaved pairs (one bandwidth
// read of the buffer, then the kernel for at least as long) so that both halves of each
// ratio see the same moment of a shared machine's load; the median of `pairs` ratios.
double paired_fraction_of_memory(int64_t threads, double kv_bytes, const std::function<void()>& run, int pairs = 7) {
  ThreadPool& pool = pool_of(threads);
  std::vector<double> ratio;
  for (int i = 0; i < pairs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(read_all(pool));
    const double bw_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    int calls = 0;
    double k_s = 0;
    do {
      run();
      ++calls;
      k_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (k_s < bw_s);
    ratio.push_back((kv_bytes * calls / k_s) / (double(kReadBytes) / bw_s));
  }
  std::sort(ratio.begin(), ratio.end());
  return ratio[ratio.size() / 2];
}

// Times one decode over lk keys (kv_bytes of K/V read per call) and reports the read rate
// next to the machine's memory bandwidth measured in the same run, by wall and CPU time.
void time_decode(benchmark::State& state, const AttentionArgs& a, std::vector<float>& scratch, double kv_bytes,
                 bool split, int64_t threads) {
  const AttentionSchedule s = split ? split_schedule(state.range(0)) : AttentionSchedule{};
  if (Status st = exec::cpu::attention_check(a, s); !st.ok()) {
    state.SkipWithError(st.error().to_string().c_str());
    return;
  }
  scratch.resize(exec::cpu::attention_scratch_floats(a, s));
  ThreadPool& pool = pool_of(threads);
  const Bandwidth mem = memory_bandwidth(threads);
  const double cpu0 = cpu_seconds_per_thread(threads);
  for (auto _ : state) exec::cpu::attention(pool, a, s, scratch.data());
  const double cpu_s = cpu_seconds_per_thread(threads) - cpu0;
  const double gb = kv_bytes * double(state.iterations()) / 1e9;
  state.counters["kv_GB/s"] = benchmark::Counter(gb, benchmark::Counter::kIsRate);
  state.counters["mem_GB/s"] = mem.wall;
  state.counters["of_mem"] = benchmark::Counter(gb / mem.wall, benchmark::Counter::kIsRate);
  state.counters["kv_GB/s_cpu"] = gb / cpu_s;
  state.counters["of_mem_cpu"] = gb / cpu_s / mem.cpu;
  state.counters["of_mem_paired"] =
      paired_fraction_of_memory(threads, kv_bytes, [&] { exec::cpu::attention(pool, a, s, scratch.data()); });
  state.SetLabel(exec::cpu::attention_isa_name(exec::cpu::AttentionIsa::kAuto));
}

void BM_Decode(benchmark::State& state) {
  const int64_t lk = state.range(0), threads = state.range(3);
  const bool f16 = state.range(1) != 0, split = state.range(2) != 0;
  Problem& p = problem(1, lk, f16, false, int(state.range(4)));
  time_decode(state, p.args(), p.scratch, 2.0 * double(p.shape.hkv * lk * p.shape.d) * (f16 ? 2 : 4), split, threads);
}

void decode_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"lk", "f16", "split", "threads", "shape"});
  for (int64_t lk : {512, 4096, 16384, 32768})
    for (int64_t f16 : {0, 1})
      for (int64_t split : {0, 1})
        for (int64_t threads : {1, 2}) b->Args({lk, f16, split, threads, 0});
  for (int64_t lk : {512, 4096, 16384})  // GPT-2 small, the decode curve's model
    for (int64_t f16 : {0, 1})
      for (int64_t threads : {1, 2}) b->Args({lk, f16, 0, threads, 1});
}
BENCHMARK(BM_Decode)
    ->Apply(decode_args)
    ->UseRealTime()
    ->ComputeStatistics("min", smallest)
    ->ComputeStatistics("max", largest);

// ---- paged decode: the same K/V bytes read from pools through a read map

// The decode problem's K and V as pools [S, Hkv, d] of shuffled 16-token blocks (a quarter
// more blocks than the row needs, so the pool is not just the row), and the read map [1, lk].
struct PagedProblem {
  int64_t lk = 0;
  bool f16 = false;
  Aligned<float> q, out, k, v;
  Aligned<uint16_t> k16, v16;
  std::vector<int32_t> read;
  int64_t pool_rows = 0;
  std::vector<float> scratch;

  AttentionArgs args() {
    AttentionArgs a;
    a.hq = kHeads;
    a.hkv = kKvHeads;
    a.lk = lk;
    a.dk = a.dv = kHeadDim;
    a.q = q.data();
    a.kv_dtype = f16 ? DType::kF16 : DType::kF32;
    a.k = f16 ? static_cast<const void*>(k16.data()) : k.data();
    a.v = f16 ? static_cast<const void*>(v16.data()) : v.data();
    a.read = read.data();
    a.pool_rows = pool_rows;
    a.scale = 1.0f / std::sqrt(float(kHeadDim));
    a.out = out.data();
    return a;
  }
};

PagedProblem& paged_problem(int64_t lk, bool f16) {
  static PagedProblem p;
  if (p.lk == lk && p.f16 == f16) return p;
  p = PagedProblem{};
  p.lk = lk;
  p.f16 = f16;
  constexpr int64_t kBlock = 16;
  const int64_t used = (lk + kBlock - 1) / kBlock, blocks = used + used / 4 + 1;
  p.pool_rows = blocks * kBlock;
  std::vector<int32_t> ids(size_t(blocks), 0);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  uint64_t s = 12345;
  for (size_t i = ids.size(); i-- > 1;) {  // Fisher-Yates with a xorshift
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    std::swap(ids[i], ids[size_t(s % (i + 1))]);
  }
  for (int64_t t = 0; t < lk; ++t) p.read.push_back(int32_t(ids[size_t(t / kBlock)] * kBlock + t % kBlock));
  fill_inputs(p, size_t(kHeads * kHeadDim), size_t(p.pool_rows * kKvHeads * kHeadDim), f16);
  return p;
}

void BM_DecodePaged(benchmark::State& state) {
  const int64_t lk = state.range(0), threads = state.range(3);
  const bool f16 = state.range(1) != 0, split = state.range(2) != 0;
  PagedProblem& p = paged_problem(lk, f16);
  time_decode(state, p.args(), p.scratch, 2.0 * double(kKvHeads * lk * kHeadDim) * (f16 ? 2 : 4), split, threads);
}
BENCHMARK(BM_DecodePaged)
    ->ArgNames({"lk", "f16", "split", "threads"})
    ->ArgsProduct({{4096, 16384}, {0, 1}, {0, 1}, {1, 2}})
    ->UseRealTime()
    ->ComputeStatistics("min", smallest)
    ->ComputeStatistics("max", largest);

// ---- prefill: 512 query rows against 512 keys

void BM_Prefill(benchmark::State& state) {
  constexpr int64_t kLen = 512;
  const bool f16 = state.range(0) != 0, causal = state.range(1) != 0;
  const int64_t threads = state.range(2);
  Problem& p = problem(kLen, kLen, f16, causal);
  const AttentionArgs a = p.args();
  ThreadPool& pool = pool_of(threads);
  const double cpu0 = cpu_seconds_per_thread(threads);
  for (auto _ : state) exec::cpu::attention(pool, a, AttentionSchedule{}, nullptr);
  const double cpu_s = cpu_seconds_per_thread(threads) - cpu0;
  // Multiply-adds of q·k and p·v over the visible (query, key) pairs only.
  const double pairs = causal ? double(kLen) * (kLen + 1) / 2 : double(kLen) * kLen;
  const double flops = 2.0 * 2.0 * kHeadDim * kHeads * pairs;
  const double gflop = flops * double(state.iterations()) / 1e9;
  state.counters["GFLOP/s"] = benchmark::Counter(gflop, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s_cpu"] = gflop / cpu_s;
}
BENCHMARK(BM_Prefill)
    ->ArgNames({"f16", "causal", "threads"})
    ->ArgsProduct({{0, 1}, {0, 1}, {1, 2}})
    ->UseRealTime()
    ->ComputeStatistics("min", smallest)
    ->ComputeStatistics("max", largest);

}  // namespace
}  // namespace kvf

BENCHMARK_MAIN();
