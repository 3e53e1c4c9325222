// lora (exact): the LoRA term models/lora_trace.cpp traces onto a projection's result y,
//   y + reshape(matmul(reshape(matmul(reshape(gather(a, ids)), reshape(x))), reshape(gather(b, ids)))
//               * broadcast(reshape(gather(s, ids))))
// (the outer reshape absent where the term already has y's shape; a cast to f32 after the a
// and b gathers where the stacks are f16)
// becomes one Lora eqn over x, y, the stacks a, b, s and ids (x read as [rows, in], through a
// reshape when the chain reads it from another shape), which an executor runs per
// adapter over the rows that use it (rows of adapter 0 add nothing). The oracle computes it
// as the chain does, sum for sum. Anything else keeps its eqns.
#include "compile/match.h"
#include "compile/passes.h"
#include "ir/infer.h"

namespace kvf::compile {
namespace {

using ir::Eqn;
using ir::OpKind;
using ir::ValueId;

// The stack rows gathered by ids (and cast to f32 from a 16-bit stack) and reshaped: the
// gather (recorded in c) or null.
const Eqn* gathered_rows(Chain& c, ValueId v) {
  const Eqn* r = c.take(v, OpKind::kReshape);
  if (r == nullptr) return nullptr;
  const Eqn* widen = c.take(r->in[0], OpKind::kCast);
  return c.take(widen != nullptr ? widen->in[0] : r->in[0], OpKind::kGather);
}

std::optional<Match> lora_at(const ir::Graph& g, size_t root) {
  std::optional<Match> found;
  either_order(g.eqns[root], [&](ValueId y, ValueId term) {
    Chain c(g);
    // The term back in y's shape: no reshape where it already has it (a decode's one row).
    const Eqn* back = c.take(term, OpKind::kReshape);
    const Eqn* mul = c.take(back ? back->in[0] : term, OpKind::kMul);
    if (!mul) return false;
    return either_order(*mul, [&](ValueId product, ValueId scale) {
      Chain t = c;
      const Eqn* outer = t.take(product, OpKind::kMatMul);
      // The scales' gather (and its broadcast) may serve several projections once cse has
      // merged equal stacks: read, not taken into the body; dce drops them when unused.
      const Eqn* bcast = def(g, scale, OpKind::kBroadcast);
      const Eqn* s3 = bcast ? def(g, bcast->in[0], OpKind::kReshape) : nullptr;
      const Eqn* gs = s3 ? def(g, s3->in[0], OpKind::kGather) : nullptr;
      const Eqn* gb = outer && gs ? gathered_rows(t, outer->in[1]) : nullptr;
      const Eqn* ax_row = gb ? t.take(outer->in[0], OpKind::kReshape) : nullptr;  // A x as [rows, 1, r]
      const Eqn* inner = ax_row ? t.take(ax_row->in[0], OpKind::kMatMul) : nullptr;
      const Eqn* ga = inner ? gathered_rows(t, inner->in[0]) : nullptr;
      const Eqn* x3 = ga ? def(g, inner->in[1], OpKind::kReshape) : nullptr;  // shared by x's projections
      if (!x3 || ga->in[1] != gb->in[1] || ga->in[1] != gs->in[1]) return false;
      Match m;
      m.root = root;
      m.body = t.body();
      m.op = OpKind::kLora;
      m.operands = {x3->in[0], y, ga->in[0], gb->in[0], gs->in[0], ga->in[1]};
      std::vector<ir::TensorType> types;
      for (ValueId v : m.operands) types.push_back(g.type(v));
      const Shape& rows_in = g.type(x3->out).shape;  // [rows, in, 1]
      if (types[0].shape.back() != rows_in[1]) {  // x reshaped into the rows of the chain's reshape
        m.reshape_first = Shape{rows_in[0], rows_in[1]};
        types[0].shape = *m.reshape_first;
      }
      Result<ir::TensorType> typed = ir::infer(OpKind::kLora, {}, types);
      if (!typed || *typed != g.type(g.eqns[root].out)) return false;
      found = std::move(m);
      return true;
    });
  });
  return found;
}

Result<ir::Graph> lora(const ir::Graph& g) {
  std::vector<Match> found;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (g.eqns[i].op != OpKind::kAdd) continue;
    if (std::optional<Match> m = lora_at(g, i)) found.push_back(std::move(*m));
  }
  if (found.empty()) return g;
  Result<ir::Graph> fused = apply_matches(g, std::move(found));
  if (!fused) return fused;
  return dce_pass().run(*fused);
}

}  // namespace

Pass lora_pass() { return {"lora", Exactness::kExact, lora}; }

}  // namespace kvf::compile
