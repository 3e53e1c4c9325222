// cse (exact): one eqn per (op, params, operands). Eqns are pure, so a repeat of an
// eqn over the same (renamed) operands is the same value; literals of equal bits and dtype
// merge first so that `x * 0.5` traced twice meets itself. Constants with one name are
// one value already (ir::Builder), and slots and state are unique by construction.
// A collective (all_reduce) is not pure in this sense: it is a call every rank of the group
// makes, so each is kept as its own eqn.
#include <bit>
#include <map>
#include <unordered_map>

#include "compile/match.h"
#include "compile/passes.h"

namespace kvf::compile {
namespace {

using ir::ValueId;

// Doubles by their bits: -0 and +0 differ, and so do two spellings of a NaN.
uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }

// Every field of Params (params_key): an op ignores the ones it does not read, and the tracer
// leaves those at their defaults, so comparing them all only ever misses a merge.
std::string eqn_key(const ir::Eqn& e, const std::vector<ValueId>& in) {
  std::string key = str_cat(static_cast<int>(e.op), "|");
  for (ValueId v : in) key += str_cat(v, ",");
  return key + "|" + params_key(e.params);
}

// For every literal, the first literal of the graph with its bits and dtype.
std::vector<ValueId> literal_representatives(const ir::Graph& g) {
  std::vector<ValueId> rep(g.values.size(), -1);
  std::map<std::pair<uint64_t, DType>, ValueId> first;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const ir::Value& v = g.values[i];
    if (v.kind != ir::ValueKind::kLiteral) continue;
    rep[i] = first.try_emplace({bits(v.literal), v.type.dtype}, static_cast<ValueId>(i)).first->second;
  }
  return rep;
}

Result<ir::Graph> cse(const ir::Graph& g) {
  const std::vector<ValueId> rep = literal_representatives(g);
  std::unordered_map<std::string, ValueId> seen;  // key -> new value
  return rewrite_each(g, [&](Rewriter& rw, size_t i) {
    const ir::Eqn& e = g.eqns[i];
    std::vector<ValueId> in;
    for (ValueId v : e.in) {
      const ValueId r = rep[static_cast<size_t>(v)];
      if (r >= 0 && r != v && !rw.has(v)) rw.replace(v, rw.get(r));
      in.push_back(rw.get(v).id);
    }
    if (ir::is_collective(e.op)) {
      rw.keep(e);
      return true;
    }
    const std::string key = eqn_key(e, in);
    auto it = seen.find(key);
    if (it != seen.end()) {
      rw.replace(e.out, ir::V{&rw.builder(), it->second});
      return true;
    }
    seen.emplace(key, rw.keep(e).id);
    return true;
  });
}

}  // namespace

Pass cse_pass() { return {"cse", Exactness::kExact, cse}; }

}  // namespace kvf::compile
