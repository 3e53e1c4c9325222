// The step executor's launches made fewer before its graph is captured: linears over one
// input grouped (with their norm, gated unit or residual add), rounding casts folded into
// the kernels that read them, ropes and cache writes packed (and folded into the QKV
// group's epilogue), runs of small elementwise ops chained into one launch, and a glu's
// output handed to the group behind already rounded to 16 bits.
#include <algorithm>
#include <set>

#include "exec/cuda/step/eqn_args.h"
#include "exec/cuda/step/executor.h"

namespace kvf::exec::cuda::step {

using ir::OpKind;

namespace {

// Per value: the eqns and outputs that read it.
std::vector<int> readers_of(const ir::Graph& g) {
  std::vector<int> readers(g.values.size(), 0);
  for (const ir::Eqn& e : g.eqns) {
    for (ir::ValueId v : e.in) ++readers[static_cast<size_t>(v)];
  }
  for (const ir::Output& o : g.outputs) ++readers[static_cast<size_t>(o.value)];
  return readers;
}

bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace

// An RMSNorm read only by the linear group after it: the group normalizes its input itself.
void CudaExecutor::fuse_norms() {
  const ir::Graph& g = plan_.graph;
  const std::vector<int> readers = readers_of(g);
  std::vector<Op> out;
  for (size_t i = 0; i < body_.size(); ++i) {
    const ir::Eqn& e = g.eqns[static_cast<size_t>(body_[i].eqn)];
    if (i + 1 < body_.size() && e.op == OpKind::kRmsNorm && body_[i + 1].grouped > 0) {
      Op& group = body_[i + 1];
      const ir::Eqn& first = g.eqns[static_cast<size_t>(group.eqn)];
      // The group reads the norm's input while it writes its outputs, which the buffer plan
      // may have placed over that input once the norm was its last reader.
      const Ref& x = body_[i].in[0];
      bool clear = true;
      for (int p = 0; p < group.group.parts; ++p) {
        clear = clear && !overlaps(group.group.part[p].out, group.group.part[p].n * (x.numel / group.in[1].type.shape[1]) * 4,
                                   x.data, x.numel * 4);
      }
      if (group.group.glu_out != nullptr) clear = clear && !overlaps(group.group.glu_out, group.out.numel * 4, x.data, x.numel * 4);
      if (group.group.residual_out != nullptr) clear = clear && !overlaps(group.group.residual_out, group.out.numel * 4, x.data, x.numel * 4);
      if (clear && first.in[0] == e.out && readers[static_cast<size_t>(e.out)] == group.group.parts) {
        group.group.norm_w = static_cast<const float*>(body_[i].in[1].data);
        group.group.norm_eps = e.params.eps;
        group.group.norm_unit_offset = e.params.unit_offset;
        group.group.norm_out = static_cast<float*>(body_[i].out.data);
        group.in[0] = body_[i].in[0];
        ++group.grouped;
        continue;  // the norm runs inside the group
      }
    }
    out.push_back(std::move(body_[i]));
  }
  body_ = std::move(out);
}

// A cast to f16/bf16 read only by the cache write after it (a dynamic_update_slice, or a
// paged step's scatter: rows entering a half cache): the write rounds the f32 rows itself.
void CudaExecutor::fuse_rounding_casts() {
  const ir::Graph& g = plan_.graph;
  const std::vector<int> readers = readers_of(g);
  std::vector<Op> out;
  for (size_t i = 0; i < body_.size(); ++i) {
    const ir::Eqn& e = g.eqns[static_cast<size_t>(body_[i].eqn)];
    if (i + 1 < body_.size() && e.op == OpKind::kCast && body_[i].in[0].type.dtype == DType::kF32 &&
        half(e.params.dtype) && readers[static_cast<size_t>(e.out)] == 1) {
      const ir::Eqn& next = g.eqns[static_cast<size_t>(body_[i + 1].eqn)];
      const int upd = next.op == OpKind::kDynamicUpdateSlice ? 1 : next.op == OpKind::kScatterUpdate ? 2 : -1;
      if (upd > 0 && next.in[static_cast<size_t>(upd)] == e.out) {
        Op update = std::move(body_[i + 1]);
        update.in[static_cast<size_t>(upd)] = body_[i].in[0];
        update.round_update = true;
        out.push_back(std::move(update));
        ++i;
        continue;
      }
    }
    out.push_back(std::move(body_[i]));
  }
  body_ = std::move(out);
}

Status CudaExecutor::hand_off_rounded_x() {
  if (tc_.handle == nullptr) return {};
  std::vector<size_t> pairs;  // body_ index of each glu group that hands on
  int64_t bytes = 0;
  for (size_t i = 0; i + 1 < body_.size(); ++i) {
    const Op& a = body_[i];
    const Op& b = body_[i + 1];
    if (a.grouped == 0 || !a.group.glu || b.grouped == 0 || b.group.norm_w != nullptr || b.in[0].data != a.group.glu_out) {
      continue;
    }
    const int64_t k = b.in[1].type.shape[1], m = b.in[0].numel / k;
    if (hands_rounded_x(m, k, b.in[1].type.dtype, b.group, Launch{device_.stream(), device_.fault(), b.eqn, tc_})) {
      pairs.push_back(i);
      bytes = std::max(bytes, m * k * 2);
    }
  }
  if (pairs.empty()) return {};
  Result<void*> p = device_.allocate_zeroed(bytes);
  if (!p) return p.take_error().context("the rounded glu outputs");
  x16_handoff_ = Buffer(&device_, *p, bytes);
  for (const size_t i : pairs) {
    body_[i].group.glu_out16 = *p;
    body_[i].group.glu_out16_bf16 = body_[i + 1].in[1].type.dtype == DType::kBF16;
    body_[i + 1].group.x16 = *p;
  }
  return {};
}

// The pack task that runs `op` (a rope, an in-place cache write, a paged step's in-place
// pool write whose slots an earlier launch checked, or a rope already merged with its
// write), or false.
bool CudaExecutor::pack_task(const Op& op, PackTask& t) const {
  const ir::Eqn& e = plan_.graph.eqns[static_cast<size_t>(op.eqn)];
  if (op.pack.tasks == 1) {
    t = op.pack.task[0];
    return true;
  }
  if (op.pack.tasks > 0 || op.grouped > 0 || op.decode_kernel) return false;
  if (e.op == OpKind::kRope) {
    t.kind = PackKind::kRope;
    t.rope = rope_task(op.in[0].data, op.in[0].type.shape, op.in[0].numel, op.in[1].data, op.in[2].data, e.params.rope, op.out.data);
    return true;
  }
  const bool slice = e.op == OpKind::kDynamicUpdateSlice, pool = e.op == OpKind::kScatterUpdate && op.slots_checked;
  if (!(slice || pool) || op.out.data != op.in[0].data) return false;  // in place only
  const DType to = op.out.type.dtype;
  if (to != DType::kF32 && !half(to)) return false;
  const Ref& upd = op.in[slice ? 1 : 2];
  if (!op.round_update && upd.type.dtype != to) return false;
  if (pool) {
    const int64_t rows = op.out.type.shape[0];
    t.kind = PackKind::kScatter;
    t.scatter = ScatterTask{to, op.round_update, upd.data, op.out.data, static_cast<const int32_t*>(op.in[1].data),
                            op.in[1].numel, op.out.numel / std::max<int64_t>(rows, 1)};
    return true;
  }
  const auto axis = static_cast<size_t>(e.params.axis);
  SliceTask s;
  s.to = to;
  s.rounded = op.round_update;
  s.upd = op.in[1].data;
  s.out = op.out.data;
  for (size_t k = 0; k < axis; ++k) s.outer *= op.out.type.shape[k];
  for (size_t k = axis + 1; k < op.out.type.shape.size(); ++k) s.inner *= op.out.type.shape[k];
  s.extent = op.out.type.shape[axis];
  s.n = op.in[1].type.shape[axis];
  s.start = static_cast<const int32_t*>(op.in[2].data);
  s.eqn = op.eqn;
  t.kind = PackKind::kSlice;
  t.slice = s;
  return true;
}

// Whether a and b may run at once: neither reads what the other writes, nor do their writes meet.
bool CudaExecutor::independent(const Op& a, const Op& b) const {
  auto bytes = [](const Ref& r) { return r.numel * std::max<int64_t>(1, elem_bytes(r.type.dtype)); };
  for (const Ref& in : a.in) {
    if (overlaps(in.data, bytes(in), b.out.data, bytes(b.out))) return false;
  }
  for (const Ref& in : b.in) {
    if (overlaps(in.data, bytes(in), a.out.data, bytes(a.out))) return false;
  }
  return !overlaps(a.out.data, bytes(a.out), b.out.data, bytes(b.out));
}

// A rope whose rows only a cache write reads (through the rounding cast fused into it), with
// nothing between them touching either: one op, the rope writing its rows into the cache.
// Its reads are the rope's and the write position, its write the cache.
void CudaExecutor::merge_rope_writes() {
  const ir::Graph& g = plan_.graph;
  const std::vector<int> readers = readers_of(g);
  for (size_t i = 0; i < body_.size(); ++i) {
    PackTask rope;
    if (body_[i].pack.tasks != 0 || g.eqns[static_cast<size_t>(body_[i].eqn)].op != OpKind::kRope || !pack_task(body_[i], rope)) {
      continue;
    }
    const ir::ValueId out = g.eqns[static_cast<size_t>(body_[i].eqn)].out;
    if (readers[static_cast<size_t>(out)] != 1) continue;
    for (size_t j = i + 1; j < body_.size() && j <= i + 3; ++j) {
      PackTask write;
      const Op& w = body_[j];
      const bool packs = pack_task(w, write);
      const bool into_slice = packs && write.kind == PackKind::kSlice && write.slice.upd == rope.rope.out &&
                              (write.slice.rounded || write.slice.to == DType::kF32);
      const bool into_pool = packs && write.kind == PackKind::kScatter && write.scatter.upd == rope.rope.out &&
                             (write.scatter.rounded || write.scatter.to == DType::kF32);
      const bool fits = into_slice || into_pool;
      if (!fits) {
        if (!independent(body_[i], w)) break;
        continue;
      }
      bool clear = true;  // the write moves up to the rope: nothing between may touch the cache
      for (size_t k = i + 1; k < j; ++k) clear = clear && independent(body_[k], w);
      if (!clear) break;
      Op merged = body_[i];
      merged.pack = Pack{};
      merged.pack.tasks = 1;
      merged.pack.task[0].kind = into_slice ? PackKind::kRopeIntoSlice : PackKind::kRopeIntoScatter;
      merged.pack.task[0].rope = rope.rope;
      merged.pack.task[0].slice = write.slice;
      merged.pack.task[0].scatter = write.scatter;
      merged.in = {body_[i].in[0], body_[i].in[1], body_[i].in[2], w.in[into_slice ? 2 : 1]};
      merged.out = w.out;
      body_[i] = std::move(merged);
      body_.erase(body_.begin() + static_cast<std::ptrdiff_t>(j));
      break;
    }
  }
}

// Runs of consecutive ropes and in-place cache writes (a decode step's q rope, k rope into
// the K cache and V write) become one launch when they are independent of each other.
void CudaExecutor::pack_small_ops() {
  merge_rope_writes();
  std::vector<Op> out;
  for (size_t i = 0; i < body_.size();) {
    Pack pack;
    size_t j = i;
    for (; j < body_.size() && pack.tasks < kPackTasks; ++j) {
      PackTask t;
      if (!pack_task(body_[j], t)) break;
      bool clear = true;
      for (size_t k = i; k < j; ++k) clear = clear && independent(body_[k], body_[j]);
      if (!clear) break;
      pack.task[pack.tasks++] = t;
    }
    if (j - i < 2) {
      out.push_back(std::move(body_[i++]));
      continue;
    }
    Op packed = std::move(body_[i]);
    packed.pack = pack;
    out.push_back(std::move(packed));
    i = j;
  }
  body_ = std::move(out);
}

void CudaExecutor::fold_packs_into_groups() {
  std::vector<Op> out;
  for (size_t i = 0; i < body_.size(); ++i) {
    out.push_back(std::move(body_[i]));
    Op& group = out.back();
    if (group.grouped == 0 || i + 1 == body_.size()) continue;
    Pack then = body_[i + 1].pack;
    if (then.tasks == 0 && pack_task(body_[i + 1], then.task[0])) then.tasks = 1;
    if (then.tasks == 0) continue;
    LinearGroup with = group.group;
    with.then = then;
    if (!pack_in_epilogue(with)) continue;
    group.group = with;
    ++i;  // the pack's op is gone: the group's launch runs it
  }
  body_ = std::move(out);
}

// The chain task that runs `op` (a unary, binary or word cast of at most kChainElements
// elements, as unary(), binary() and cast() would), or false.
bool CudaExecutor::chain_task(const Op& op, ChainTask& t) const {
  if (op.grouped > 0 || op.pack.tasks > 0 || op.decode_kernel || op.tiles || op.chain > 0 || op.validation >= 0) return false;
  if (op.out.numel < 1 || op.out.numel > kChainElements || op.in.empty()) return false;
  const ir::Eqn& e = plan_.graph.eqns[static_cast<size_t>(op.eqn)];
  const DType dt = op.in[0].type.dtype;
  t = ChainTask{};
  t.dt = dt;
  t.a = op.in[0].data;
  t.out = op.out.data;
  t.eqn = op.eqn;
  t.w.shape[0] = t.w.numel = op.out.numel;
  if (ir::is_unary(e.op)) {
    t.kind = ChainKind::kUnary;
    t.op = static_cast<uint8_t>(unary_op(e.op));
    return dt == DType::kF32 || dt == DType::kI32;
  }
  if (ir::is_binary(e.op)) {
    t.kind = ChainKind::kBinary;
    t.op = static_cast<uint8_t>(binary_op(e.op, e.params.cmp));
    t.b = op.in[1].data;
    t.w = broadcast_walk(op.out.type.shape, {&op.in[0].type.shape, &op.in[1].type.shape});
    return word(dt);
  }
  if (e.op == OpKind::kCast) {
    t.kind = ChainKind::kCast;
    t.to = op.out.type.dtype;
    return word(dt) && word(t.to);
  }
  return false;
}

Status CudaExecutor::chain_small_ops() {
  std::vector<Op> out;
  for (size_t i = 0; i < body_.size();) {
    size_t j = i;
    const size_t first = chain_host_.size();
    ChainTask t;
    while (j < body_.size() && chain_task(body_[j], t)) {
      chain_host_.push_back(t);
      ++j;
    }
    if (j - i < 2) {  // a lone op launches as it is
      chain_host_.resize(first);
      out.push_back(std::move(body_[i++]));
      continue;
    }
    Op chained = std::move(body_[i]);
    chained.chain = static_cast<int>(j - i);
    chained.chain_at = static_cast<int64_t>(chain_host_.size()) - chained.chain;
    out.push_back(std::move(chained));
    i = j;
  }
  body_ = std::move(out);
  if (chain_host_.empty()) return {};
  const auto bytes = static_cast<int64_t>(chain_host_.size() * sizeof(ChainTask));
  Result<void*> d = device_.allocate_zeroed(bytes);
  if (!d) return d.take_error().context("the chained ops' tasks");
  chain_tasks_ = Buffer(&device_, *d, bytes);
  return device_.copy_to_device(*d, chain_host_.data(), bytes);  // chain_host_ outlives the copy
}

// A paged step writes every layer's K and V through the same slot map: its check (every slot
// in the pool, none twice) runs with the first write, and a fault there stops every later one.
void CudaExecutor::check_slots_once() {
  const ir::Graph& g = plan_.graph;
  std::set<std::pair<ir::ValueId, int64_t>> checked;  // (slot map, pool rows)
  for (Op& op : body_) {
    const ir::Eqn& e = g.eqns[static_cast<size_t>(op.eqn)];
    if (e.op != OpKind::kScatterUpdate || op.pack.tasks > 0) continue;
    op.slots_checked = !checked.insert({e.in[1], op.out.type.shape[0]}).second;
  }
}

// Consecutive linears over one input (plan::colocate_linears put them together) become one
// launch, with the glu over the first two, or the residual add after a single one, as its
// epilogue when nothing else reads the values it then never writes.
void CudaExecutor::group_linears() {
  const ir::Graph& g = plan_.graph;
  const std::vector<int> readers = readers_of(g);
  auto eqn = [&](const Op& op) -> const ir::Eqn& { return g.eqns[static_cast<size_t>(op.eqn)]; };
  auto read_once = [&](ir::ValueId v) { return readers[static_cast<size_t>(v)] == 1; };
  std::vector<Op> out;
  for (size_t i = 0; i < body_.size();) {
    const ir::Eqn& first = eqn(body_[i]);
    if (first.op != OpKind::kLinear) {
      out.push_back(std::move(body_[i++]));
      continue;
    }
    Op op = body_[i];
    op.grouped = 1;
    op.group.parts = 0;
    size_t j = i;
    while (j < body_.size() && op.group.parts < 3 && eqn(body_[j]).op == OpKind::kLinear &&
           eqn(body_[j]).in[0] == first.in[0] && body_[j].in[1].type.dtype == body_[i].in[1].type.dtype) {
      const Op& l = body_[j];
      op.group.part[op.group.parts++] =
          LinearPart{l.in[1].data, eqn(l).params.has_bias ? static_cast<const float*>(l.in[2].data) : nullptr,
                     l.in[1].type.shape[0], static_cast<float*>(l.out.data)};
      ++j;
    }
    if (j < body_.size()) {
      const ir::Eqn& next = eqn(body_[j]);
      const ir::ValueId y0 = eqn(body_[i]).out;
      if (op.group.parts == 2 && next.op == OpKind::kGlu && next.in[0] == y0 && next.in[1] == eqn(body_[i + 1]).out &&
          read_once(y0) && read_once(next.in[1])) {
        op.group.glu = true;
        op.group.act = glu_act(next.params.glu);
        op.group.glu_out = static_cast<float*>(body_[j].out.data);
        ++j;
      } else if (op.group.parts == 1 && next.op == OpKind::kAdd && read_once(y0) &&
                 (next.in[0] == y0 || next.in[1] == y0) && g.type(next.in[0]).shape == g.type(next.in[1]).shape) {
        const Op& add = body_[j];
        const Ref& res = next.in[0] == y0 ? add.in[1] : add.in[0];
        const Ref& x = body_[i].in[0];
        // The launch reads x whole while it writes the sum: they must not share bytes.
        if (!overlaps(add.out.data, add.out.numel * 4, x.data, x.numel * 4)) {
          op.group.residual = static_cast<const float*>(res.data);
          op.group.residual_out = static_cast<float*>(add.out.data);
          ++j;
        }
      }
    }
    op.grouped = static_cast<int>(j - i);
    out.push_back(std::move(op));
    i = j;
  }
  body_ = std::move(out);
}

}  // namespace kvf::exec::cuda::step
