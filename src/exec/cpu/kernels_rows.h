// Fused row and pointwise kernels (compile/'s fusion): RMSNorm, rotary embedding, softmax
// rows and gated units, f32, over the pool. Their meaning is eval/kernels_fused.cpp's.
#pragma once

#include <span>

#include "core/thread_pool.h"
#include "exec/tensor_ref.h"

namespace kvf::exec::cpu {

void rmsnorm_rows(ThreadPool& pool, const Ref& x, const Ref& weight, double eps, bool unit_offset, const Ref& out);
void rope_rows(ThreadPool& pool, const Ref& x, const Ref& cos, const Ref& sin, const ir::RopeParams& p, const Ref& out);
void softmax_rows(ThreadPool& pool, const Ref& x, const Ref& out);
void glu(ThreadPool& pool, ir::GluAct act, const Ref& gate, const Ref& up, const Ref& out);

// glu's AVX-512 body over elements [i0, i1) (glu_avx512.cpp; call only on a CPU that has
// AVX-512): false, writing nothing, for an activation it has no vector form of.
bool glu_avx512(ir::GluAct act, const float* gate, const float* up, float* out, int64_t i0, int64_t i1);

}  // namespace kvf::exec::cpu
