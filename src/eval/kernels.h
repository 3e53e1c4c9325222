// The oracle's per-primitive loops. Each reads its operands and writes a fresh Buffer of
// the eqn's declared type in full precision; oracle.cpp rounds to the dtype afterwards.
// Data-dependent failures (an index outside a table, an integer divide by zero) are
// typed errors, never undefined behaviour.
#pragma once

#include <span>

#include "core/thread_pool.h"
#include "eval/buffer.h"
#include "ir/graph.h"

namespace kvf::eval {

struct KernelArgs {
  const ir::Eqn& eqn;
  std::span<const Buffer* const> in;
  const ir::TensorType& out_type;
  ThreadPool* pool;  // may be null: run inline
  bool native = false;  // Precision::kNative: fused loops round where their chain would
};

Result<Buffer> eval_unary(const KernelArgs& a);
Result<Buffer> eval_binary(const KernelArgs& a);  // arithmetic, compare, and/or
Result<Buffer> eval_select(const KernelArgs& a);
Result<Buffer> eval_cast(const KernelArgs& a);
Result<Buffer> eval_iota(const KernelArgs& a);
Result<Buffer> eval_reduce(const KernelArgs& a);
Result<Buffer> eval_reshape(const KernelArgs& a);
Result<Buffer> eval_transpose(const KernelArgs& a);
Result<Buffer> eval_broadcast(const KernelArgs& a);
Result<Buffer> eval_slice(const KernelArgs& a);
Result<Buffer> eval_concat(const KernelArgs& a);
Result<Buffer> eval_gather(const KernelArgs& a);
Result<Buffer> eval_scatter_update(const KernelArgs& a);
Result<Buffer> eval_dynamic_update_slice(const KernelArgs& a);
Result<Buffer> eval_matmul(const KernelArgs& a);
// fused ops (kernels_fused.cpp)
Result<Buffer> eval_attention(const KernelArgs& a);
Result<Buffer> eval_rope(const KernelArgs& a);
Result<Buffer> eval_rmsnorm(const KernelArgs& a);
Result<Buffer> eval_softmax(const KernelArgs& a);
Result<Buffer> eval_glu(const KernelArgs& a);
Result<Buffer> eval_linear(const KernelArgs& a);
Result<Buffer> eval_moe(const KernelArgs& a);
Result<Buffer> eval_lora(const KernelArgs& a);
Result<Buffer> eval_block_topk(const KernelArgs& a);
Result<Buffer> eval_selected_attention(const KernelArgs& a);
Result<Buffer> eval_indexer_scores(const KernelArgs& a);

}  // namespace kvf::eval
