// The attention rewrite pass (DESIGN.md §3, docs/attention.md): every ops::attention_prefill,
// attention_masked, attention_live and attention_paged chain becomes one Attention eqn, whose
// meaning is eval/kernels_fused.cpp's eval_attention; a paged chain whose read map is proven
// to name pool rows becomes the paged-key form, which reads the pools through the map.
// Reassociating: the fused op rounds once, the chain at every step. A chain it cannot prove
// keeps its decomposition; schedules live in plan/.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "compile/attention_match.h"
#include "compile/passes.h"
#include "compile/rewriter.h"
#include "ir/infer.h"
#include "ir/printer.h"

namespace kvf::compile {
namespace attention {

using ir::Eqn;
using ir::OpKind;
using ir::TensorType;
using ir::ValueId;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A binary eqn's non-literal operand and its literal one, when exactly one is a literal.
struct LiteralSide {
  ValueId other = -1;
  std::optional<double> value;
};

// One walk from a final MatMul back to the operands. Every eqn it accepts as part of the
// chain is recorded in chain_; predicates and the length guard are checked, not recorded,
// because they may be shared (every layer's live predicate is the same after cse).
class Matcher {
 public:
  Matcher(const ir::Graph& g, const Uses& uses) : g_(g), uses_(uses) {}

  MatchResult run(size_t root) {
    MatchResult r;
    if (!attend(root)) {
      r.why_not = why_;
      return r;
    }
    AttnMatch m;
    m.root = root;
    m.params = p_;
    m.operands = operands_;
    m.absorbed = chain_;
    m.kept_view = kept_view_;
    r.match = std::move(m);
    return r;
  }

 private:
  bool decline(std::string why) {
    why_ = std::move(why);
    return false;
  }
  size_t index(const Eqn* e) const { return static_cast<size_t>(e - g_.eqns.data()); }
  std::string ref(ValueId v) const { return ir::value_ref(g_, v); }
  const Shape& shape(ValueId v) const { return g_.type(v).shape; }

  const Eqn* def(ValueId v, OpKind op) const { return compile::def(g_, v, op); }
  const Eqn* take(const Eqn* e) {
    if (e) chain_.push_back(index(e));
    return e;
  }
  std::optional<double> literal(ValueId v) const {
    const ir::Value& x = g_.value(v);
    if (x.kind != ir::ValueKind::kLiteral) return std::nullopt;
    return x.literal;
  }
  LiteralSide with_literal(const Eqn& e) const {
    const std::optional<double> a = literal(e.in[0]), b = literal(e.in[1]);
    if (a.has_value() == b.has_value()) return {};
    return a ? LiteralSide{e.in[1], a} : LiteralSide{e.in[0], b};
  }
  bool last_axis_keepdim(const Eqn& reduce) const { return reduces_last_axis_keepdim(g_, reduce); }
  // v is read only by eqns of `within` and is not exported.
  bool only_read_by(ValueId v, const std::vector<size_t>& within) const {
    if (uses_.is_root(v)) return false;
    for (size_t r : uses_.readers(v)) {
      if (!std::binary_search(within.begin(), within.end(), r)) return false;
    }
    return true;
  }

  bool attend(size_t root);
  bool softmax(ValueId p, ValueId& x);
  bool scores(ValueId x, ValueId& qk);
  bool masked(const Eqn& add, ValueId& qk);
  bool transform(ValueId s, ValueId& qk);
  bool keys(const Eqn& qk, ValueId v_exp);
  ValueId repeat(ValueId e, int64_t& n_rep, Shape& as);
  bool live(ValueId k_rows, ValueId v_rows);
  ValueId live_count(ValueId pred, int64_t batch, int64_t lk, const Shape& want) const;
  bool guarded(ValueId n, int64_t lk);
  bool witnessed(ValueId len, double lo, double hi) const;
  bool bounds(ValueId at_least, ValueId at_most, ValueId len, double lo, double hi) const;
  bool check_types(const Eqn& qk);
  bool exclusive();
  void drop_implied_mask();
  bool implied_by_len(ValueId mask) const;
  void split_key();
  void read_stored_kv();
  void paged_key();
  struct PoolView {
    ValueId pool = -1, read = -1;
    bool transposed = false;
  };
  PoolView pool_view(ValueId x) const;
  bool typed(const Eqn& pv);

  const ir::Graph& g_;
  const Uses& uses_;
  std::vector<size_t> chain_;             // accepted eqns; sorted once complete
  std::vector<const Eqn*> score_eqns_;    // eqns whose result has the scores' type
  std::string why_;
  size_t root_ = 0;
  ValueId score_pred_ = -1;               // live form: the score select's predicate
  ValueId k_exp_ = -1, v_exp_ = -1;       // k and v as the matmuls read them
  ValueId q_ = -1, k_ = -1, v_ = -1, shared_ = -1, mask_ = -1, len_ = -1, read_ = -1;
  ValueId unclamped_len_ = -1;            // live form: what the guard clamps into len_
  std::string kept_view_;                 // a paged view left gathered, and why
  Shape k_as_, v_as_;                     // set: k/v are read through a reshape to this
  ir::AttnParams p_;
  std::vector<AttnOperand> operands_;
};

bool Matcher::attend(size_t root) {
  const Eqn& pv = g_.eqns[root];
  if (pv.op != OpKind::kMatMul) return decline("not a matmul");
  root_ = root;
  chain_.push_back(root);
  ValueId x = -1, qk = -1;
  if (!softmax(pv.in[0], x) || !scores(x, qk)) return false;
  const Eqn& qk_eqn = *def(qk, OpKind::kMatMul);  // scores() found it
  if (!keys(qk_eqn, pv.in[1]) || !check_types(qk_eqn) || !exclusive()) return false;
  split_key();
  read_stored_kv();
  paged_key();
  drop_implied_mask();
  return typed(pv);
}

// ops::masked_softmax over the last axis: div(ex, select(none, 1, reduce_sum(ex))),
// ex = exp(sub(x, select(none, 0, m))), m = reduce_max(x), none = compare(m, -inf, eq):
// the guard is what makes a row that sees no key zeros, as the fused op defines it, so a
// plain softmax (0/0 there) is not this chain.
bool Matcher::softmax(ValueId p, ValueId& x) {
  const Eqn* div = take(def(p, OpKind::kDiv));
  if (!div) return decline("the matmul's left operand is not a softmax (no div)");
  const ValueId ex = div->in[0];
  const Eqn* divisor = take(def(div->in[1], OpKind::kSelect));
  if (!divisor || literal(divisor->in[1]) != 1.0) return decline("softmax: the divisor is not select(none, 1, sum)");
  const Eqn* sum = take(def(divisor->in[2], OpKind::kReduceSum));
  if (!sum || sum->in[0] != ex) return decline("softmax: the divisor is not the sum of the same exp");
  if (!last_axis_keepdim(*sum)) return decline("softmax: the sum is not over the last axis with keepdim");
  const Eqn* exp = take(def(ex, OpKind::kExp));
  if (!exp) return decline("softmax: the numerator is not an exp");
  const Eqn* sub = take(def(exp->in[0], OpKind::kSub));
  if (!sub) return decline("softmax: the exp is not of max-subtracted scores");
  x = sub->in[0];
  const Eqn* shift = take(def(sub->in[1], OpKind::kSelect));
  if (!shift || literal(shift->in[1]) != 0.0) return decline("softmax: the subtracted value is not select(none, 0, max)");
  const Eqn* max = take(def(shift->in[2], OpKind::kReduceMax));
  if (!max || max->in[0] != x) return decline("softmax: the subtracted value is not the max of the same scores");
  if (!last_axis_keepdim(*max)) return decline("softmax: the max is not over the last axis with keepdim");
  const Eqn* none = take(def(shift->in[0], OpKind::kCompare));
  if (!none || divisor->in[0] != shift->in[0] || none->in[0] != max->out || none->params.cmp != ir::CmpDir::kEq ||
      literal(none->in[1]) != -kInf) {
    return decline("softmax: the guard is not one compare(max, -inf, eq) for both selects");
  }
  score_eqns_.insert(score_eqns_.end(), {div, exp, sub});
  return true;
}

// The softmax input: [select(active, ·, -inf)] of [add(·, mask)] of the score transform.
bool Matcher::scores(ValueId x, ValueId& qk) {
  ValueId s = x;
  if (const Eqn* sel = def(x, OpKind::kSelect)) {
    const std::optional<double> fill = literal(sel->in[2]);
    if (!fill || *fill != -kInf) return decline("the scores are selected, but not to a -inf literal");
    score_eqns_.push_back(take(sel));
    score_pred_ = sel->in[0];
    s = sel->in[1];
  }
  if (const Eqn* add = def(s, OpKind::kAdd)) return masked(*add, qk);
  return transform(s, qk);
}

// add(scores, mask) in either operand order; the mask is any f32 [1|B, 1|Hq, Lq, Lk] value.
bool Matcher::masked(const Eqn& add, ValueId& qk) {
  const size_t mark = chain_.size(), score_mark = score_eqns_.size();
  const ir::AttnParams saved = p_;
  std::string first_why;
  for (size_t side = 0; side < 2; ++side) {
    const ValueId mask = add.in[1 - side];
    score_eqns_.push_back(take(&add));
    if (transform(add.in[side], qk)) {
      const TensorType& s = g_.type(qk);
      const TensorType& m = g_.type(mask);
      const bool ok = m.dtype == DType::kF32 && m.shape.size() == 4 && s.shape.size() == 4 &&
                      (m.shape[0] == 1 || m.shape[0] == s.shape[0]) && (m.shape[1] == 1 || m.shape[1] == s.shape[1]) &&
                      m.shape[2] == s.shape[2] && m.shape[3] == s.shape[3];
      if (!ok) return decline(str_cat("the mask ", ref(mask), ":", ir::type_str(m), " is not f32[1|B,1|Hq,Lq,Lk]"));
      mask_ = mask;
      p_.has_mask = true;
      return true;
    }
    if (side == 0) first_why = why_;
    chain_.resize(mark);
    score_eqns_.resize(score_mark);
    p_ = saved;
  }
  return decline(first_why);
}

// [softcap: mul(tanh(div(·, c)), c)] of [mul(·, scale literal)] of matmul(q, kᵀ).
bool Matcher::transform(ValueId s, ValueId& qk) {
  if (const Eqn* outer = def(s, OpKind::kMul)) {
    const LiteralSide c = with_literal(*outer);
    const Eqn* tanh = c.value ? def(c.other, OpKind::kTanh) : nullptr;
    const Eqn* div = tanh ? def(tanh->in[0], OpKind::kDiv) : nullptr;
    const std::optional<double> c_in = div ? literal(div->in[1]) : std::nullopt;
    if (c_in && *c_in == *c.value && *c_in > 0 && std::isfinite(*c_in)) {
      score_eqns_.insert(score_eqns_.end(), {take(outer), take(tanh), take(div)});
      p_.softcap = *c_in;
      s = div->in[0];
    }
  }
  if (const Eqn* mul = def(s, OpKind::kMul)) {
    const LiteralSide c = with_literal(*mul);
    if (!c.value) return decline(str_cat("the scores ", ref(mul->out), " are multiplied by a tensor, not a scalar literal"));
    if (!std::isfinite(*c.value)) return decline("the scale is not finite");
    score_eqns_.push_back(take(mul));
    p_.scale = *c.value;
    s = c.other;
  }
  const Eqn* mm = def(s, OpKind::kMatMul);
  if (!mm) return decline(str_cat("the scores ", ref(s), " are not matmul(q, kᵀ) under scale, softcap and mask"));
  score_eqns_.push_back(take(mm));
  qk = s;
  return true;
}

// kᵀ = transpose(k_exp, (0,1,3,2)); k_exp and v_exp are repeat_kv of the keys and values
// (or of their live selects).
bool Matcher::keys(const Eqn& qk, ValueId v_exp) {
  q_ = qk.in[0];
  const Eqn* kt = take(def(qk.in[1], OpKind::kTranspose));
  if (!kt || kt->params.axes != std::vector<int64_t>{0, 1, 3, 2}) {
    return decline("the scores' right operand is not transpose(k, (0,1,3,2))");
  }
  k_exp_ = kt->in[0];
  v_exp_ = v_exp;
  int64_t k_rep = 1, v_rep = 1;
  const ValueId k = repeat(k_exp_, k_rep, k_as_), v = repeat(v_exp_, v_rep, v_as_);
  if (k_rep != v_rep) return decline(str_cat("k is repeated ", k_rep, "x but v ", v_rep, "x"));
  p_.n_rep = k_rep;
  if (score_pred_ >= 0) {
    if (!k_as_.empty() || !v_as_.empty()) return decline("the live key/value rows are reshaped before repeat_kv");
    return live(k, v);
  }
  k_ = k;
  v_ = v;
  return true;
}

// ops::repeat_kv: reshape [B,H,1,L,D] -> broadcast [B,H,n,L,D] -> reshape [B,H*n,L,D], or one
// broadcast [B,1,L,D] -> [B,n,L,D] (what folding it leaves for one key head). Anything else
// is the operand itself, n = 1. The first reshape may read any value of B*H*L*D elements
// (canonicalize folds reshape chains); `as` is then the [B,H,L,D] the operand is read as.
ValueId Matcher::repeat(ValueId e, int64_t& n_rep, Shape& as) {
  n_rep = 1;
  as.clear();
  const Shape& out = shape(e);
  if (out.size() != 4) return e;
  if (const Eqn* r2 = def(e, OpKind::kReshape)) {
    const Eqn* bc = def(r2->in[0], OpKind::kBroadcast);
    const Eqn* r1 = bc ? def(bc->in[0], OpKind::kReshape) : nullptr;
    if (!r1 || shape(r1->out).size() != 5 || shape(bc->out).size() != 5) return e;
    const Shape& x = shape(r1->out);
    const int64_t b = x[0], h = x[1], l = x[3], d = x[4], n = shape(bc->out)[2];
    if (x[2] != 1 || shape(bc->out) != Shape{b, h, n, l, d} || out != Shape{b, h * n, l, d}) return e;
    take(r2);
    take(bc);
    take(r1);
    n_rep = n;
    if (shape(r1->in[0]) != Shape{b, h, l, d}) as = {b, h, l, d};
    return r1->in[0];
  }
  if (const Eqn* bc = def(e, OpKind::kBroadcast)) {
    const Shape& x = shape(bc->in[0]);
    if (x.size() == 4 && x[1] == 1 && x[0] == out[0] && x[2] == out[2] && x[3] == out[3]) {
      take(bc);
      n_rep = out[1];
      return bc->in[0];
    }
  }
  return e;
}

// attention_live: k and v rows selected to 0 and scores to -inf by one `iota < n`, n guarded.
bool Matcher::live(ValueId k_rows, ValueId v_rows) {
  const Eqn* ks = def(k_rows, OpKind::kSelect);
  const Eqn* vs = def(v_rows, OpKind::kSelect);
  if (!ks || !vs || literal(ks->in[2]) != 0.0 || literal(vs->in[2]) != 0.0) {
    return decline("the scores are selected to -inf but the key/value rows are not selected to 0");
  }
  const TensorType& k = g_.type(ks->in[1]);
  if (k.shape.size() != 4 || g_.type(ks->out) != k || g_.type(vs->out) != g_.type(vs->in[1])) {
    return decline("the live selects change the key/value types");
  }
  const int64_t batch = k.shape[0], lk = k.shape[2];
  const ValueId n = live_count(score_pred_, batch, lk, {batch, 1, 1, lk});
  if (n < 0 || live_count(ks->in[0], batch, lk, {batch, 1, lk, 1}) != n ||
      live_count(vs->in[0], batch, lk, {batch, 1, lk, 1}) != n) {
    return decline("the live predicates are not one iota < n over the keys");
  }
  if (!guarded(n, lk)) return false;
  take(ks);
  take(vs);
  k_ = ks->in[1];
  v_ = vs->in[1];
  len_ = n;
  p_.has_len = true;
  return true;
}

// reshape(compare(iota i32[1|B, Lk] axis 1, reshape(n, [B, 1]), lt), want): returns n, or -1.
ValueId Matcher::live_count(ValueId pred, int64_t batch, int64_t lk, const Shape& want) const {
  const Eqn* r = def(pred, OpKind::kReshape);
  if (!r || shape(pred) != want) return -1;
  const Eqn* cmp = def(r->in[0], OpKind::kCompare);
  if (!cmp || cmp->params.cmp != ir::CmpDir::kLt || shape(cmp->out) != Shape{batch, lk}) return -1;
  const Eqn* iota = def(cmp->in[0], OpKind::kIota);
  const TensorType& keys = g_.type(cmp->in[0]);
  if (!iota || iota->params.axis != 1 || keys.dtype != DType::kI32 || keys.shape.size() != 2 ||
      (keys.shape[0] != 1 && keys.shape[0] != batch) || keys.shape[1] != lk) {
    return -1;
  }
  const Eqn* nr = def(cmp->in[1], OpKind::kReshape);
  if (!nr || shape(nr->out) != Shape{batch, 1}) return -1;
  const ValueId n = nr->in[0];
  return g_.type(n) == TensorType{DType::kI32, {batch}} ? n : -1;
}

// n = max(min(len, hi), lo) with literal 1 <= lo <= hi <= Lk, and a declared validation that
// len itself lies in lo..hi: a bad length fails the step instead of being clamped silently.
bool Matcher::guarded(ValueId n, int64_t lk) {
  const Eqn* mx = def(n, OpKind::kMax);
  const LiteralSide lo = mx ? with_literal(*mx) : LiteralSide{};
  const Eqn* mn = lo.value ? def(lo.other, OpKind::kMin) : nullptr;
  const LiteralSide hi = mn ? with_literal(*mn) : LiteralSide{};
  if (!hi.value) return decline("the live length is not an index guard's clamp with literal bounds");
  if (*lo.value < 1 || *hi.value > static_cast<double>(lk) || *lo.value > *hi.value) {
    return decline(str_cat("the index guard bounds ", *lo.value, "..", *hi.value, " are not within 1..", lk));
  }
  if (!witnessed(hi.other, *lo.value, *hi.value)) {
    return decline(str_cat("the live length ", ref(hi.other), " has no declared validation witness of its guard"));
  }
  unclamped_len_ = hi.other;
  return true;
}

bool Matcher::witnessed(ValueId len, double lo, double hi) const {
  for (const ir::Validation& c : g_.validations) {
    const Eqn* both = def(c.witness, OpKind::kAnd);
    if (!both) continue;
    if (bounds(both->in[0], both->in[1], len, lo, hi) || bounds(both->in[1], both->in[0], len, lo, hi)) return true;
  }
  return false;
}

// compare(len, a, ge) and compare(len, b, le) with lo <= a and b <= hi: inside the clamp.
bool Matcher::bounds(ValueId at_least, ValueId at_most, ValueId len, double lo, double hi) const {
  const Eqn* ge = def(at_least, OpKind::kCompare);
  const Eqn* le = def(at_most, OpKind::kCompare);
  if (!ge || !le || ge->params.cmp != ir::CmpDir::kGe || le->params.cmp != ir::CmpDir::kLe) return false;
  if (ge->in[0] != len || le->in[0] != len) return false;
  const std::optional<double> a = literal(ge->in[1]), b = literal(le->in[1]);
  return a && b && *a >= lo && *b <= hi;
}

// The fused op's shapes, from the chain: no batch broadcast inside it, all f32.
bool Matcher::check_types(const Eqn& qk) {
  const TensorType& s = g_.type(qk.out);
  if (s.dtype != DType::kF32 || s.shape.size() != 4) return decline(str_cat("the scores are ", ir::type_str(s), ", not f32 rank 4"));
  for (const Eqn* e : score_eqns_) {
    if (g_.type(e->out) != s) return decline(str_cat("the score chain changes type at ", ref(e->out)));
  }
  const int64_t batch = s.shape[0], hq = s.shape[1], lq = s.shape[2], lk = s.shape[3];
  const Shape& q = shape(q_);
  if (q.size() != 4 || q[0] != batch || q[1] != hq || q[2] != lq) return decline("q is not [B, Hq, Lq, Dk] of the scores");
  if (shape(k_exp_) != Shape{batch, hq, lk, q[3]}) {
    return decline(str_cat("the key the scores read is ", ir::type_str(g_.type(k_exp_)), ", not [B, Hq, Lk, Dk] ",
                           "(a key head the matmul broadcasts, which the Attention typing rule cannot type)"));
  }
  const Shape& v = shape(v_exp_);
  if (v.size() != 4 || v[0] != batch || v[1] != hq || v[2] != lk) return decline("the value the output reads is not [B, Hq, Lk, Dv]");
  for (size_t e : chain_) {
    const Eqn& eq = g_.eqns[e];
    if (eq.op != OpKind::kCompare && g_.type(eq.out).dtype != DType::kF32) return decline(str_cat(ref(eq.out), " is not f32"));
  }
  return true;
}

// Every chain eqn but the root is read only inside the chain and is not exported.
bool Matcher::exclusive() {
  std::sort(chain_.begin(), chain_.end());
  chain_.erase(std::unique(chain_.begin(), chain_.end()), chain_.end());
  for (size_t e : chain_) {
    const ValueId out = g_.eqns[e].out;
    if (e == root_) continue;  // the result: read by whatever follows
    if (uses_.is_root(out)) return decline(str_cat(ref(out), " is also an output, a donation or a witness"));
    for (size_t r : uses_.readers(out)) {
      if (!std::binary_search(chain_.begin(), chain_.end(), r)) {
        return decline(str_cat(ref(out), " is also read by ", ref(g_.eqns[r].out), " outside the chain"));
      }
    }
  }
  return true;
}

// MLA: k = concat(k_part, k_one, axis 3) whose pieces only the chain reads, k_one the part
// every head shares: broadcast(k_src [B,1,L,s] -> [B,Hkv,L,s]), or, in a live chain with one
// key head (MLA's latent cache, ops::attention_latent: two caches), k_src [B,1,L,s] itself.
// Any one-head key that is a concat could be split, but only there are the pieces stored
// apart; elsewhere (a rope's halves before the rope pass) the key stays whole. Otherwise k
// stays the whole key (still correct, only not split).
void Matcher::split_key() {
  const Eqn* cat = def(k_, OpKind::kConcat);
  if (!cat || !k_as_.empty() || cat->in.size() != 2 || cat->params.axis != 3 || k_ == v_ || k_ == q_ || k_ == mask_) return;
  if (!only_read_by(k_, chain_)) return;
  const Eqn* bc = def(cat->in[1], OpKind::kBroadcast);
  if (bc && !only_read_by(bc->out, {index(cat)})) return;
  if (!bc && !p_.has_len) return;
  const ValueId src = bc ? bc->in[0] : cat->in[1];
  const Shape& from = shape(src);
  const Shape& full = shape(cat->in[1]);
  if (from.size() != 4 || from[1] != 1 || from[0] != full[0] || from[2] != full[2] || from[3] != full[3]) return;
  chain_.push_back(index(cat));
  if (bc) chain_.push_back(index(bc));
  std::sort(chain_.begin(), chain_.end());
  k_ = cat->in[0];
  shared_ = src;
  p_.has_shared = true;
}

// An f16 cache widened for the chain (ops::attention_cached over an f16 KV cache): the fused
// op reads the f16 values themselves, which is exact because f16 -> f32 is. All of k, v
// (and k_shared) must be such casts, since the op takes one K/V dtype. The casts stay in
// the graph for any other reader; dce drops them when the chain was their only one.
void Matcher::read_stored_kv() {
  auto source = [&](ValueId x) -> ValueId {
    const Eqn* c = def(x, OpKind::kCast);
    return c && g_.type(c->in[0]).dtype == DType::kF16 && g_.type(x).dtype == DType::kF32 ? c->in[0] : -1;
  };
  const ValueId k = source(k_), v = source(v_), s = p_.has_shared ? source(shared_) : -1;
  if (k < 0 || v < 0 || (p_.has_shared && s < 0)) return;
  k_ = k;
  v_ = v;
  if (p_.has_shared) shared_ = s;
}

// Paged keys (ops::attention_paged, attention_latent_paged): k and v (and a split key's
// k_shared), after the widening casts, are each transpose(gather(pool, read), (0,2,1,3)) of a
// rank-3 pool [S, H, D], through the SAME read value, and that value is a read-map slot
// declared over S rows: every binder refuses a word outside [0, S) before a step runs
// (ir::check_slot), which proves that the op may address the pools in place as pool row
// read[b, t]. The op then takes the pools and read, and nothing gathers or transposes; the
// gathers and transposes stay for any other reader, and dce drops them when the chain was
// the only one. Anything else keeps the gathered views as k and v (still correct, only not
// paged), and kept_view_ says why.
void Matcher::paged_key() {
  const PoolView k = pool_view(k_), v = pool_view(v_);
  if (k.pool < 0 && v.pool < 0) return;
  auto keep = [&](std::string why) { kept_view_ = std::move(why); };
  if (k.pool < 0 || v.pool < 0) return keep("only one of k and v is a gathered view");
  const PoolView s = p_.has_shared ? pool_view(shared_) : PoolView{};
  if (p_.has_shared && s.pool < 0) return keep("the split key's shared part is not a gathered view");
  if (!k.transposed || !v.transposed || (p_.has_shared && !s.transposed)) {
    return keep("a gathered view is not transposed (0,2,1,3): the map does not index the key axis");
  }
  if (shape(k.pool).size() != 3 || shape(v.pool).size() != 3 || (p_.has_shared && shape(s.pool).size() != 3)) {
    return keep("a gathered table is not a pool [S, Hkv, D]");
  }
  if (k.read != v.read || (p_.has_shared && s.read != k.read)) {
    return keep(str_cat("k and v are read through different maps ", ref(k.read), " and ", ref(v.read)));
  }
  if (!k_as_.empty() || !v_as_.empty()) return keep("the key is read through a reshape");
  const ir::Value& read = g_.value(k.read);
  const int64_t rows = shape(k.pool)[0];
  if (read.kind != ir::ValueKind::kSlot || read.slot != ir::Slot::kSlotMap || read.slot_bound != rows ||
      shape(v.pool)[0] != rows || (p_.has_shared && shape(s.pool)[0] != rows)) {
    return keep(str_cat("the read map ", ref(k.read), " is not a read-map slot declared over the pool's ", rows,
                        " rows: nothing proves its words are pool rows"));
  }
  k_ = k.pool;
  v_ = v.pool;
  if (p_.has_shared) shared_ = s.pool;
  read_ = k.read;
  p_.has_read = true;
}

// x = transpose(gather(pool, read), perm): the pool, the map and whether perm is (0,2,1,3).
Matcher::PoolView Matcher::pool_view(ValueId x) const {
  const Eqn* tr = def(x, OpKind::kTranspose);
  const Eqn* ga = tr ? def(tr->in[0], OpKind::kGather) : nullptr;
  if (!ga) return {};
  return {ga->in[0], ga->in[1], tr->params.axes == std::vector<int64_t>{0, 2, 1, 3}};
}

// A one-query causal mask that the live length already implies: select(compare(iota, p, le),
// 0, -inf) over the keys, with len = clamp(p + 1) under its witness (so len = p + 1). Every
// key t < len has t <= p, where the mask adds 0, and the live length drops the rest: adding
// 0 is exact, so the op without the mask has the same results, reads one value less per key,
// and is the length-only form that decode kernels take (exec/cuda). The mask's eqns stay for
// any other reader; dce drops them when none is left.
void Matcher::drop_implied_mask() {
  if (!p_.has_mask || !p_.has_len || !implied_by_len(mask_)) return;
  p_.has_mask = false;
  mask_ = -1;
}

bool Matcher::implied_by_len(ValueId mask) const {
  if (shape(mask) != Shape{1, 1, 1, shape(mask).back()}) return false;
  const int64_t lk = shape(mask).back();
  const Eqn* r = def(mask, OpKind::kReshape);
  const Eqn* sel = r ? def(r->in[0], OpKind::kSelect) : nullptr;
  if (!sel || literal(sel->in[1]) != 0.0 || literal(sel->in[2]) != -kInf) return false;
  const Eqn* cmp = def(sel->in[0], OpKind::kCompare);
  if (!cmp || cmp->params.cmp != ir::CmpDir::kLe) return false;
  const Eqn* iota = def(cmp->in[0], OpKind::kIota);
  if (!iota || iota->params.axis != 1 || g_.type(cmp->in[0]) != TensorType{DType::kI32, {1, lk}}) return false;
  const Eqn* pr = def(cmp->in[1], OpKind::kReshape);
  if (!pr || shape(pr->out) != Shape{1, 1}) return false;
  // The guard live() proved witnessed clamps pos + 1: len_ is pos + 1.
  const Eqn* next = def(unclamped_len_, OpKind::kAdd);
  const LiteralSide one = next ? with_literal(*next) : LiteralSide{};
  return one.value == 1.0 && one.other == pr->in[0];
}

// The operands in AttnParams' order, f32 (k, v, k_shared: f32 or all f16), none computed inside the chain, and the typing
// rule's verdict equal to the type of the matmul being replaced.
bool Matcher::typed(const Eqn& pv) {
  operands_ = {{q_, {}}, {k_, k_as_}, {v_, v_as_}};
  if (p_.has_shared) operands_.push_back({shared_, {}});
  if (p_.has_mask) operands_.push_back({mask_, {}});
  for (size_t i = 0; i < operands_.size(); ++i) {
    const TensorType& t = g_.type(operands_[i].value);
    const bool kv = i == 1 || i == 2 || (p_.has_shared && i == 3);
    if (t.dtype != DType::kF32 && !(kv && t.dtype == DType::kF16)) {
      return decline(str_cat(ref(operands_[i].value), " is ", ir::type_str(t), ": the fused op takes f32 here"));
    }
  }
  if (p_.has_len) operands_.push_back({len_, {}});
  if (p_.has_read) operands_.push_back({read_, {}});
  std::vector<TensorType> types;
  for (const AttnOperand& o : operands_) {
    const int producer = g_.value(o.value).producer;
    if (producer >= 0 && std::binary_search(chain_.begin(), chain_.end(), static_cast<size_t>(producer))) {
      return decline(str_cat("operand ", ref(o.value), " is computed inside the chain"));
    }
    TensorType t = g_.type(o.value);
    if (!o.reshape.empty()) t.shape = o.reshape;
    types.push_back(t);
  }
  ir::Params params;
  params.attn = p_;
  Result<TensorType> t = ir::infer(OpKind::kAttention, params, types);
  if (!t) return decline(str_cat("the Attention typing rule refuses it: ", t.error().message()));
  if (*t != g_.type(pv.out)) return decline(str_cat("the fused type ", ir::type_str(*t), " differs from ", ir::type_str(g_.type(pv.out))));
  return true;
}

}  // namespace

MatchResult match_attention(const ir::Graph& g, const Uses& uses, size_t root) { return Matcher(g, uses).run(root); }

}  // namespace attention

namespace {

using attention::AttnMatch;

void emit_attention(Rewriter& rw, const AttnMatch& m) {
  std::vector<ir::V> in;
  for (const attention::AttnOperand& o : m.operands) {
    ir::V v = rw.get(o.value);
    if (!o.reshape.empty()) v = rw.builder().reshape(v, o.reshape);
    in.push_back(v);
  }
  ir::Params params;
  params.attn = m.params;
  ir::V out = rw.emit(ir::OpKind::kAttention, std::move(in), params);
  const ir::ValueId old = rw.src().eqns[m.root].out;
  rw.replace(old, out);
  const std::string& name = rw.src().value(old).name;
  if (!name.empty() && out.valid()) rw.builder().name(out, name);
}

// Matches every matmul as a possible final one, then rebuilds the graph: each match's root
// becomes its Attention eqn and the rest of its chain is dropped (only the chain read it).
Result<ir::Graph> rewrite_attention(const ir::Graph& g) {
  const Uses uses(g);
  std::vector<std::optional<AttnMatch>> at(g.eqns.size());
  std::vector<bool> absorbed(g.eqns.size(), false);
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (g.eqns[i].op != ir::OpKind::kMatMul) continue;
    attention::MatchResult r = attention::match_attention(g, uses, i);
    if (!r.match) continue;
    const std::vector<size_t>& chain = r.match->absorbed;
    if (std::any_of(chain.begin(), chain.end(), [&](size_t e) { return absorbed[e] || ir::is_collective(g.eqns[e].op); })) {
      continue;
    }
    for (size_t e : chain) absorbed[e] = true;
    at[i] = std::move(r.match);
  }
  return rewrite_each(g, [&](Rewriter& rw, size_t i) {
    if (at[i]) emit_attention(rw, *at[i]);
    return static_cast<bool>(absorbed[i]);
  });
}

}  // namespace

Pass attention_pass() { return {"attention", Exactness::kReassociating, rewrite_attention}; }

}  // namespace kvf::compile
