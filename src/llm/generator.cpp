// Generator: slots, graph cache and the position counter around the oracle.
#include "llm/generator.h"

namespace kvf::llm {

Generator::Generator(const models::Model& model, int64_t capacity, eval::EvalOptions opts)
    : model_(model), capacity_(capacity > 0 ? capacity : model.config.context), oracle_(opts) {}

int64_t Generator::state_elements() const {
  int64_t n = 0;
  for (const auto& [name, buf] : state_) n += buf.numel();
  return n;
}

void Generator::reset() {
  state_.clear();
  pos_ = 0;
}

Result<const ir::Graph*> Generator::graph_for(int64_t n_tokens) {
  auto it = graphs_.find(n_tokens);
  if (it != graphs_.end()) return &it->second;
  Result<ir::Graph> g = model_.trace_step({.n_tokens = n_tokens, .capacity = capacity_, .cached = true});
  if (!g) return g.take_error();
  return &graphs_.emplace(n_tokens, std::move(*g)).first->second;
}

Result<std::vector<float>> Generator::step(const std::vector<int32_t>& tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_input("generator: a step needs at least one token");
  if (pos_ + n > capacity_) {
    return kvf::capacity("generator: ", pos_, " cached + ", n, " new tokens exceed the KV cache capacity ", capacity_);
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= model_.config.vocab) {
      return invalid_input("generator: token id ", t, " is outside the vocabulary of ", model_.config.vocab);
    }
  }
  Result<const ir::Graph*> g = graph_for(n);
  if (!g) return g.take_error();
  Status s = eval::allocate_state(**g, state_);
  if (!s) return s.take_error();
  std::vector<int32_t> pos(tokens.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(pos_ + static_cast<int64_t>(i));
  Result<eval::Buffer> tok = eval::Buffer::i32({n}, tokens);
  if (!tok) return tok.take_error();
  Result<eval::Buffer> p = eval::Buffer::i32({n}, pos);
  if (!p) return p.take_error();
  eval::SlotBindings slots{{ir::Slot::kToken, std::move(*tok)}, {ir::Slot::kPos, std::move(*p)}};
  Result<eval::Outputs> out = oracle_.run(**g, slots, state_);
  if (!out) return out.take_error();
  pos_ += n;
  const eval::Buffer& logits = out->at("logits");
  return std::vector<float>(logits.data.begin(), logits.data.end());
}

}  // namespace kvf::llm
