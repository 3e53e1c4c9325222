// Data-movement kernels: strided copies (transpose, slice, broadcast, concat), gathers of
// stored rows, and the two in-place state writers (dynamic update slice, scatter).
#include <type_traits>

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

template <class T>
__global__ void strided_copy_kernel(const T* src, int64_t src_base, T* dst, int64_t dst_base, Walk w) {
  for (const int64_t i : grid_stride(w.numel)) {
    dst[dst_base + walk_offset(w, 1, i)] = src[src_base + walk_offset(w, 0, i)];
  }
}

// One block per gathered row; a bad index faults and leaves its row unwritten.
__global__ void gather_kernel(DType table_dt, const uint8_t* table, int64_t rows, int64_t row, const int32_t* idx,
                              DType out_dt, uint8_t* out, Launch l) {
  const int64_t i = blockIdx.x;
  const int32_t r = idx[i];
  if (r < 0 || r >= rows) {
    if (threadIdx.x == 0) raise_fault(l.fault, DeviceFault::kGatherIndex, l.eqn, r);
    return;
  }
  const uint8_t* src = table + r * stored_row_bytes(table_dt, row);
  if (out_dt == DType::kF32) {
    auto* o = reinterpret_cast<float*>(out) + i * row;
    for (int64_t j = threadIdx.x; j < row; j += blockDim.x) o[j] = load_stored(table_dt, src, j);
  } else {
    const int64_t bytes = stored_row_bytes(out_dt, row);
    uint8_t* o = out + i * bytes;
    for (int64_t j = threadIdx.x; j < bytes; j += blockDim.x) o[j] = src[j];
  }
}

// An element of U stored as T: the same bits, or an f32 rounded to a half type.
template <class T, class U>
__device__ T store_as(U x) {
  if constexpr (std::is_same_v<T, U>) return x;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}

template <class T, class U>
__global__ void update_slice_kernel(const U* upd, T* out, int64_t outer, int64_t extent, int64_t n, int64_t inner,
                                    const int32_t* start_p, Launch l) {
  const int32_t start = *start_p;
  if (start < 0 || start + n > extent) {
    if (blockIdx.x == 0 && threadIdx.x == 0) raise_fault(l.fault, DeviceFault::kUpdateOverflow, l.eqn, start);
    return;
  }
  if (faulted(l.fault)) return;  // state is not written after a failure in this step
  const int64_t total = outer * n * inner;
  for (const int64_t i : grid_stride(total)) {
    const int64_t o = i / (n * inner), rest = i % (n * inner);
    out[(o * extent + start) * inner + rest] = store_as<T>(upd[i]);
  }
}

// The scatter's checks, before any row is written: every slot in range, none written twice.
// A block takes kScatterCheck slots and compares each with every slot before it, a shared
// tile of them at a time (quadratic, but a step's slots number a few thousand at most).
constexpr int kScatterCheck = 256;

__global__ void scatter_check_kernel(const int32_t* idx, int64_t m, int64_t rows, Launch l) {
  __shared__ int32_t tile[kScatterCheck];
  const int64_t i = blockIdx.x * static_cast<int64_t>(kScatterCheck) + threadIdx.x;
  const int32_t r = i < m ? idx[i] : -1;
  if (i < m && (r < -1 || r >= rows)) raise_fault(l.fault, DeviceFault::kScatterSlot, l.eqn, r);
  const int64_t end = (blockIdx.x + 1) * static_cast<int64_t>(kScatterCheck), last = end < m ? end : m;
  bool twice = false;
  for (int64_t base = 0; base < last; base += kScatterCheck) {
    __syncthreads();
    if (base + threadIdx.x < m) tile[threadIdx.x] = idx[base + threadIdx.x];
    __syncthreads();
    const int64_t n = i - base < kScatterCheck ? i - base : kScatterCheck;  // the slots before i in this tile
    for (int64_t j = 0; j < n && r >= 0 && !twice; ++j) twice = tile[j] == r;
  }
  if (twice) raise_fault(l.fault, DeviceFault::kScatterTwice, l.eqn, r);
}

// Row idx[i] of out = row i of upd (rounded when U is f32 and T a half type); nothing after a
// fault of this step, the checks' included.
template <class T, class U>
__global__ void scatter_write_kernel(const int32_t* idx, int64_t m, const U* upd, T* out, int64_t row, Launch l) {
  if (faulted(l.fault)) return;
  for (const int64_t e : grid_stride(m * row)) {
    const int64_t i = e / row, j = e % row;
    const int32_t r = idx[i];
    if (r >= 0) out[r * row + j] = store_as<T>(upd[e]);
  }
}

template <class T, class U>
void scatter_as(const int32_t* idx, int64_t m, const U* upd, T* out, int64_t rows, int64_t row, bool check, const Launch& l) {
  if (m == 0) return;
  cudaStream_t s = stream_of(l);
  const auto checks = static_cast<unsigned>((m + kScatterCheck - 1) / kScatterCheck);
  if (check) scatter_check_kernel<<<checks, kScatterCheck, 0, s>>>(idx, m, rows, l);
  scatter_write_kernel<<<blocks_for(m * row), kThreads, 0, s>>>(idx, m, upd, out, row, l);
}

}  // namespace

void strided_copy(int elem_bytes, const void* src, int64_t src_base, void* dst, int64_t dst_base, const Walk& w,
                  const Launch& l) {
  const unsigned g = blocks_for(w.numel);
  cudaStream_t s = stream_of(l);
  switch (elem_bytes) {
    case 4: strided_copy_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint32_t*>(src), src_base, static_cast<uint32_t*>(dst), dst_base, w); break;
    case 2: strided_copy_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint16_t*>(src), src_base, static_cast<uint16_t*>(dst), dst_base, w); break;
    default: strided_copy_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint8_t*>(src), src_base, static_cast<uint8_t*>(dst), dst_base, w); break;
  }
}

void gather(DType table_dt, const void* table, int64_t rows, int64_t row, const int32_t* idx, int64_t n, DType out_dt,
            void* out, const Launch& l) {
  if (n == 0) return;
  gather_kernel<<<static_cast<unsigned>(n), 128, 0, stream_of(l)>>>(table_dt, static_cast<const uint8_t*>(table), rows,
                                                                   row, idx, out_dt, static_cast<uint8_t*>(out), l);
}

void update_slice(int elem_bytes, const void* upd, void* out, int64_t outer, int64_t extent, int64_t n, int64_t inner,
                  const int32_t* start, const Launch& l) {
  const unsigned g = blocks_for(outer * n * inner);
  cudaStream_t s = stream_of(l);
  switch (elem_bytes) {
    case 4: update_slice_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint32_t*>(upd), static_cast<uint32_t*>(out), outer, extent, n, inner, start, l); break;
    case 2: update_slice_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint16_t*>(upd), static_cast<uint16_t*>(out), outer, extent, n, inner, start, l); break;
    default: update_slice_kernel<<<g, kThreads, 0, s>>>(static_cast<const uint8_t*>(upd), static_cast<uint8_t*>(out), outer, extent, n, inner, start, l); break;
  }
}

void update_slice_rounded(DType to, const float* upd, void* out, int64_t outer, int64_t extent, int64_t n,
                          int64_t inner, const int32_t* start, const Launch& l) {
  const unsigned g = blocks_for(outer * n * inner);
  cudaStream_t s = stream_of(l);
  if (to == DType::kBF16) {
    update_slice_kernel<<<g, kThreads, 0, s>>>(upd, static_cast<__nv_bfloat16*>(out), outer, extent, n, inner, start, l);
  } else {
    update_slice_kernel<<<g, kThreads, 0, s>>>(upd, static_cast<__half*>(out), outer, extent, n, inner, start, l);
  }
}

void scatter(int elem_bytes, const int32_t* idx, int64_t m, const void* upd, void* out, int64_t rows, int64_t row,
             bool check, const Launch& l) {
  switch (elem_bytes) {
    case 4: scatter_as(idx, m, static_cast<const uint32_t*>(upd), static_cast<uint32_t*>(out), rows, row, check, l); break;
    case 2: scatter_as(idx, m, static_cast<const uint16_t*>(upd), static_cast<uint16_t*>(out), rows, row, check, l); break;
    default: scatter_as(idx, m, static_cast<const uint8_t*>(upd), static_cast<uint8_t*>(out), rows, row, check, l); break;
  }
}

void scatter_rounded(DType to, const int32_t* idx, int64_t m, const float* upd, void* out, int64_t rows, int64_t row,
                     bool check, const Launch& l) {
  if (to == DType::kBF16) scatter_as(idx, m, upd, static_cast<__nv_bfloat16*>(out), rows, row, check, l);
  else scatter_as(idx, m, upd, static_cast<__half*>(out), rows, row, check, l);
}

}  // namespace kvf::exec::cuda::step
