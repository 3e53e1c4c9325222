// HostTensor: a typed, shaped view of host memory that either owns its bytes or borrows
// them (e.g. from an mmap, kept alive by a shared handle). Not a compute type: eval/ and
// exec/ read and write through it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace kvf {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);  // "[2,3,4]"
// Element count; refuses negative dims and products past 2^62.
Result<int64_t> checked_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);  // row-major, in elements
// The row-major strides (in elements) of `operand` read at every index of `out` under numpy
// broadcasting (shapes aligned on the right; an axis the operand lacks, or has as 1 where
// out does not, has stride 0), into strides[0 .. out.size()). No allocation: the kernels'
// walks call it per launch.
void broadcast_strides(const Shape& operand, const Shape& out, int64_t* strides);
int64_t numel(const Shape& shape);  // element count of a shape already checked (a graph value's)

class HostTensor {
 public:
  HostTensor() = default;

  // A fresh, zeroed, owning tensor.
  static Result<HostTensor> zeros(DType dtype, Shape shape);
  // Copies values into a fresh f32 / i32 tensor; values.size() must equal the element count.
  static Result<HostTensor> from_f32(Shape shape, std::span<const float> values);
  static Result<HostTensor> from_i32(Shape shape, std::span<const int32_t> values);
  // Views `bytes` bytes at data without copying; `keepalive` holds the owner (mmap, buffer).
  static Result<HostTensor> borrow(DType dtype, Shape shape, const void* data, int64_t bytes,
                                   std::shared_ptr<const void> keepalive = nullptr);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // elements; plain dtypes only
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const;
  bool owning() const { return owning_; }
  bool is_contiguous() const { return strides_ == contiguous_strides(shape_); }

  const void* raw() const { return data_; }
  void* raw_mut() { return data_; }
  template <class T> T* data() { return static_cast<T*>(data_); }
  template <class T> const T* data() const { return static_cast<const T*>(data_); }

  // Same bytes, new shape (contiguous tensors only; element count must match).
  Result<HostTensor> reshape(Shape shape) const;
  // Entry i of axis 0 (rank >= 2, contiguous; any dtype: the rows stay whole blocks): a view
  // of those bytes that keeps this tensor's storage alive.
  Result<HostTensor> index0(int64_t i) const;
  // Same bytes, axes reordered (plain dtypes only): a strided view.
  Result<HostTensor> permute(const std::vector<int64_t>& perm) const;
  // A fresh owning, row-major copy of this (possibly strided) view; plain dtypes only.
  Result<HostTensor> contiguous() const;
  // Every element widened to f32 in row-major logical order (dequantizes blocks, follows strides).
  Result<std::vector<float>> to_f32() const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  Shape strides_;
  int64_t numel_ = 0;
  void* data_ = nullptr;
  std::shared_ptr<const void> owner_;
  bool owning_ = false;
};

}  // namespace kvf
