// An attention eqn's AttentionArgs from its request and its bound inputs, in the eqn's order:
// q, k, v, then the split key, the mask, the live length and the read map where its params
// have them. Both executors bind their attention eqns through it, whatever their tensor
// reference type (anything with `data` and `type`).
#pragma once

#include <vector>

#include "exec/attention_args.h"
#include "ir/op_kind.h"
#include "plan/request.h"

namespace kvf::exec {

template <class Ref>
AttentionArgs attention_operands(const ir::AttnParams& p, const plan::AttentionRequest& r, const std::vector<Ref>& in,
                                 void* out) {
  AttentionArgs a;
  a.batch = r.batch;
  a.hq = r.hq;
  a.hkv = r.hkv;
  a.lq = r.lq;
  a.lk = r.lk;
  a.dk = r.dk;
  a.ds = r.ds;
  a.dv = r.dv;
  a.q = static_cast<const float*>(in[0].data);
  a.kv_dtype = r.kv_dtype;
  a.k = in[1].data;
  a.v = in[2].data;
  size_t next = 3;
  if (p.has_shared) a.k_shared = in[next++].data;
  if (p.has_mask) {
    const Ref& m = in[next++];
    a.mask = static_cast<const float*>(m.data);
    a.mask_batch = m.type.shape[0];
    a.mask_heads = m.type.shape[1];
  }
  if (p.has_len) a.len = static_cast<const int32_t*>(in[next++].data);
  if (p.has_read) {  // paged keys: the pools and the read map
    a.read = static_cast<const int32_t*>(in[next++].data);
    a.pool_rows = r.pool_rows;
  }
  a.scale = static_cast<float>(r.scale);
  a.softcap = static_cast<float>(r.softcap);
  a.out = static_cast<float*>(out);
  return a;
}

}  // namespace kvf::exec
