// Elementwise kernels: unary, binary (numpy broadcasting through the walk), select, cast,
// iota, gated units and rotary embedding. Meanings as in eval/ and exec/cpu.
#include <cmath>
#include <type_traits>

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

__device__ float unary_f32(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kRsqrt: return 1.0f / sqrtf(x);
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kErf: return erff(x);
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kSin: return sinf(x);
    case UnaryOp::kCos: return cosf(x);
    case UnaryOp::kRecip: return 1.0f / x;
  }
  return __int_as_float(0x7fc00000);
}

__global__ void unary_f32_kernel(UnaryOp op, const float* x, float* out, int64_t n) {
  for (const int64_t i : grid_stride(n)) out[i] = unary_f32(op, x[i]);
}

__device__ int32_t unary_i32(UnaryOp op, int32_t v) { return op == UnaryOp::kNeg ? -v : (v < 0 ? -v : v); }

__global__ void unary_i32_kernel(UnaryOp op, const int32_t* x, int32_t* out, int64_t n) {
  for (const int64_t i : grid_stride(n)) out[i] = unary_i32(op, x[i]);
}

template <class T>
__device__ T arith(BinaryOp op, T x, T y, bool& div_zero) {
  switch (op) {
    case BinaryOp::kAdd: return x + y;
    case BinaryOp::kSub: return x - y;
    case BinaryOp::kMul: return x * y;
    case BinaryOp::kMax: return x > y || x != x ? x : y;
    case BinaryOp::kMin: return x < y || x != x ? x : y;
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<T>) {
        return x / y;
      } else {
        if (y == 0) div_zero = true;
        return y == 0 ? T{0} : x / y;
      }
    default: return T{};
  }
}

template <class T>
__global__ void arith_kernel(BinaryOp op, const T* a, const T* b, T* out, Walk w, Launch l) {
  for (const int64_t i : grid_stride(w.numel)) {
    bool div_zero = false;
    out[i] = arith(op, a[walk_offset(w, 0, i)], b[walk_offset(w, 1, i)], div_zero);
    if (div_zero) raise_fault(l.fault, DeviceFault::kDivideByZero, l.eqn, i);
  }
}

template <class T>
__device__ bool compare(BinaryOp dir, T x, T y) {
  switch (dir) {
    case BinaryOp::kEq: return x == y;
    case BinaryOp::kNe: return x != y;
    case BinaryOp::kLt: return x < y;
    case BinaryOp::kLe: return x <= y;
    case BinaryOp::kGt: return x > y;
    case BinaryOp::kGe: return x >= y;
    default: return false;
  }
}

template <class T>
__global__ void compare_kernel(BinaryOp dir, const T* a, const T* b, uint8_t* out, Walk w) {
  for (const int64_t i : grid_stride(w.numel)) out[i] = compare(dir, a[walk_offset(w, 0, i)], b[walk_offset(w, 1, i)]);
}

__global__ void logic_kernel(bool is_and, const uint8_t* a, const uint8_t* b, uint8_t* out, Walk w) {
  for (const int64_t i : grid_stride(w.numel)) {
    const uint8_t x = a[walk_offset(w, 0, i)], y = b[walk_offset(w, 1, i)];
    out[i] = is_and ? (x & y) : (x | y);
  }
}

template <class T>
__global__ void select_kernel(const uint8_t* p, const T* a, const T* b, T* out, Walk w) {
  for (const int64_t i : grid_stride(w.numel)) out[i] = p[walk_offset(w, 0, i)] ? a[walk_offset(w, 1, i)] : b[walk_offset(w, 2, i)];
}

__global__ void to_f32_kernel(DType from, const void* x, float* out, int64_t n) {
  for (const int64_t i : grid_stride(n)) out[i] = load_stored(from, x, i);
}

// Launched as a programmatic dependent: it rounds a linear's x, so the linear behind it (a
// programmatic dependent too) can request its first weights while this runs.
__global__ void to_half_kernel(bool bf16, const float* x, void* out, int64_t n) {
  await_kernel_in_front();
  for (const int64_t i : grid_stride(n)) store_half(out, i, x[i], bf16);
}

// Element i of x (f32, i32 or pred) cast to `to` (f32, i32 or pred) into out.
__device__ void to_word(DType from, DType to, const void* x, void* out, int64_t i, FaultRecord* fault, int eqn) {
  double v = 0;
  switch (from) {
    case DType::kF32: v = static_cast<const float*>(x)[i]; break;
    case DType::kI32: v = static_cast<const int32_t*>(x)[i]; break;
    default: v = static_cast<const uint8_t*>(x)[i]; break;
  }
  if (to == DType::kBool) {
    static_cast<uint8_t*>(out)[i] = v != 0;
  } else if (to == DType::kF32) {
    static_cast<float*>(out)[i] = static_cast<float>(v);
  } else {
    const double t = trunc(v);
    if (isnan(v) || t < -2147483648.0 || t > 2147483647.0) {
      raise_fault(fault, DeviceFault::kCastRange, eqn, i);
      static_cast<int32_t*>(out)[i] = 0;
    } else {
      static_cast<int32_t*>(out)[i] = static_cast<int32_t>(t);
    }
  }
}

__global__ void to_word_kernel(DType from, DType to, const void* x, void* out, int64_t n, Launch l) {
  for (const int64_t i : grid_stride(n)) to_word(from, to, x, out, i, l.fault, l.eqn);
}

// Element i of a chain's binary task.
__device__ void binary_element(const ChainTask& t, int64_t i, FaultRecord* fault) {
  const auto op = static_cast<BinaryOp>(t.op);
  const int64_t ia = walk_offset(t.w, 0, i), ib = walk_offset(t.w, 1, i);
  if (op == BinaryOp::kAnd || op == BinaryOp::kOr) {
    const uint8_t x = static_cast<const uint8_t*>(t.a)[ia], y = static_cast<const uint8_t*>(t.b)[ib];
    static_cast<uint8_t*>(t.out)[i] = op == BinaryOp::kAnd ? (x & y) : (x | y);
    return;
  }
  if (op >= BinaryOp::kEq) {
    bool r = false;
    if (t.dt == DType::kF32) r = compare(op, static_cast<const float*>(t.a)[ia], static_cast<const float*>(t.b)[ib]);
    else if (t.dt == DType::kI32) r = compare(op, static_cast<const int32_t*>(t.a)[ia], static_cast<const int32_t*>(t.b)[ib]);
    else r = compare(op, static_cast<const uint8_t*>(t.a)[ia], static_cast<const uint8_t*>(t.b)[ib]);
    static_cast<uint8_t*>(t.out)[i] = r;
    return;
  }
  bool div_zero = false;
  if (t.dt == DType::kF32) {
    static_cast<float*>(t.out)[i] = arith(op, static_cast<const float*>(t.a)[ia], static_cast<const float*>(t.b)[ib], div_zero);
  } else {
    static_cast<int32_t*>(t.out)[i] = arith(op, static_cast<const int32_t*>(t.a)[ia], static_cast<const int32_t*>(t.b)[ib], div_zero);
  }
  if (div_zero) raise_fault(fault, DeviceFault::kDivideByZero, t.eqn, i);
}

__global__ void chain_kernel(const ChainTask* tasks, int n, FaultRecord* fault) {
  await_kernel_in_front();
  for (int k = 0; k < n; ++k) {
    const ChainTask& t = tasks[k];
    for (int64_t i = threadIdx.x; i < t.w.numel; i += blockDim.x) {
      switch (t.kind) {
        case ChainKind::kUnary:
          if (t.dt == DType::kI32) {
            static_cast<int32_t*>(t.out)[i] = unary_i32(static_cast<UnaryOp>(t.op), static_cast<const int32_t*>(t.a)[i]);
          } else {
            static_cast<float*>(t.out)[i] = unary_f32(static_cast<UnaryOp>(t.op), static_cast<const float*>(t.a)[i]);
          }
          break;
        case ChainKind::kBinary: binary_element(t, i, fault); break;
        case ChainKind::kCast: to_word(t.dt, t.to, t.a, t.out, i, fault, t.eqn); break;
      }
    }
    __syncthreads();  // the next task may read what this one wrote
  }
}

template <class T>
__global__ void iota_kernel(int64_t inner, int64_t extent, T* out, int64_t n) {
  for (const int64_t i : grid_stride(n)) out[i] = static_cast<T>((i / inner) % extent);
}

__global__ void glu_kernel(GluAct act, const float* g, const float* u, float* out, void* out16, bool bf16, int64_t n) {
  for (const int64_t i : grid_stride(n)) {
    const float v = glu_value(act, g[i]) * u[i];
    out[i] = v;
    if (out16 != nullptr) store_half(out16, i, v, bf16);
  }
}

__global__ void rope_kernel(RopeTask t) {
  const int64_t half = t.rotary / 2, per_row = half + (t.d - t.rotary);
  for (const int64_t i : grid_stride(t.rows * per_row)) {
    const int64_t r = i / per_row, j = i % per_row;
    const float* xr = t.x + r * t.d;
    float* o = t.out + r * t.d;
    if (j >= half) {  // the pass-through tail
      const int64_t c = t.rotary + (j - half);
      o[c] = xr[c];
      continue;
    }
    const int64_t at = (r / t.every % t.t_len) * half + j;
    const float c = t.cos[at], s = t.sin[at];
    const int64_t i0 = t.interleaved ? 2 * j : j, i1 = t.interleaved ? 2 * j + 1 : j + half;
    const float a = xr[i0], b = xr[i1];
    o[i0] = a * c - b * s;
    o[i1] = b * c + a * s;
  }
}

__global__ void witness_kernel(const uint8_t* w, int64_t n, int validation, FaultRecord* fault) {
  for (const int64_t i : grid_stride(n)) {
    if (w[i] == 0) raise_fault(fault, DeviceFault::kValidation, validation, i);
  }
}

}  // namespace

void check_witness(const void* witness, int64_t n, int validation, const Launch& l) {
  witness_kernel<<<blocks_for(n), kThreads, 0, stream_of(l)>>>(static_cast<const uint8_t*>(witness), n, validation, l.fault);
}

void unary(UnaryOp op, DType dt, const void* x, void* out, int64_t n, const Launch& l) {
  if (dt == DType::kI32) {
    unary_i32_kernel<<<blocks_for(n), kThreads, 0, stream_of(l)>>>(op, static_cast<const int32_t*>(x),
                                                                  static_cast<int32_t*>(out), n);
  } else {
    unary_f32_kernel<<<blocks_for(n), kThreads, 0, stream_of(l)>>>(op, static_cast<const float*>(x),
                                                                  static_cast<float*>(out), n);
  }
}

static bool is_compare(BinaryOp op) { return op >= BinaryOp::kEq && op <= BinaryOp::kGe; }

void binary(BinaryOp op, DType dt, const void* a, const void* b, void* out, const Walk& w, const Launch& l) {
  const unsigned g = blocks_for(w.numel);
  cudaStream_t s = stream_of(l);
  auto* pred = static_cast<uint8_t*>(out);
  if (is_compare(op)) {
    if (dt == DType::kF32) compare_kernel<<<g, kThreads, 0, s>>>(op, static_cast<const float*>(a), static_cast<const float*>(b), pred, w);
    else if (dt == DType::kI32) compare_kernel<<<g, kThreads, 0, s>>>(op, static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), pred, w);
    else compare_kernel<<<g, kThreads, 0, s>>>(op, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), pred, w);
  } else if (op == BinaryOp::kAnd || op == BinaryOp::kOr) {
    logic_kernel<<<g, kThreads, 0, s>>>(op == BinaryOp::kAnd, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), pred, w);
  } else if (dt == DType::kF32) {
    arith_kernel<<<g, kThreads, 0, s>>>(op, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(out), w, l);
  } else {
    arith_kernel<<<g, kThreads, 0, s>>>(op, static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), static_cast<int32_t*>(out), w, l);
  }
}

void select(int elem_bytes, const void* pred, const void* a, const void* b, void* out, const Walk& w, const Launch& l) {
  const auto* p = static_cast<const uint8_t*>(pred);
  if (elem_bytes == 4) {
    select_kernel<<<blocks_for(w.numel), kThreads, 0, stream_of(l)>>>(p, static_cast<const int32_t*>(a),
        static_cast<const int32_t*>(b), static_cast<int32_t*>(out), w);
  } else {
    select_kernel<<<blocks_for(w.numel), kThreads, 0, stream_of(l)>>>(p, static_cast<const uint8_t*>(a),
        static_cast<const uint8_t*>(b), static_cast<uint8_t*>(out), w);
  }
}

void cast(DType from, DType to, const void* x, void* out, int64_t n, const Launch& l) {
  const unsigned g = blocks_for(n);
  cudaStream_t s = stream_of(l);
  if (to == DType::kF32 && from != DType::kI32 && from != DType::kBool) {
    to_f32_kernel<<<g, kThreads, 0, s>>>(from, x, static_cast<float*>(out), n);
  } else if (to == DType::kF16 || to == DType::kBF16) {
    launch_programmatic(to_half_kernel, dim3(g), dim3(kThreads), 0, s, true, to == DType::kBF16, static_cast<const float*>(x), out, n);
  } else {
    to_word_kernel<<<g, kThreads, 0, s>>>(from, to, x, out, n, l);
  }
}

void pointwise_chain(const ChainTask* tasks, int n, const Launch& l) {
  launch_programmatic(chain_kernel, dim3(1), dim3(kThreads), 0, stream_of(l), true, tasks, n, l.fault);
}

void iota(DType dt, int64_t inner, int64_t extent, void* out, int64_t n, const Launch& l) {
  if (dt == DType::kI32) iota_kernel<<<blocks_for(n), kThreads, 0, stream_of(l)>>>(inner, extent, static_cast<int32_t*>(out), n);
  else iota_kernel<<<blocks_for(n), kThreads, 0, stream_of(l)>>>(inner, extent, static_cast<float*>(out), n);
}

void glu(GluAct act, const float* gate, const float* up, float* out, int64_t n, const Launch& l, void* out16, bool out16_bf16) {
  glu_kernel<<<blocks_for(n), kThreads, 0, stream_of(l)>>>(act, gate, up, out, out16, out16_bf16, n);
}

void rope(const RopeTask& r, const Launch& l) {
  const int64_t n = r.rows * (r.rotary / 2 + r.d - r.rotary);
  rope_kernel<<<blocks_for(n), kThreads, 0, stream_of(l)>>>(r);
}

}  // namespace kvf::exec::cuda::step
