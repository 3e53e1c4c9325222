// linear(): picks the ISA body once, quantizes x for q8_0/q4_0 weights, and splits the
// work over the pool: weight rows for streaming (decode, small m), (panel, row block) tasks
// for the packed GEMM (prefill). The arithmetic lives in linear_<isa>.cpp.
#include "exec/cpu/linear.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "exec/cpu/linear_impl.h"
#include "exec/state.h"

namespace kvf::exec::cpu {

class PackedWeights {
 public:
  PackedWeights(const detail::Kernels& kern, Buffer bytes, int64_t panel_bytes)
      : kern(&kern), bytes(std::move(bytes)), panel_bytes(panel_bytes) {}
  const detail::Kernels* kern;  // the body that packed them, the only one that reads them
  Buffer bytes;                 // panel p at p * panel_bytes
  int64_t panel_bytes;
};

namespace detail {
namespace {

// Calls of more rows than a GEMM row block pack each panel once per call and use it for
// every block: packing ahead would save them little.
constexpr int64_t kPackAheadRows = 64;

// Rows of x per GEMM task: their part of x stays in L2 while one panel sweeps over it.
constexpr int64_t kGemmRowBlock = 64;
// Weight bytes per streaming chunk, so waking a thread is paid back by its share.
constexpr int64_t kStreamChunkBytes = 16 << 10;

#if defined(__x86_64__)
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

bool cpu_has_avx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
         cpu_has_f16c();
#else
  return false;
#endif
}

bool cpu_has_avx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
#else
  return false;
#endif
}

const Kernels& best_kernels() {
  static const Kernels& k = cpu_has_avx512() ? avx512_kernels() : cpu_has_avx2() ? avx2_kernels() : scalar_kernels();
  return k;
}

// The caller's quantized x; workers only read it.
AlignedBuffer& quant_scratch() {
  thread_local AlignedBuffer buf;
  return buf;
}

PanelCache& panel_cache() {
  thread_local PanelCache cache;
  return cache;
}

void fill_bias(const LinearArgs& a) {
  for (int64_t i = 0; i < a.m; ++i) {
    float* y = a.y + i * a.y_stride;
    for (int64_t j = 0; j < a.w.n; ++j) y[j] = a.bias ? a.bias[j] : 0.0f;
  }
}

// Carves q, d (and corr for the lane form) out of the caller's scratch and fills them.
void quantize_x(const Kernels& kern, ThreadPool& pool, LinearArgs& a, bool stream) {
  const int64_t k = a.w.k, nb = k / kQBlock;
  const QuantForm form = kern.quant_form(a.w.dtype, stream);
  const size_t q_bytes = (static_cast<size_t>(a.m * k) + 63) / 64 * 64;
  const size_t d_bytes = (static_cast<size_t>(a.m * nb) * 4 + 63) / 64 * 64;
  const size_t corr_bytes = form == QuantForm::kLaneCorr ? static_cast<size_t>(a.m * nb) * 32 : 0;
  const size_t sums_bytes = needs_sums(a.w.dtype) ? static_cast<size_t>(a.m * nb) * 4 : 0;
  auto* base = static_cast<unsigned char*>(quant_scratch().get(q_bytes + d_bytes + corr_bytes + sums_bytes));
  a.xq.q = reinterpret_cast<int8_t*>(base);
  a.xq.d = reinterpret_cast<float*>(base + q_bytes);
  a.xq.corr = corr_bytes ? reinterpret_cast<int32_t*>(base + q_bytes + d_bytes) : nullptr;
  a.xq.sums = sums_bytes ? reinterpret_cast<int32_t*>(base + q_bytes + d_bytes + corr_bytes) : nullptr;
  const LinearArgs& args = a;
  pool.parallel_for(a.m, [&](int64_t i0, int64_t i1) { kern.quantize(args, i0, i1, form); },
                    std::max<int64_t>(1, 32768 / std::max<int64_t>(1, k)));
}

void run_stream(const Kernels& kern, ThreadPool& pool, const LinearArgs& a) {
  // Groups of 4 weight rows: the bodies dot 4 rows at a time.
  const int64_t groups = (a.w.n + 3) / 4;
  const int64_t grain = std::max<int64_t>(1, kStreamChunkBytes / std::max<int64_t>(1, 4 * row_bytes(a.w)));
  pool.parallel_for(
      groups,
      [&](int64_t g0, int64_t g1) { kern.stream(a, 0, a.m, 4 * g0, std::min(a.w.n, 4 * g1)); },
      grain);
}

void run_gemm(const Kernels& kern, ThreadPool& pool, const LinearArgs& a, const PackedWeights* packed) {
  const int64_t nr = kern.panel_cols;
  const int64_t panels = (a.w.n + nr - 1) / nr;
  const int64_t row_blocks = (a.m + kGemmRowBlock - 1) / kGemmRowBlock;
  // Tasks run panel-major, so a thread's consecutive tasks reuse the panel it packed.
  pool.parallel_for(panels * row_blocks, [&](int64_t t0, int64_t t1) {
    PanelCache& cache = panel_cache();
    cache.j0 = -1;  // the buffer may hold another call's weights
    cache.packed = packed != nullptr ? static_cast<const uint8_t*>(packed->bytes.data()) : nullptr;
    cache.packed_panel_bytes = packed != nullptr ? packed->panel_bytes : 0;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = t / row_blocks, rb = t % row_blocks;
      const int64_t i0 = rb * kGemmRowBlock, i1 = std::min(a.m, i0 + kGemmRowBlock);
      kern.gemm(a, i0, i1, p * nr, std::min(a.w.n, (p + 1) * nr), cache);
    }
  });
}

}  // namespace

const Kernels* kernels_for(std::string_view isa) {
  if (isa == "avx512") return cpu_has_avx512() ? &avx512_kernels() : nullptr;
  if (isa == "avx2") return cpu_has_avx2() ? &avx2_kernels() : nullptr;
  if (isa == "scalar") return &scalar_kernels();
  return nullptr;
}

// Rows up to which a call streams the weights (a panel packed per call would cost more to
// build than it saves); packed ahead, only up to what one streaming pass serves.
int64_t stream_rows(const Kernels& kern, const WeightView& w, bool packed) {
  if (!is_block_quant(w.dtype)) return kern.stream_rows_float;
  return packed || w.n < kWideWeightRows ? kern.stream_rows_quant : kern.stream_rows_quant_wide;
}

void linear_with(const Kernels& kern, ThreadPool& pool, const float* x, int64_t m, int64_t x_stride,
                 const WeightView& w, const float* bias, float* y, int64_t y_stride, const PackedWeights* packed) {
  LinearArgs a{.x = x, .m = m, .x_stride = x_stride, .w = w, .bias = bias, .y = y, .y_stride = y_stride, .xq = {}};
  if (m <= 0 || w.n <= 0) return;
  if (w.k == 0) {
    fill_bias(a);
    return;
  }
  if (packed != nullptr && packed->kern != &kern) packed = nullptr;
  const bool stream = m <= stream_rows(kern, w, packed != nullptr);
  if (is_block_quant(w.dtype)) quantize_x(kern, pool, a, stream);
  if (stream) {
    run_stream(kern, pool, a);
  } else {
    run_gemm(kern, pool, a, packed);
  }
}

std::shared_ptr<const PackedWeights> pack_weights_with(const Kernels& kern, ThreadPool& pool, const WeightView& w,
                                                       int64_t m) {
  if (kern.pack == nullptr || m <= stream_rows(kern, w, true) || m > kPackAheadRows || w.n <= 0 || w.k <= 0) {
    return nullptr;
  }
  const int64_t panel_bytes = kern.panel_bytes(w);
  if (panel_bytes == 0) return nullptr;
  // Weights outlive the executors that hold their packing, so a live entry's address is
  // still those weights: a new model cannot be mapped there while it lives.
  using Key = std::tuple<const void*, DType, int64_t, int64_t, const Kernels*>;
  static std::mutex mu;
  static std::map<Key, std::weak_ptr<const PackedWeights>> packs;
  std::lock_guard lock(mu);
  const Key key{w.data, w.dtype, w.n, w.k, &kern};
  if (auto live = packs[key].lock()) return live;
  std::erase_if(packs, [](const auto& entry) { return entry.second.expired(); });
  const int64_t nr = kern.panel_cols, panels = (w.n + nr - 1) / nr;
  Result<void*> bytes = host_memory().allocate_zeroed(panels * panel_bytes);
  if (!bytes) return nullptr;  // per-call packing still works
  auto packed = std::make_shared<const PackedWeights>(kern, Buffer(&host_memory(), *bytes, panels * panel_bytes), panel_bytes);
  auto* base = static_cast<uint8_t*>(*bytes);
  pool.parallel_for(panels, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) kern.pack(w, p * nr, std::min(w.n, (p + 1) * nr), base + p * panel_bytes);
  });
  packs[key] = packed;
  return packed;
}

}  // namespace detail

void linear(ThreadPool& pool, const float* x, int64_t m, int64_t x_stride, const WeightView& w,
            const float* bias, float* y, int64_t y_stride, const PackedWeights* packed) {
  detail::linear_with(detail::best_kernels(), pool, x, m, x_stride, w, bias, y, y_stride, packed);
}

std::shared_ptr<const PackedWeights> pack_weights(ThreadPool& pool, const WeightView& w, int64_t m) {
  return detail::pack_weights_with(detail::best_kernels(), pool, w, m);
}

const char* linear_isa() { return detail::best_kernels().isa; }

}  // namespace kvf::exec::cpu
